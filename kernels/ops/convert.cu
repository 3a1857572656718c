// convert.cu: fp32 <-> bf16 conversion kernels used by the bf16 training precision (the
// attention kernels take bf16 q/k/v/out and their gradients; the model keeps fp32 activations).
// Declarations: kernels/ops/ops.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

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

// Four elements per thread (src, dst 16- and 8-byte aligned; n / 4 groups, the caller does the tail).
__global__ void f32_to_bf16x4_kernel(uint2* dst, const float4* src, int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = src[i];
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    dst[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

__global__ void bf16_to_f32x4_kernel(float4* dst, const uint2* src, int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint2 v = src[i];
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v.y));
    dst[i] = make_float4(lo.x, lo.y, hi.x, hi.y);
  }
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);  // grid-stride beyond that
}

}  // namespace

void f32_to_bf16_cuda(uint16_t* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t n4 = ops_detail::aligned_to(src, 16) && ops_detail::aligned_to(dst, 8) ? n / 4 : 0;
  if (n4 > 0)
    f32_to_bf16x4_kernel<<<grid_for(n4), kThreads, 0, stream>>>(reinterpret_cast<uint2*>(dst),
                                                               reinterpret_cast<const float4*>(src), n4);
  if (n > 4 * n4) f32_to_bf16_kernel<<<grid_for(n - 4 * n4), kThreads, 0, stream>>>(dst + 4 * n4, src + 4 * n4, n - 4 * n4);
  CUDA_CHECK(cudaGetLastError());
}

void bf16_to_f32_cuda(float* dst, const uint16_t* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t n4 = ops_detail::aligned_to(src, 8) && ops_detail::aligned_to(dst, 16) ? n / 4 : 0;
  if (n4 > 0)
    bf16_to_f32x4_kernel<<<grid_for(n4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(dst),
                                                               reinterpret_cast<const uint2*>(src), n4);
  if (n > 4 * n4) bf16_to_f32_kernel<<<grid_for(n - 4 * n4), kThreads, 0, stream>>>(dst + 4 * n4, src + 4 * n4, n - 4 * n4);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sb::cuda
