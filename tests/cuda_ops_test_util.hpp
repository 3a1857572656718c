// cuda_ops_test_util.hpp: what test_cuda_ops.cpp and test_cuda_ops_bf16.cpp share: Dev (a device copy
// of a host vector), randn, expect_close (element-wise tolerance), the CudaOps fixture (skips without
// a device) and the awkward row counts kTs. CUDA builds only.
#pragma once
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/cuda_check.hpp"
#include "model/cuda/gpu_runner.hpp"

namespace sb::test_cuda {

// A device copy of a host vector (RAII), downloaded with host().
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)));
    if (n) CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit Dev(size_t count) : Dev(std::vector<T>(count, T(0))) {}
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  std::vector<T> host() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    if (n) CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

inline std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// Element-wise |a - b| <= atol + rtol |b|; reports the first failure.
inline void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double rtol, double atol,
                         const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double d = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
    if (!(d <= atol + rtol * std::fabs(static_cast<double>(cpu[i])))) {
      ADD_FAILURE() << what << ": element " << i << " gpu " << gpu[i] << " cpu " << cpu[i];
      return;
    }
  }
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  }
  cudaStream_t s = nullptr;  // the default stream
};

inline constexpr int64_t kTs[] = {1, 7, 113, 257};

}  // namespace sb::test_cuda
