// ops_bf16.cu: the bf16 activations and SwiGLU of kernels/ops_bf16.hpp (the bf16 norm forwards are in
// ops_elementwise.cu, the bf16 RoPE in ops_rope.cu). The element math is the fp32 ops' own (ops_launch.cuh):
// inputs widened exactly to fp32, one bf16 rounding (to nearest even) per stored value.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/ops_bf16.hpp"
#include "kernels/ops_launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

// ---- activations: grid-stride, one element per step (in place safe: element i is read, then written) --
unsigned grid_stride_blocks(int64_t n) { return static_cast<unsigned>(std::min<int64_t>(blocks_for(n), 8192)); }

template <Act A>
__global__ void act_forward_bf16_kernel(uint16_t* out, const uint16_t* inp, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = bf16_bits(act_value<A>(to_float(inp[i])));
}

template <Act A>
__global__ void act_backward_bf16_kernel(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dinp[i] = bf16_bits(act_grad<A>(to_float(dout[i]), to_float(inp[i])));
}

// ---- SwiGLU: W consecutive columns per thread --------------------------------------------------
// W = 8: one 16-byte access per operand (swiglu_vectorised(N, F, 8, pointers)), 32-bit indices;
// W = 1: the fallback for any shape and alignment, 64-bit indices.
template <int W>
using SwigluIndex = std::conditional_t<W == 1, int64_t, uint32_t>;

template <int W>
__device__ __forceinline__ void load_bf16(float (&v)[W], const uint16_t* p) {
  if constexpr (W == 8) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // little endian: element 2k in the low half (bf16 -> fp32 is exact)
      v[2 * k] = __uint_as_float(w[k] << 16);
      v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = to_float(p[k]);
  }
}

template <int W>
__device__ __forceinline__ void store_bf16(uint16_t* p, const float (&v)[W]) {
  if constexpr (W == 8) {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = bf16_bits(v[2 * k]) | static_cast<uint32_t>(bf16_bits(v[2 * k + 1])) << 16;
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) p[k] = bf16_bits(v[k]);
  }
}

// Thread i: column group i % FW of row i / FW (FW = F / W groups per row); n = N FW.
template <int W>
__global__ void swiglu_forward_bf16_kernel(uint16_t* out, const uint16_t* inp, SwigluIndex<W> n, SwigluIndex<W> FW) {
  using I = SwigluIndex<W>;
  const I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const I r = i / FW, gate = 2 * r * FW + (i - r * FW);  // the gate's group in inp; the up group is FW further
  float g[W], u[W], y[W];
  load_bf16<W>(g, inp + static_cast<int64_t>(gate) * W);
  load_bf16<W>(u, inp + static_cast<int64_t>(gate + FW) * W);
#pragma unroll
  for (int k = 0; k < W; ++k) y[k] = swiglu_value(g[k], u[k]);
  store_bf16<W>(out + static_cast<int64_t>(i) * W, y);
}

template <int W>
__global__ void swiglu_backward_bf16_kernel(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp,
                                            SwigluIndex<W> n, SwigluIndex<W> FW) {
  using I = SwigluIndex<W>;
  const I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const I r = i / FW, gate = 2 * r * FW + (i - r * FW);
  float g[W], u[W], dy[W], dg[W], du[W];
  load_bf16<W>(g, inp + static_cast<int64_t>(gate) * W);
  load_bf16<W>(u, inp + static_cast<int64_t>(gate + FW) * W);
  load_bf16<W>(dy, dout + static_cast<int64_t>(i) * W);
#pragma unroll
  for (int k = 0; k < W; ++k) swiglu_grad(dy[k], g[k], u[k], dg[k], du[k]);
  store_bf16<W>(dinp + static_cast<int64_t>(gate) * W, dg);
  store_bf16<W>(dinp + static_cast<int64_t>(gate + FW) * W, du);
}

constexpr int kSwigluVec = 8;  // bf16 per 16 bytes

}  // namespace

void act_forward_bf16_cuda(Act act, uint16_t* out, const uint16_t* inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  with_act(act, [&](auto a) {
    act_forward_bf16_kernel<decltype(a)::value><<<grid_stride_blocks(n), kThreads, 0, stream>>>(out, inp, n);
  });
  check_launch();
}

void act_backward_bf16_cuda(Act act, uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n,
                            cudaStream_t stream) {
  if (n <= 0) return;
  with_act(act, [&](auto a) {
    act_backward_bf16_kernel<decltype(a)::value><<<grid_stride_blocks(n), kThreads, 0, stream>>>(dinp, dout, inp, n);
  });
  check_launch();
}

void swiglu_forward_bf16_cuda(uint16_t* out, const uint16_t* inp, int64_t N, int64_t F, cudaStream_t stream) {
  if (N * F <= 0) return;
  if (swiglu_vectorised(N, F, kSwigluVec, {out, inp})) {
    const int64_t n = N * F / kSwigluVec;
    swiglu_forward_bf16_kernel<kSwigluVec><<<blocks_for(n), kThreads, 0, stream>>>(
        out, inp, static_cast<uint32_t>(n), static_cast<uint32_t>(F / kSwigluVec));
  } else {
    swiglu_forward_bf16_kernel<1><<<blocks_for(N * F), kThreads, 0, stream>>>(out, inp, N * F, F);
  }
  check_launch();
}

void swiglu_backward_bf16_cuda(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t N, int64_t F,
                               cudaStream_t stream) {
  if (N * F <= 0) return;
  if (swiglu_vectorised(N, F, kSwigluVec, {dinp, dout, inp})) {
    const int64_t n = N * F / kSwigluVec;
    swiglu_backward_bf16_kernel<kSwigluVec><<<blocks_for(n), kThreads, 0, stream>>>(
        dinp, dout, inp, static_cast<uint32_t>(n), static_cast<uint32_t>(F / kSwigluVec));
  } else {
    swiglu_backward_bf16_kernel<1><<<blocks_for(N * F), kThreads, 0, stream>>>(dinp, dout, inp, N * F, F);
  }
  check_launch();
}

}  // namespace sb::cuda
