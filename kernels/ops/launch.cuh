// launch.cuh: what the per-token op kernels (kernels/ops/elementwise.cu, kernels/ops/act.cu, kernels/ops/rope.cu, kernels/ops/path_wpath.cu)
// share: launch sizes, the launch check, pointer alignment, warp sums, a stable sigmoid, the row-chunk count of the
// fixed-order column sums (ReduceScratch, kernels/ops/ops.hpp), bf16 storage (raw uint16_t bits) loads and
// stores (one element or a vector a thread), and the element math of the activations and SwiGLU: the fp32 ops and their bf16 forms (kernels/ops/ops_bf16.hpp)
// call the same functions, so a bf16 op is bit-exactly bf16(its fp32 op on the bf16 inputs).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/common/cuda_check.hpp"
#include "kernels/ops/ops.hpp"

namespace sb::cuda::ops_detail {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}
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
// out[d] += sum_n term(n, d) in a fixed order (kernels/ops/elementwise.cu); mode 0: a[n, d]; 1: a[n, d] b[n, d] r[n];
// 2: a[n, d] (b[n, d] - mu[n]) r[n]; 3: a[n, d % I] b[n, d / I] (a [N, I], b [N, D / I]). Row chunks
// (reduce_chunks) are summed through scratch, in order. a: fp32 or bf16.
void colsum(float* out, const float* a, const float* b, const float* mu, const float* r, int64_t N, int64_t D, int mode,
            cudaStream_t stream, ReduceScratch scratch, int64_t I = 1);
void colsum(float* out, const uint16_t* a, const float* b, const float* mu, const float* r, int64_t N, int64_t D,
            int mode, cudaStream_t stream, ReduceScratch scratch, int64_t I = 1);
// out[d] += sum over c = 0 .. chunks - 1 of partial[c, d], in a fixed order (kernels/ops/elementwise.cu);
// with out2, out2[d] += the same of partial2 [chunks, D2] in the same launch.
void chunk_sum(float* out, const float* partial, int64_t chunks, int64_t D, cudaStream_t stream, float* out2 = nullptr,
               const float* partial2 = nullptr, int64_t D2 = 0);

// ---- storage: float, or bf16 as raw uint16_t bits (round to nearest even on every store) ---------
__device__ __forceinline__ uint16_t bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
__device__ __forceinline__ void store_rn(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_rn(uint16_t* p, float v) { *p = bf16_bits(v); }

// W consecutive elements in one access: fp32 W = 4 (16 bytes), bf16 W = 4 (8 bytes) or 8 (16 bytes),
// W = 1 either. bf16 -> fp32 is exact (little endian: element 2k in a word's low half); stores round.
template <int W>
__device__ __forceinline__ void load_vec(float (&v)[W], const float* p) {
  static_assert(W == 1 || W == 4, "fp32: 1 or 4 elements");
  if constexpr (W == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    v[0] = *p;
  }
}
template <int W>
__device__ __forceinline__ void load_vec(float (&v)[W], const uint16_t* p) {
  static_assert(W == 1 || W == 4 || W == 8, "bf16: 1, 4 or 8 elements");
  if constexpr (W == 1) {
    v[0] = to_float(*p);
  } else {
    uint32_t w[W / 2];
    if constexpr (W == 8) {
      const uint4 q = *reinterpret_cast<const uint4*>(p);
      w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    } else {
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      w[0] = q.x, w[1] = q.y;
    }
#pragma unroll
    for (int k = 0; k < W / 2; ++k) v[2 * k] = __uint_as_float(w[k] << 16), v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
template <int W>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[W]) {
  static_assert(W == 1 || W == 4, "fp32: 1 or 4 elements");
  if constexpr (W == 4)
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  else
    *p = v[0];
}
template <int W>
__device__ __forceinline__ void store_vec(uint16_t* p, const float (&v)[W]) {
  static_assert(W == 1 || W == 4 || W == 8, "bf16: 1, 4 or 8 elements");
  if constexpr (W == 1) {
    *p = bf16_bits(v[0]);
  } else {
    uint32_t w[W / 2];
#pragma unroll
    for (int k = 0; k < W / 2; ++k) w[k] = bf16_bits(v[2 * k]) | static_cast<uint32_t>(bf16_bits(v[2 * k + 1])) << 16;
    if constexpr (W == 8)
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    else
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  }
}

// ---- element math (fp32) -------------------------------------------------------------------------
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

template <Act A>
__device__ __forceinline__ float act_value(float x) {
  if constexpr (A == Act::silu) return x / (1.f + expf(-x));
  else if constexpr (A == Act::gelu) return 0.5f * x * (1.f + erff(x * kInvSqrt2));
  else if constexpr (A == Act::sigmoid) return 1.f / (1.f + expf(-x));
  else return fminf(x, 0.f) - log1pf(expf(-fabsf(x)));  // logsigmoid
}

// dy * act'(x).
template <Act A>
__device__ __forceinline__ float act_grad(float dy, float x) {
  if constexpr (A == Act::silu) {
    const float s = 1.f / (1.f + expf(-x));
    return dy * s * (1.f + x * (1.f - s));
  } else if constexpr (A == Act::gelu) {
    const float cdf = 0.5f * (1.f + erff(x * kInvSqrt2));
    return dy * (cdf + x * kInvSqrt2Pi * expf(-0.5f * x * x));
  } else if constexpr (A == Act::sigmoid) {
    const float s = 1.f / (1.f + expf(-x));
    return dy * s * (1.f - s);
  } else {  // logsigmoid
    return dy / (1.f + expf(x));
  }
}

// Calls f(std::integral_constant<Act, act>{}): the host wrappers pick the kernel instance with it.
template <class Fn>
void with_act(Act act, Fn&& f) {
  switch (act) {
    case Act::silu: f(std::integral_constant<Act, Act::silu>{}); break;
    case Act::gelu: f(std::integral_constant<Act, Act::gelu>{}); break;
    case Act::sigmoid: f(std::integral_constant<Act, Act::sigmoid>{}); break;
    case Act::logsigmoid: f(std::integral_constant<Act, Act::logsigmoid>{}); break;
  }
}

// SwiGLU's sigmoid on the fast intrinsics (__expf, __fdividef: a few ulp; 0 where 1 + e^-g overflows):
// its kernels, fused or not, are bound by this arithmetic as much as by their traffic.
__device__ __forceinline__ float swiglu_sigmoid(float g) { return __fdividef(1.f, 1.f + __expf(-g)); }

__device__ __forceinline__ float swiglu_value(float g, float u) { return g * swiglu_sigmoid(g) * u; }

__device__ __forceinline__ void swiglu_grad(float dy, float g, float u, float& dg, float& du) {
  const float s = swiglu_sigmoid(g);
  dg = dy * u * s * (1.f + g * (1.f - s));
  du = dy * g * s;
}

// Whether n elements may go `width` a thread with 32-bit indices: n % width == 0, n / width < 2^32
// and every pointer 16-byte aligned.
inline bool vectorised(int64_t n, int64_t width, std::initializer_list<const void*> ptrs) {
  if (n % width != 0 || n / width >= (int64_t{1} << 32)) return false;
  for (const void* p : ptrs)
    if (!aligned_to(p, 16)) return false;
  return true;
}
// The same for the SwiGLU kernels' `width` columns a thread: also F % width == 0 (the groups of the
// [N, 2F] input).
inline bool swiglu_vectorised(int64_t N, int64_t F, int64_t width, std::initializer_list<const void*> ptrs) {
  return F % width == 0 && vectorised(2 * N * F, width, ptrs);
}

}  // namespace sb::cuda::ops_detail
