// rope.cu: RoPE on the GPU (rotate_half pairing m <-> m + Dh/2, angle t * theta^(-2m/Dh)): the
// (cos, sin) table a runner builds once, in double like the CPU path, and the forward / backward
// rotations that read it: fp32 -> fp32, fp32 -> bf16 (forward) and bf16 -> bf16 (backward), one kernel
// template (fp32 math, bf16 rounded on store), four pairs a thread where Dh % 8 == 0. Declarations: kernels/ops/ops.hpp, kernels/ops/ops_bf16.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "kernels/ops/ops_bf16.hpp"
#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

__global__ void rope_table_kernel(float2* cs, int64_t T, int64_t half, int64_t Dh, double theta) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= T * half) return;
  const int64_t t = i / half, m = i % half;
  const double a = static_cast<double>(t) * pow(theta, -2.0 * static_cast<double>(m) / static_cast<double>(Dh));
  cs[i] = make_float2(static_cast<float>(cos(a)), static_cast<float>(sin(a)));
}

// One thread per pair (m, m + half) of a row (b, t, h); blockDim = (half, rows per block). SOut, SIn:
// float, or bf16 bits. The thread reads both elements of its pair before it writes them, so out may
// alias inp (same storage).
template <bool kInverse, class SOut, class SIn>
__global__ void rope_kernel(SOut* out, const SIn* inp, const float2* cs, uint32_t rows, uint32_t T, uint32_t H) {
  const uint32_t half = blockDim.x, m = threadIdx.x, row = blockIdx.x * blockDim.y + threadIdx.y;  // (b T + t) H + h
  if (row >= rows) return;
  const float2 a = cs[(row / H) % T * half + m];
  const float c = a.x, s = a.y;
  const int64_t base = static_cast<int64_t>(row) * 2 * half;
  const float x1 = to_float(inp[base + m]), x2 = to_float(inp[base + m + half]);
  if constexpr (kInverse) {
    store_rn(out + base + m, x1 * c + x2 * s);
    store_rn(out + base + m + half, x2 * c - x1 * s);
  } else {
    store_rn(out + base + m, x1 * c - x2 * s);
    store_rn(out + base + m + half, x2 * c + x1 * s);
  }
}

// Four pairs a thread (m .. m + 3, m a multiple of 4, and their partners m + half ..), one 16-byte
// (fp32) or 8-byte (bf16) access per operand and two 16-byte table reads (launch.cuh's load_vec /
// store_vec), where half % 4 == 0 and the pointers are aligned (rope_launch);
// per element the scalar kernel's math, so the results are identical. blockDim = (half / 4, rows
// per block).
template <bool kInverse, class SOut, class SIn>
__global__ void rope4_kernel(SOut* out, const SIn* inp, const float4* cs, uint32_t rows, uint32_t T, uint32_t H) {
  const uint32_t half = 4 * blockDim.x, m = 4 * threadIdx.x, row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const float4* a = cs + ((row / H) % T * half + m) / 2;  // (cos, sin) of pairs m, m + 1 | m + 2, m + 3
  const float4 a0 = a[0], a1 = a[1];
  const float c[4] = {a0.x, a0.z, a1.x, a1.z}, sn[4] = {a0.y, a0.w, a1.y, a1.w};
  const int64_t base = static_cast<int64_t>(row) * 2 * half;
  float x1[4], x2[4], y1[4], y2[4];
  load_vec<4>(x1, inp + base + m);
  load_vec<4>(x2, inp + base + m + half);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if constexpr (kInverse) {
      y1[e] = x1[e] * c[e] + x2[e] * sn[e];
      y2[e] = x2[e] * c[e] - x1[e] * sn[e];
    } else {
      y1[e] = x1[e] * c[e] - x2[e] * sn[e];
      y2[e] = x2[e] * c[e] + x1[e] * sn[e];
    }
  }
  store_vec<4>(out + base + m, y1);
  store_vec<4>(out + base + m + half, y2);
}

template <bool kInverse, class SOut, class SIn>
void rope_launch(SOut* out, const SIn* inp, const float* cs, int64_t B, int64_t T, int64_t H, int64_t Dh,
                 cudaStream_t stream) {
  const int64_t rows = B * T * H, half = Dh / 2;
  if (rows <= 0 || half <= 0) return;
  if (rows >= (int64_t{1} << 31) || half > 1024 || Dh % 2 != 0) {  // snprintf: a std::string here pulls CLI objects into test links
    char msg[128];
    std::snprintf(msg, sizeof msg, "rope: (B T H, Dh) = (%lld, %lld) not supported (B T H < 2^31, even Dh <= 2048)",
                  static_cast<long long>(rows), static_cast<long long>(Dh));
    throw_error(msg);
  }
  if (half % 4 == 0 && aligned_to(out, 4 * sizeof(SOut)) && aligned_to(inp, 4 * sizeof(SIn)) && aligned_to(cs, 16)) {
    const dim3 block(static_cast<unsigned>(half / 4), static_cast<unsigned>(std::max<int64_t>(1, 4 * kThreads / half)));
    const auto grid = static_cast<unsigned>((rows + block.y - 1) / block.y);
    rope4_kernel<kInverse><<<grid, block, 0, stream>>>(out, inp, reinterpret_cast<const float4*>(cs),
                                                      static_cast<uint32_t>(rows), static_cast<uint32_t>(T),
                                                      static_cast<uint32_t>(H));
  } else {
    const dim3 block(static_cast<unsigned>(half), static_cast<unsigned>(std::max<int64_t>(1, kThreads / half)));
    const auto grid = static_cast<unsigned>((rows + block.y - 1) / block.y);
    rope_kernel<kInverse><<<grid, block, 0, stream>>>(out, inp, reinterpret_cast<const float2*>(cs),
                                                     static_cast<uint32_t>(rows), static_cast<uint32_t>(T),
                                                     static_cast<uint32_t>(H));
  }
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_table_cuda(float* cs, int64_t T, int64_t Dh, double theta, cudaStream_t stream) {
  if (T <= 0 || Dh < 2) return;
  rope_table_kernel<<<blocks_for(T * (Dh / 2)), kThreads, 0, stream>>>(reinterpret_cast<float2*>(cs), T, Dh / 2,
                                                                      Dh, theta);
  SB_CUDA_CHECK_LAUNCH();
}

void rope_forward_cuda(float* out, const float* inp, const float* cs, int64_t B, int64_t T, int64_t H, int64_t Dh,
                       cudaStream_t stream) {
  rope_launch<false>(out, inp, cs, B, T, H, Dh, stream);
}

void rope_backward_cuda(float* dinp, const float* dout, const float* cs, int64_t B, int64_t T, int64_t H, int64_t Dh,
                        cudaStream_t stream) {
  rope_launch<true>(dinp, dout, cs, B, T, H, Dh, stream);
}

void rope_forward_bf16_cuda(uint16_t* out, const float* inp, const float* cs, int64_t B, int64_t T, int64_t H,
                            int64_t Dh, cudaStream_t stream) {
  rope_launch<false>(out, inp, cs, B, T, H, Dh, stream);
}

void rope_backward_bf16_cuda(uint16_t* dinp, const uint16_t* dout, const float* cs, int64_t B, int64_t T, int64_t H,
                             int64_t Dh, cudaStream_t stream) {
  rope_launch<true>(dinp, dout, cs, B, T, H, Dh, stream);
}

}  // namespace sb::cuda
