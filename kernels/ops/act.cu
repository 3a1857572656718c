// act.cu: the activations and SwiGLU on fp32 (kernels/ops/ops.hpp) and bf16 activations (kernels/ops/ops_bf16.hpp).
// One element math (kernels/ops/launch.cuh) for both: bf16 inputs are widened exactly to fp32 and every
// stored value rounded once (to nearest even), so a bf16 op equals bf16 of its fp32 op bit for bit.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/ops/ops_bf16.hpp"
#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

// ---- activations, and the fp32 SwiGLU ----------------------------------------------------------
// Activations on S = float or bf16 bits (kernels/ops/ops_bf16.hpp); element i is read, then written, so the
// backward may run in place.
template <Act A, class S>
__global__ void act_forward_kernel(S* out, const S* inp, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) store_rn(out + i, act_value<A>(to_float(inp[i])));
}

template <Act A, class S>
__global__ void act_backward_kernel(S* dinp, const S* dout, const S* inp, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) store_rn(dinp + i, act_grad<A>(to_float(dout[i]), to_float(inp[i])));
}

__global__ void swiglu_forward_kernel(float* out, const float* inp, int64_t N, int64_t F) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * F) return;
  const int64_t r = i / F, f = i % F;
  out[i] = swiglu_value(inp[r * 2 * F + f], inp[r * 2 * F + F + f]);
}

__global__ void swiglu_backward_kernel(float* dinp, const float* dout, const float* inp, int64_t N, int64_t F) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * F) return;
  const int64_t r = i / F, f = i % F;
  swiglu_grad(dout[i], inp[r * 2 * F + f], inp[r * 2 * F + F + f], dinp[r * 2 * F + f], dinp[r * 2 * F + F + f]);
}

// The same four columns at a time (where swiglu_vectorised(N, F, 4, pointers): 32-bit index
// arithmetic); per element the same operations as the scalar kernels, so the results are identical.
__global__ void swiglu_forward4_kernel(float4* out, const float4* inp, uint32_t n4, uint32_t F4) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const uint32_t r = i / F4, f = i - r * F4;
  const float4 g = inp[2 * r * F4 + f], u = inp[2 * r * F4 + F4 + f];
  out[i] = make_float4(swiglu_value(g.x, u.x), swiglu_value(g.y, u.y), swiglu_value(g.z, u.z), swiglu_value(g.w, u.w));
}

__global__ void swiglu_backward4_kernel(float4* dinp, const float4* dout, const float4* inp, uint32_t n4, uint32_t F4) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const uint32_t r = i / F4, f = i - r * F4;
  const float4 g = inp[2 * r * F4 + f], u = inp[2 * r * F4 + F4 + f], dy = dout[i];
  float4 dg, du;
  swiglu_grad(dy.x, g.x, u.x, dg.x, du.x);
  swiglu_grad(dy.y, g.y, u.y, dg.y, du.y);
  swiglu_grad(dy.z, g.z, u.z, dg.z, du.z);
  swiglu_grad(dy.w, g.w, u.w, dg.w, du.w);
  dinp[2 * r * F4 + f] = dg;
  dinp[2 * r * F4 + F4 + f] = du;
}

// ---- bf16 SwiGLU: W consecutive columns per thread --------------------------------------------------
// W = 8: one 16-byte access per operand (swiglu_vectorised(N, F, 8, pointers)), 32-bit indices;
// W = 1: the fallback for any shape and alignment, 64-bit indices.
template <int W>
using SwigluIndex = std::conditional_t<W == 1, int64_t, uint32_t>;

// Thread i: column group i % FW of row i / FW (FW = F / W groups per row); n = N FW.
template <int W>
__global__ void swiglu_forward_bf16_kernel(uint16_t* out, const uint16_t* inp, SwigluIndex<W> n, SwigluIndex<W> FW) {
  using I = SwigluIndex<W>;
  const I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const I r = i / FW, gate = 2 * r * FW + (i - r * FW);  // the gate's group in inp; the up group is FW further
  float g[W], u[W], y[W];
  load_vec<W>(g, inp + static_cast<int64_t>(gate) * W);
  load_vec<W>(u, inp + static_cast<int64_t>(gate + FW) * W);
#pragma unroll
  for (int k = 0; k < W; ++k) y[k] = swiglu_value(g[k], u[k]);
  store_vec<W>(out + static_cast<int64_t>(i) * W, y);
}

template <int W>
__global__ void swiglu_backward_bf16_kernel(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp,
                                            SwigluIndex<W> n, SwigluIndex<W> FW) {
  using I = SwigluIndex<W>;
  const I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const I r = i / FW, gate = 2 * r * FW + (i - r * FW);
  float g[W], u[W], dy[W], dg[W], du[W];
  load_vec<W>(g, inp + static_cast<int64_t>(gate) * W);
  load_vec<W>(u, inp + static_cast<int64_t>(gate + FW) * W);
  load_vec<W>(dy, dout + static_cast<int64_t>(i) * W);
#pragma unroll
  for (int k = 0; k < W; ++k) swiglu_grad(dy[k], g[k], u[k], dg[k], du[k]);
  store_vec<W>(dinp + static_cast<int64_t>(gate) * W, dg);
  store_vec<W>(dinp + static_cast<int64_t>(gate + FW) * W, du);
}

constexpr int kSwigluVec = 8;  // bf16 per 16 bytes

// ---- activations, 16 bytes a thread ----------------------------------------------------------------
// W = 16 / sizeof(S) consecutive elements per thread (4 fp32 or 8 bf16), one 16-byte access per operand,
// where vectorised(n, W, pointers); per element the scalar kernels' math, so the results are
// identical. A thread reads all its elements before it writes, so the backward may still run in place.
template <class S>
constexpr int kActVec = 16 / static_cast<int>(sizeof(S));

template <Act A, class S>
__global__ void act_forward_vec_kernel(S* out, const S* inp, uint32_t nv) {
  constexpr int W = kActVec<S>;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nv) return;
  float x[W], y[W];
  load_vec<W>(x, inp + static_cast<int64_t>(i) * W);
#pragma unroll
  for (int k = 0; k < W; ++k) y[k] = act_value<A>(x[k]);
  store_vec<W>(out + static_cast<int64_t>(i) * W, y);
}

template <Act A, class S>
__global__ void act_backward_vec_kernel(S* dinp, const S* dout, const S* inp, uint32_t nv) {
  constexpr int W = kActVec<S>;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nv) return;
  float dy[W], x[W], dx[W];
  load_vec<W>(dy, dout + static_cast<int64_t>(i) * W);
  load_vec<W>(x, inp + static_cast<int64_t>(i) * W);
#pragma unroll
  for (int k = 0; k < W; ++k) dx[k] = act_grad<A>(dy[k], x[k]);
  store_vec<W>(dinp + static_cast<int64_t>(i) * W, dx);
}

template <class S>
void act_forward(Act act, S* out, const S* inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = vectorised(n, kActVec<S>, {out, inp});
  const int64_t nv = n / kActVec<S>;
  with_act(act, [&](auto a) {
    constexpr Act A = decltype(a)::value;
    if (vec)
      act_forward_vec_kernel<A><<<blocks_for(nv), kThreads, 0, stream>>>(out, inp, static_cast<uint32_t>(nv));
    else
      act_forward_kernel<A><<<blocks_for(n), kThreads, 0, stream>>>(out, inp, n);
  });
  SB_CUDA_CHECK_LAUNCH();
}

template <class S>
void act_backward(Act act, S* dinp, const S* dout, const S* inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = vectorised(n, kActVec<S>, {dinp, dout, inp});
  const int64_t nv = n / kActVec<S>;
  with_act(act, [&](auto a) {
    constexpr Act A = decltype(a)::value;
    if (vec)
      act_backward_vec_kernel<A><<<blocks_for(nv), kThreads, 0, stream>>>(dinp, dout, inp, static_cast<uint32_t>(nv));
    else
      act_backward_kernel<A><<<blocks_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n);
  });
  SB_CUDA_CHECK_LAUNCH();
}
}  // namespace

void act_forward_cuda(Act act, float* out, const float* inp, int64_t n, cudaStream_t stream) {
  act_forward(act, out, inp, n, stream);
}
void act_backward_cuda(Act act, float* dinp, const float* dout, const float* inp, int64_t n, cudaStream_t stream) {
  act_backward(act, dinp, dout, inp, n, stream);
}
void act_forward_bf16_cuda(Act act, uint16_t* out, const uint16_t* inp, int64_t n, cudaStream_t stream) {
  act_forward(act, out, inp, n, stream);
}
void act_backward_bf16_cuda(Act act, uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n,
                            cudaStream_t stream) {
  act_backward(act, dinp, dout, inp, n, stream);
}

void swiglu_forward_cuda(float* out, const float* inp, int64_t N, int64_t F, cudaStream_t stream) {
  if (N * F <= 0) return;
  if (swiglu_vectorised(N, F, 4, {out, inp})) {
    const int64_t n4 = N * F / 4;
    swiglu_forward4_kernel<<<blocks_for(n4), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), reinterpret_cast<const float4*>(inp), static_cast<uint32_t>(n4),
        static_cast<uint32_t>(F / 4));
  } else {
    swiglu_forward_kernel<<<blocks_for(N * F), kThreads, 0, stream>>>(out, inp, N, F);
  }
  SB_CUDA_CHECK_LAUNCH();
}

void swiglu_backward_cuda(float* dinp, const float* dout, const float* inp, int64_t N, int64_t F, cudaStream_t stream) {
  if (N * F <= 0) return;
  if (swiglu_vectorised(N, F, 4, {dinp, dout, inp})) {
    const int64_t n4 = N * F / 4;
    swiglu_backward4_kernel<<<blocks_for(n4), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(dinp), reinterpret_cast<const float4*>(dout), reinterpret_cast<const float4*>(inp),
        static_cast<uint32_t>(n4), static_cast<uint32_t>(F / 4));
  } else {
    swiglu_backward_kernel<<<blocks_for(N * F), kThreads, 0, stream>>>(dinp, dout, inp, N, F);
  }
  SB_CUDA_CHECK_LAUNCH();
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
  SB_CUDA_CHECK_LAUNCH();
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
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace sb::cuda
