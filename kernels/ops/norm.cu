// norm.cu: RMSNorm and LayerNorm on the device, one warp per row (rows of D % 4 == 0, D <= 1024 held
// in registers as float4 groups, one read; other D: column loops): the forwards (fp32 output, or bf16
// for kernels/ops/ops_bf16.hpp, the same kernels) and the backwards (fp32 or bf16 dout), which add
// into dinp with its bf16 copy and sum the weight (and bias) gradients in the same pass, per chunk of
// rows through the ReduceScratch and then in chunk order (no atomics: deterministic). Declarations:
// kernels/ops/ops.hpp and kernels/ops/ops_bf16.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/ops/ops_bf16.hpp"
#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

template <class O>
__global__ void rmsnorm_forward_kernel(O* out, float* rstd, const float* inp, const float* weight, int64_t N,
                                       int64_t D, double eps) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const float* x = inp + n * D;
  float ss = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) ss += x[d] * x[d];
  ss = warp_sum(ss);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / static_cast<double>(D) + eps));
  if (threadIdx.x == 0) rstd[n] = r;
  for (int64_t d = threadIdx.x; d < D; d += 32) store_rn(out + n * D + d, x[d] * r * weight[d]);
}

// dinp[i] = v, or += v when accumulating (__fadd_rn: not contracted into an FMA with v's last
// product, so the sum equals adding the overwritten result); dinp16 (nullable) gets bf16 of it.
__device__ __forceinline__ void store_dinp(float* dinp, uint16_t* dinp16, int64_t i, float v, bool accumulate) {
  if (accumulate) v = __fadd_rn(dinp[i], v);
  dinp[i] = v;
  if (dinp16) dinp16[i] = bf16_bits(v);
}

template <class O>
__global__ void layernorm_forward_kernel(O* out, float* mean, float* rstd, const float* inp, const float* weight,
                                         const float* bias, int64_t N, int64_t D, double eps) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const float* x = inp + n * D;
  float s = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) s += x[d];
  const float m = warp_sum(s) / static_cast<float>(D);
  float v = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) v += (x[d] - m) * (x[d] - m);
  v = warp_sum(v);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(v) / static_cast<double>(D) + eps));
  if (threadIdx.x == 0) mean[n] = m, rstd[n] = r;
  for (int64_t d = threadIdx.x; d < D; d += 32) store_rn(out + n * D + d, (x[d] - m) * r * weight[d] + bias[d]);
}


// ---- vectorised rows: D % 4 == 0, D <= 1024, 16-byte aligned rows -------------------------------
// Lane l of a row's warp holds the float4 groups q = l + 32 j (columns 4q .. 4q + 3), j < J, in
// registers: the row is read once. Groups q >= D / 4 are zero and store nothing.
__device__ __forceinline__ float4 ld4(const float* p, int64_t q, bool ok) {
  return ok ? reinterpret_cast<const float4*>(p)[q] : make_float4(0.f, 0.f, 0.f, 0.f);
}
__device__ __forceinline__ float4 ld4(const uint16_t* p, int64_t q, bool ok) {  // bf16: 8 bytes, exact widening
  if (!ok) return make_float4(0.f, 0.f, 0.f, 0.f);
  float v[4];
  load_vec<4>(v, p + 4 * q);
  return make_float4(v[0], v[1], v[2], v[3]);
}
// Stores four columns at p + 4q: one vector store where aligned (the usual case), else four scalar
// stores, so which kernel runs never depends on the output pointers.
__device__ __forceinline__ void st4(float* p, int64_t q, float4 v) {
  float* d = p + 4 * q;
  if (reinterpret_cast<uintptr_t>(d) % 16 == 0) *reinterpret_cast<float4*>(d) = v;
  else d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
}
__device__ __forceinline__ void st4(uint16_t* p, int64_t q, float4 v) {
  uint16_t* d = p + 4 * q;
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  if (reinterpret_cast<uintptr_t>(d) % 8 == 0)
    *reinterpret_cast<uint2*>(d) =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  else d[0] = bf16_bits(v.x), d[1] = bf16_bits(v.y), d[2] = bf16_bits(v.z), d[3] = bf16_bits(v.w);
}
__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

template <int J, class O>
__global__ void rmsnorm_forward_vec_kernel(O* out, float* rstd, const float* inp, const float* weight, int64_t N,
                                           int64_t D, double eps) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;  // whole warps
  const int lane = threadIdx.x, D4 = static_cast<int>(D / 4);
  const float* x = inp + n * D;
  float4 v[J];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    v[j] = ld4(x, lane + 32 * j, lane + 32 * j < D4);
    ss += dot4(v[j], v[j]);
  }
  ss = warp_sum(ss);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / static_cast<double>(D) + eps));
  if (lane == 0) rstd[n] = r;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int q = lane + 32 * j;
    if (q >= D4) continue;
    const float4 g = reinterpret_cast<const float4*>(weight)[q];
    st4(out + n * D, q, make_float4(v[j].x * r * g.x, v[j].y * r * g.y, v[j].z * r * g.z, v[j].w * r * g.w));
  }
}

template <int J, class O>
__global__ void layernorm_forward_vec_kernel(O* out, float* mean, float* rstd, const float* inp, const float* weight,
                                             const float* bias, int64_t N, int64_t D, double eps) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const int lane = threadIdx.x, D4 = static_cast<int>(D / 4);
  const float* x = inp + n * D;
  float4 v[J];
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    v[j] = ld4(x, lane + 32 * j, lane + 32 * j < D4);
    s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
  }
  const float m = warp_sum(s) / static_cast<float>(D);
  float var = 0.f;
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (lane + 32 * j < D4) {
      const float4 c = make_float4(v[j].x - m, v[j].y - m, v[j].z - m, v[j].w - m);
      var += dot4(c, c);
    }
  var = warp_sum(var);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(var) / static_cast<double>(D) + eps));
  if (lane == 0) mean[n] = m, rstd[n] = r;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int q = lane + 32 * j;
    if (q >= D4) continue;
    const float4 g = reinterpret_cast<const float4*>(weight)[q], b = reinterpret_cast<const float4*>(bias)[q];
    st4(out + n * D, q,
        make_float4((v[j].x - m) * r * g.x + b.x, (v[j].y - m) * r * g.y + b.y, (v[j].z - m) * r * g.z + b.z,
                    (v[j].w - m) * r * g.w + b.w));
  }
}

// One row's operands of the vectorised norm backward, a lane's float4 groups: x, dy, the dinp it adds
// to (accumulate), the row's rstd and mean.
template <int J>
struct NormRow {
  float4 x[J], dy[J], prev[J];
  float r, m;
};

// The vectorised norm backward (kMode 1: RMSNorm, 2: LayerNorm), same contract and CTA layout as
// norm_backward_kernel; each lane keeps its columns' weight (and bias) gradient terms in registers
// over the CTA's rows, the CTA adds its warps' sums in warp order. A warp's next row is loaded
// while it works on this one, with its dinp (only this warp writes the row), where the registers
// allow it at four CTAs an SM (J = 1: D <= 128).
template <int kMode, int J, class DY>
__global__ void __launch_bounds__(32 * kRowsPerBlock, J == 1 ? 4 : 1)
    norm_backward_vec_kernel(float* dinp, uint16_t* dinp16, bool accumulate, float* part_w, float* part_b,
                             const DY* dout, const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t N, int64_t D, int64_t rows_per_chunk) {
  extern __shared__ float sums[];  // [kRowsPerBlock][D] weight terms, then [kRowsPerBlock][D] bias terms
  constexpr bool kAhead = J == 1;
  const int warp = threadIdx.y, lane = threadIdx.x, D4 = static_cast<int>(D / 4);
  const bool partials = part_w != nullptr, bias = kMode == 2 && part_b != nullptr;
  float4 g[J], aw[J], ab[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    g[j] = ld4(weight, lane + 32 * j, lane + 32 * j < D4);
    aw[j] = ab[j] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const auto load = [&](NormRow<J>& row, int64_t n) {
    row.r = rstd[n], row.m = kMode == 2 ? mean[n] : 0.f;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const bool ok = lane + 32 * j < D4;
      row.x[j] = ld4(inp + n * D, lane + 32 * j, ok);
      row.dy[j] = ld4(dout + n * D, lane + 32 * j, ok);
      if constexpr (kAhead) row.prev[j] = ld4(dinp + n * D, lane + 32 * j, ok && accumulate);
    }
  };
  const int64_t n0 = blockIdx.x * rows_per_chunk, n1 = min(N, n0 + rows_per_chunk);
  NormRow<J> cur;
  if (kAhead && n0 + warp < n1) load(cur, n0 + warp);
  for (int64_t n = n0 + warp; n < n1; n += kRowsPerBlock) {
    NormRow<J> next;
    if constexpr (kAhead) {
      if (n + kRowsPerBlock < n1) load(next, n + kRowsPerBlock);
    } else {
      load(cur, n);
    }
    const float r = cur.r, m = cur.m;
    float4(&x)[J] = cur.x;
    const float4(&dy)[J] = cur.dy;
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      if constexpr (kMode == 1) {
        sgx += dy[j].x * g[j].x * x[j].x + dy[j].y * g[j].y * x[j].y + dy[j].z * g[j].z * x[j].z +
               dy[j].w * g[j].w * x[j].w;
      } else {
        x[j] = make_float4((x[j].x - m) * r, (x[j].y - m) * r, (x[j].z - m) * r, (x[j].w - m) * r);  // x hat
        const float4 gd = make_float4(dy[j].x * g[j].x, dy[j].y * g[j].y, dy[j].z * g[j].z, dy[j].w * g[j].w);
        sg += (gd.x + gd.y) + (gd.z + gd.w);
        sgx += dot4(gd, x[j]);
      }
    }
    float a = 0.f, c = 0.f;  // dinp = r (dy g - a - x c): RMSNorm a = 0, c = r mean(dy g x) r; LayerNorm on x hat
    if constexpr (kMode == 1) {
      c = r * (warp_sum(sgx) * r / static_cast<float>(D));
    } else {
      a = warp_sum(sg) / static_cast<float>(D);
      c = warp_sum(sgx) / static_cast<float>(D);
    }
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int q = lane + 32 * j;
      if (q >= D4) continue;
      float4 o = make_float4(r * (dy[j].x * g[j].x - a - x[j].x * c), r * (dy[j].y * g[j].y - a - x[j].y * c),
                             r * (dy[j].z * g[j].z - a - x[j].z * c), r * (dy[j].w * g[j].w - a - x[j].w * c));
      if (accumulate) {
        const float4 p = kAhead ? cur.prev[j] : reinterpret_cast<const float4*>(dinp + n * D)[q];
        o = make_float4(__fadd_rn(p.x, o.x), __fadd_rn(p.y, o.y), __fadd_rn(p.z, o.z), __fadd_rn(p.w, o.w));
      }
      st4(dinp + n * D, q, o);
      if (dinp16) st4(dinp16 + n * D, q, o);
      if (partials) {
        const float4 xh = kMode == 1 ? make_float4(x[j].x * r, x[j].y * r, x[j].z * r, x[j].w * r) : x[j];
        aw[j].x += dy[j].x * xh.x, aw[j].y += dy[j].y * xh.y, aw[j].z += dy[j].z * xh.z, aw[j].w += dy[j].w * xh.w;
        if (bias) ab[j].x += dy[j].x, ab[j].y += dy[j].y, ab[j].z += dy[j].z, ab[j].w += dy[j].w;
      }
    }
    if constexpr (kAhead) cur = next;
  }
  if (!partials) return;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int q = lane + 32 * j;
    if (q >= D4) continue;
    reinterpret_cast<float4*>(sums + warp * D)[q] = aw[j];
    if (bias) reinterpret_cast<float4*>(sums + (kRowsPerBlock + warp) * D)[q] = ab[j];
  }
  __syncthreads();
  for (int64_t d = warp * 32 + lane; d < D; d += 32 * kRowsPerBlock) {
    float s = 0.f, t = 0.f;
    for (int w = 0; w < kRowsPerBlock; ++w) {
      s += sums[w * D + d];
      if (bias) t += sums[(kRowsPerBlock + w) * D + d];
    }
    part_w[blockIdx.x * D + d] = s;
    if (bias) part_b[blockIdx.x * D + d] = t;
  }
}

// The float4 groups per lane (1, 2, 4 or 8) for the vectorised kernels, or 0 when they do not apply
// (D % 4 != 0, D > 1024, or an input pointer not 16-byte aligned). Outputs are stored either way (st4).
int vec_groups(int64_t D, std::initializer_list<const void*> rows16) {
  if (D % 4 != 0 || D > 1024) return 0;
  for (const void* p : rows16)
    if (p && !aligned_to(p, 16)) return 0;
  const int64_t j = (D / 4 + 31) / 32;
  return j <= 1 ? 1 : j <= 2 ? 2 : j <= 4 ? 4 : 8;
}
// Calls f(std::integral_constant<int, J>{}) for J = groups (1, 2, 4, 8).
template <class Fn>
void with_groups(int groups, Fn&& f) {
  switch (groups) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    default: f(std::integral_constant<int, 8>{}); break;
  }
}

template <class O>
void rmsnorm_forward(O* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t D, double eps,
                     cudaStream_t stream) {
  if (N <= 0) return;
  const dim3 grid(blocks_for(N, kRowsPerBlock)), block(32, kRowsPerBlock);
  if (const int groups = vec_groups(D, {inp, weight}))
    with_groups(groups, [&](auto j) {
      rmsnorm_forward_vec_kernel<decltype(j)::value><<<grid, block, 0, stream>>>(out, rstd, inp, weight, N, D, eps);
    });
  else
    rmsnorm_forward_kernel<<<grid, block, 0, stream>>>(out, rstd, inp, weight, N, D, eps);
  SB_CUDA_CHECK_LAUNCH();
}

template <class O>
void layernorm_forward(O* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       int64_t N, int64_t D, double eps, cudaStream_t stream) {
  if (N <= 0) return;
  const dim3 grid(blocks_for(N, kRowsPerBlock)), block(32, kRowsPerBlock);
  if (const int groups = vec_groups(D, {inp, weight, bias}))
    with_groups(groups, [&](auto j) {
      layernorm_forward_vec_kernel<decltype(j)::value>
          <<<grid, block, 0, stream>>>(out, mean, rstd, inp, weight, bias, N, D, eps);
    });
  else
    layernorm_forward_kernel<<<grid, block, 0, stream>>>(out, mean, rstd, inp, weight, bias, N, D, eps);
  SB_CUDA_CHECK_LAUNCH();
}
// Norm backward, one warp per row (kMode 1: RMSNorm, 2: LayerNorm): dinp = or += the input gradient,
// dinp16 (nullable) its bf16 copy. Without partials (part_w null) CTA c takes rows 8c .. 8c + 7. With
// them CTA c owns rows [c rows_per_chunk, (c + 1) rows_per_chunk), its warps take them in turn and
// each lane adds its columns' weight-gradient terms dy (x - mu) r (LayerNorm's bias terms dy into a
// second array) to its warp's row of shared memory; the CTA then writes the sum of its warps' rows,
// in warp order, to part_w[c, :] (part_b[c, :]). Fixed order: deterministic.
template <int kMode, class DY>
__global__ void norm_backward_kernel(float* dinp, uint16_t* dinp16, bool accumulate, float* part_w, float* part_b,
                                     const DY* dout, const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int64_t N, int64_t D, int64_t rows_per_chunk) {
  extern __shared__ float sums[];  // [kRowsPerBlock][D] weight terms, then [kRowsPerBlock][D] bias terms
  const int warp = threadIdx.y, lane = threadIdx.x;
  const bool partials = part_w != nullptr, bias = kMode == 2 && part_b != nullptr;
  float* sw = sums + warp * D;
  float* sb = sums + (kRowsPerBlock + warp) * D;
  if (partials)
    for (int64_t d = lane; d < D; d += 32) {
      sw[d] = 0.f;
      if (bias) sb[d] = 0.f;
    }
  const int64_t n0 = blockIdx.x * rows_per_chunk, n1 = min(N, n0 + rows_per_chunk);
  for (int64_t n = n0 + warp; n < n1; n += kRowsPerBlock) {
    const float* x = inp + n * D;
    const DY* dyr = dout + n * D;
    const float r = rstd[n], m = kMode == 2 ? mean[n] : 0.f;
    const auto dy = [&](int64_t d) { return to_float(dyr[d]); };
    if constexpr (kMode == 1) {
      float gx = 0.f;
      for (int64_t d = lane; d < D; d += 32) gx += dy(d) * weight[d] * x[d];
      const float mean_gx = warp_sum(gx) * r / static_cast<float>(D);
      for (int64_t d = lane; d < D; d += 32) {
        store_dinp(dinp, dinp16, n * D + d, r * (dy(d) * weight[d] - x[d] * (r * mean_gx)), accumulate);
        if (partials) sw[d] += dy(d) * (x[d] * r);
      }
    } else {
      float sg = 0.f, sgx = 0.f;
      for (int64_t d = lane; d < D; d += 32) {
        const float g = dy(d) * weight[d];
        sg += g, sgx += g * ((x[d] - m) * r);
      }
      const float mean_g = warp_sum(sg) / static_cast<float>(D);
      const float mean_gx = warp_sum(sgx) / static_cast<float>(D);
      for (int64_t d = lane; d < D; d += 32) {
        const float xh = (x[d] - m) * r;
        store_dinp(dinp, dinp16, n * D + d, r * (dy(d) * weight[d] - mean_g - xh * mean_gx), accumulate);
        if (partials) sw[d] += dy(d) * xh;
        if (bias) sb[d] += dy(d);
      }
    }
  }
  if (!partials) return;
  __syncthreads();
  for (int64_t d = warp * 32 + lane; d < D; d += 32 * kRowsPerBlock) {
    float s = 0.f, t = 0.f;
    for (int w = 0; w < kRowsPerBlock; ++w) {
      s += sums[w * D + d];
      if (bias) t += sums[(kRowsPerBlock + w) * D + d];
    }
    part_w[blockIdx.x * D + d] = s;
    if (bias) part_b[blockIdx.x * D + d] = t;
  }
}

// Row chunks of the fused parameter-gradient sums (0: not fused): with a scratch of `arrays` partial
// rows per chunk, and the CTA's shared rows within the default 48 KB; at least 16 rows per chunk
// (two a warp, so that a warp's next row is in flight while it works on one), at most 512 chunks (one
// wave of 8-warp CTAs on an H100 at 4 CTAs per SM; fewer partial rows for chunk_sum). Depends only on
// N, D, the scratch.
int64_t norm_chunks(int64_t N, int64_t D, int64_t arrays, ReduceScratch scratch) {
  if (!scratch.data || arrays * kRowsPerBlock * D * static_cast<int64_t>(sizeof(float)) > 48 * 1024) return 0;
  return std::max<int64_t>(1, std::min<int64_t>({N / 16, scratch.floats / (arrays * D), 512}));
}

// The backward launch: fused sums when dweight (and LayerNorm's dbias) are asked for and fit the
// scratch; otherwise column sums (colsum) and the per-row kernel.
template <int kMode, class DY>
void norm_backward(float* dinp, float* dweight, float* dbias, const DY* dout, const float* inp, const float* weight,
                   const float* mean, const float* rstd, int64_t N, int64_t D, cudaStream_t stream,
                   ReduceScratch scratch, bool accumulate, uint16_t* dinp_bf16) {
  if (N <= 0) return;
  const int64_t chunks = dweight && (kMode == 1 || dbias) ? norm_chunks(N, D, kMode, scratch) : 0;
  const int groups = vec_groups(D, {dinp, dout, inp, weight});
  // rows per CTA: a chunk, or (no fused sums) 8 rows per warp
  auto launch = [&](unsigned grid, size_t smem, float* part_w, float* part_b, int64_t rows) {
    if (groups)
      with_groups(groups, [&](auto j) {
        norm_backward_vec_kernel<kMode, decltype(j)::value, DY><<<grid, dim3(32, kRowsPerBlock), smem, stream>>>(
            dinp, dinp_bf16, accumulate, part_w, part_b, dout, inp, weight, mean, rstd, N, D, rows);
      });
    else
      norm_backward_kernel<kMode, DY><<<grid, dim3(32, kRowsPerBlock), smem, stream>>>(
          dinp, dinp_bf16, accumulate, part_w, part_b, dout, inp, weight, mean, rstd, N, D, rows);
    SB_CUDA_CHECK_LAUNCH();
  };
  if (chunks > 0) {
    float* part_b = kMode == 2 ? scratch.data + chunks * D : nullptr;
    const int64_t rows = (N + chunks - 1) / chunks;
    launch(static_cast<unsigned>(chunks), static_cast<size_t>(kMode * kRowsPerBlock * D) * sizeof(float),
           scratch.data, part_b, rows);
    chunk_sum(dweight, scratch.data, chunks, D, stream, part_b ? dbias : nullptr, part_b, D);
    return;
  }
  if (dweight) colsum(dweight, dout, inp, mean, rstd, N, D, kMode, stream, scratch);
  if (dbias) colsum(dbias, dout, nullptr, nullptr, nullptr, N, D, 0, stream, scratch);
  const int64_t rows = groups ? 8 * kRowsPerBlock : kRowsPerBlock;
  launch(static_cast<unsigned>((N + rows - 1) / rows), 0, nullptr, nullptr, rows);
}
}  // namespace

void rmsnorm_forward_cuda(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t D,
                          double eps, cudaStream_t stream) {
  rmsnorm_forward(out, rstd, inp, weight, N, D, eps, stream);
}

void rmsnorm_forward_bf16_cuda(uint16_t* out, float* rstd, const float* inp, const float* weight, int64_t N,
                               int64_t D, double eps, cudaStream_t stream) {
  rmsnorm_forward(out, rstd, inp, weight, N, D, eps, stream);
}

void rmsnorm_backward_cuda(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                           const float* rstd, int64_t N, int64_t D, cudaStream_t stream, ReduceScratch scratch,
                           bool accumulate, uint16_t* dinp_bf16) {
  norm_backward<1>(dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd, N, D, stream, scratch, accumulate,
                   dinp_bf16);
}

void rmsnorm_backward_bf16_cuda(float* dinp, float* dweight, const uint16_t* dout, const float* inp,
                                const float* weight, const float* rstd, int64_t N, int64_t D, cudaStream_t stream,
                                ReduceScratch scratch, bool accumulate, uint16_t* dinp_bf16) {
  norm_backward<1>(dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd, N, D, stream, scratch, accumulate,
                   dinp_bf16);
}

void layernorm_forward_cuda(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                            const float* bias, int64_t N, int64_t D, double eps, cudaStream_t stream) {
  layernorm_forward(out, mean, rstd, inp, weight, bias, N, D, eps, stream);
}

void layernorm_forward_bf16_cuda(uint16_t* out, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t D, double eps, cudaStream_t stream) {
  layernorm_forward(out, mean, rstd, inp, weight, bias, N, D, eps, stream);
}

void layernorm_backward_cuda(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                             const float* weight, const float* mean, const float* rstd, int64_t N, int64_t D,
                             cudaStream_t stream, ReduceScratch scratch, bool accumulate, uint16_t* dinp_bf16) {
  norm_backward<2>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, D, stream, scratch, accumulate, dinp_bf16);
}

void layernorm_backward_bf16_cuda(float* dinp, float* dweight, float* dbias, const uint16_t* dout, const float* inp,
                                  const float* weight, const float* mean, const float* rstd, int64_t N, int64_t D,
                                  cudaStream_t stream, ReduceScratch scratch, bool accumulate, uint16_t* dinp_bf16) {
  norm_backward<2>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, D, stream, scratch, accumulate, dinp_bf16);
}

}  // namespace sb::cuda
