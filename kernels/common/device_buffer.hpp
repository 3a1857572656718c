// device_buffer.hpp: DeviceBuffer<T>, the one owner of device memory (cudaMalloc / cudaFree):
// n elements of T, zeroed at allocation, move-only; host <-> device copies for tests and
// benchmarks. DeviceBytes is the untyped form (a byte count; as<U>() views it as U).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/common/cuda_check.hpp"

namespace sb::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) release(), p_ = std::exchange(o.p_, nullptr), n_ = std::exchange(o.n_, 0);
    return *this;
  }

  // Reallocates n elements, zeroed (a no-op when n is unchanged). The zeroing runs on the legacy
  // default stream, which non-blocking streams do not wait for: it is finished before this returns,
  // so that a first upload on such a stream cannot land before it and be wiped.
  void resize(int64_t n) {
    if (n == n_ && p_) return;
    release();
    if (n > 0) {
      CUDA_CHECK(cudaMalloc(&p_, bytes_of(n)));
      CUDA_CHECK(cudaMemset(p_, 0, bytes_of(n)));
      CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    }
    n_ = n;
  }
  T* data() const { return p_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return bytes_of(n_); }
  template <class U>
  U* as() const { return reinterpret_cast<U*>(p_); }

  // Synchronous copies of the first n elements.
  void upload(const T* src, int64_t n) {
    if (n > n_) throw_error("DeviceBuffer::upload: more elements than the buffer holds");
    if (n > 0) CUDA_CHECK(cudaMemcpy(p_, src, bytes_of(n), cudaMemcpyHostToDevice));
  }
  void download(T* dst, int64_t n) const {
    if (n > n_) throw_error("DeviceBuffer::download: more elements than the buffer holds");
    if (n > 0) CUDA_CHECK(cudaMemcpy(dst, p_, bytes_of(n), cudaMemcpyDeviceToHost));
  }
  // Sets every byte to `value` (0xFF poisons float and bf16 data with NaNs).
  void fill_bytes(int value) {
    if (n_ > 0) CUDA_CHECK(cudaMemset(p_, value, bytes()));
  }

 private:
  static size_t bytes_of(int64_t n) { return static_cast<size_t>(n) * sizeof(T); }
  void release() noexcept {
    if (p_) cudaFree(p_);
    p_ = nullptr, n_ = 0;
  }
  T* p_ = nullptr;
  int64_t n_ = 0;
};

using DeviceBytes = DeviceBuffer<unsigned char>;

// A device copy of a host vector, as bytes.
template <class T>
DeviceBytes to_device(const std::vector<T>& v) {
  DeviceBytes buf(static_cast<int64_t>(v.size() * sizeof(T)));
  buf.upload(reinterpret_cast<const unsigned char*>(v.data()), buf.size());
  return buf;
}

// The first n elements of a device buffer as a host vector.
template <class T, class S>
std::vector<T> to_host(const DeviceBuffer<S>& buf, size_t n) {
  std::vector<T> v(n);
  if (n * sizeof(T) > buf.bytes()) throw_error("to_host: more elements than the buffer holds");
  if (n > 0) CUDA_CHECK(cudaMemcpy(v.data(), buf.data(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace sb::cuda
