// ops_launch.cuh: what the per-token op kernels (ops_elementwise.cu, ops_path_wpath.cu) share:
// launch sizes, the launch check, pointer alignment, warp sums, a stable sigmoid and the row-chunk count of the
// fixed-order column sums (ReduceScratch, kernels/ops_cuda.hpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda_check.hpp"
#include "kernels/ops_cuda.hpp"

namespace sb::cuda::ops_detail {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}
inline void check_launch() { CUDA_CHECK(cudaGetLastError()); }
// Whether p is a multiple of `bytes` (the vectorised kernels' precondition).
inline bool aligned_to(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float sigmoidf_stable(float x) {
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}

constexpr int kRowsPerBlock = 8;  // one warp per row, 8 rows per block (norms, PaTH w path)

// Row chunks for a sum of `cols` columns over N rows with this scratch (1: no scratch, one pass).
int64_t reduce_chunks(int64_t N, int64_t cols, ReduceScratch scratch);

}  // namespace sb::cuda::ops_detail
