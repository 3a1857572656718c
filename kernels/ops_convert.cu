// ops_convert.cu: fp32 <-> bf16 conversion kernels used by the bf16 training precision (the
// attention kernels take bf16 q/k/v/out and their gradients; the model keeps fp32 activations).
// Declarations: kernels/ops_cuda.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/ops_cuda.hpp"

namespace sb::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void f32_to_bf16_kernel(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

__global__ void bf16_to_f32_kernel(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = __bfloat162float(__ushort_as_bfloat16(src[i]));
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);  // grid-stride beyond that
}

}  // namespace

void f32_to_bf16_cuda(uint16_t* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  f32_to_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK(cudaGetLastError());
}

void bf16_to_f32_cuda(float* dst, const uint16_t* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  bf16_to_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sb::cuda
