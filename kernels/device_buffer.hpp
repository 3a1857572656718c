// device_buffer.hpp: RAII ownership of device memory (cudaMalloc / cudaFree), move-only, plus
// typed upload/download helpers used by tests and benchmarks.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda_check.hpp"

namespace sb::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { reset(bytes); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Frees the old allocation and allocates `bytes` (nothing for 0).
  void reset(size_t bytes) {
    release();
    if (bytes > 0) CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
  }
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

  // Host <-> device copies of the whole buffer or a prefix (synchronous).
  void upload(const void* src, size_t bytes) {
    if (bytes > bytes_) fail("DeviceBuffer::upload: {} bytes into a buffer of {}", bytes, bytes_);
    if (bytes) CUDA_CHECK(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
  }
  void download(void* dst, size_t bytes) const {
    if (bytes > bytes_) fail("DeviceBuffer::download: {} bytes from a buffer of {}", bytes, bytes_);
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
  }
  // Sets every byte to `value` (e.g. 0xFF poisons float and bf16 data with NaNs).
  void fill_bytes(int value) {
    if (bytes_) CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
  }

 private:
  void release() noexcept {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A device copy of a host vector.
template <class T>
DeviceBuffer to_device(const std::vector<T>& v) {
  DeviceBuffer buf(v.size() * sizeof(T));
  buf.upload(v.data(), v.size() * sizeof(T));
  return buf;
}

// The first n elements of a device buffer as a host vector.
template <class T>
std::vector<T> to_host(const DeviceBuffer& buf, size_t n) {
  std::vector<T> v(n);
  buf.download(v.data(), n * sizeof(T));
  return v;
}

}  // namespace sb::cuda
