// path_wpath.cu: CUDA kernels of the PaTH projections: the w path (short causal convolution,
// SiLU, L2 normalisation per head) and beta = min(2 sigmoid(z), beta_max), forward and backward.
// Head dims Dh = 4, 8, ..., 128 with H Dh <= 1024 take fused one-pass kernels (forward; backward with
// its parameter-gradient sums); other shapes the per-row kernels. Declarations: kernels/ops/ops.hpp;
// the CPU reference: src/nn/path_wpath.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <initializer_list>

#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

// ---- PaTH w path: one warp per (b, t, head) ------------------------------------------------------
__global__ void wpath_forward_kernel(float* w, float* conv_out, const float* u, const float* wconv, const float* bias,
                                     int64_t rows, int64_t T, int64_t H, int64_t Dh, float eps) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;  // (b * T + t) * H + h
  if (row >= rows) return;
  const int64_t C = H * Dh, h = row % H, bt = row / H, t = bt % T;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const int64_t c = h * Dh + i;
    float a = bias ? bias[c] : 0.f;
    for (int k = 0; k < 3; ++k) {
      const int64_t src = t - 2 + k;
      if (src >= 0) a += wconv[c * 3 + k] * u[(bt - t + src) * C + c];
    }
    conv_out[bt * C + c] = a;
    const float hv = a * sigmoidf_stable(a);
    w[bt * C + c] = hv;
    ss += hv * hv;
  }
  const float inv = 1.f / sqrtf(warp_sum(ss) + eps);
  for (int64_t i = threadIdx.x; i < Dh; i += 32) w[bt * C + h * Dh + i] *= inv;
}

__global__ void wpath_da_kernel(float* da, const float* dw, const float* conv_out, int64_t rows, int64_t H, int64_t Dh,
                                float eps) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (row >= rows) return;
  const float* a = conv_out + row * Dh;  // [B, T, H * Dh] row-major = rows of Dh
  const float* g = dw + row * Dh;
  float ss = 0.f, hg = 0.f;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const float hv = a[i] * sigmoidf_stable(a[i]);
    ss += hv * hv, hg += hv * g[i];
  }
  const float inv = 1.f / sqrtf(warp_sum(ss) + eps);
  const float wdw = warp_sum(hg) * inv;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const float sg = sigmoidf_stable(a[i]);
    const float hv = a[i] * sg;
    const float dh = (g[i] - hv * inv * wdw) * inv;
    da[row * Dh + i] = dh * sg * (1.f + a[i] * (1.f - sg));
  }
}

__global__ void wpath_du_kernel(float* du, const float* da, const float* wconv, int64_t N, int64_t T, int64_t C) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * C) return;
  const int64_t c = i % C, n = i / C, t = n % T;
  float acc = 0.f;
  for (int k = 2; k >= 0; --k) {  // u[t] feeds a[t + 2 - k] through tap k
    const int64_t dst = t + 2 - k;
    if (dst < T) acc += wconv[c * 3 + k] * da[(n + 2 - k) * C + c];
  }
  du[i] = acc;
}

// dwconv[c, k] += sum_n da[n, c] u[n - 2 + k, c] (same sequence), dbias[c] += sum_n da[n, c], over the
// rows of chunk blockIdx.y. partial == nullptr: added to dwconv / dbias; else partial[chunk, k, c] =
// the chunk's sum k (k = 3: the bias term), for chunk_sum_kernel over 4 C columns.
__global__ void wpath_param_grad_kernel(float* dwconv, float* dbias, float* partial, const float* da, const float* u,
                                        int64_t N, int64_t T, int64_t C, int64_t rows_per_chunk) {
  __shared__ float part[4][16][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  const int64_t n0 = blockIdx.y * rows_per_chunk, n1 = min(N, n0 + rows_per_chunk);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (c < C)
    for (int64_t n = n0 + threadIdx.y; n < n1; n += 16) {
      const float d = da[n * C + c];
      const int64_t t = n % T;
      for (int k = 0; k < 3; ++k)
        if (t - 2 + k >= 0) acc[k] += d * u[(n - 2 + k) * C + c];
      acc[3] += d;
    }
  for (int k = 0; k < 4; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int k = 0; k < 4; ++k) {
      float s = 0.f;
      for (int i = 0; i < 16; ++i) s += part[k][i][threadIdx.x];
      if (partial)
        partial[(blockIdx.y * 4 + k) * C + c] = s;
      else if (k < 3)
        dwconv[c * 3 + k] += s;
      else if (dbias)
        dbias[c] += s;
    }
  }
}

// The chunked wpath sums: partial[chunk, k, c] in chunk order into dwconv[c, k] and dbias[c].
__global__ void wpath_chunk_sum_kernel(float* dwconv, float* dbias, const float* partial, int64_t chunks, int64_t C) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= 4 * C) return;
  const int64_t k = i / C, c = i % C;
  float s = 0.f;
  for (int64_t ch = 0; ch < chunks; ++ch) s += partial[(ch * 4 + k) * C + c];
  if (k < 3)
    dwconv[c * 3 + k] += s;
  else if (dbias)
    dbias[c] += s;
}


// ---- fused w path: Dh % 4 == 0, G = Dh / 4 a power of two <= 32, C <= 1024 ------------------------
// Thread layout: a "lane row" of Gp = C / 4 rounded up to 32 threads takes one sequence b and a run of
// kRun time steps; thread g of it owns columns 4g .. 4g + 3 (head g / G), so a head is G adjacent
// lanes of one warp and its L2 norm is a G-lane xor sum. Threads g >= C / 4 are whole head groups
// that compute zeros and store nothing. Walking t inside the run keeps the convolution's window in
// registers: u is read once (plus a 2-step halo per run), conv_out and w written once.
constexpr int kRun = 8;

__device__ __forceinline__ float4 f4(float v) { return make_float4(v, v, v, v); }
__device__ __forceinline__ float4 load4(const float* p, bool ok) {
  return ok ? *reinterpret_cast<const float4*>(p) : f4(0.f);
}
__device__ __forceinline__ float group_sum(float x, int G) {
  for (int o = 1; o < G; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
// a + w * x per column, in the CPU's order (a += w x per tap).
__device__ __forceinline__ float4 fma4(const float (&w)[4], float4 x, float4 a) {
  return make_float4(a.x + w[0] * x.x, a.y + w[1] * x.y, a.z + w[2] * x.z, a.w + w[3] * x.w);
}
// acc + a b per column.
__device__ __forceinline__ float4 add_mul(float4 acc, float4 a, float4 b) {
  return make_float4(acc.x + a.x * b.x, acc.y + a.y * b.y, acc.z + a.z * b.z, acc.w + a.w * b.w);
}
__device__ __forceinline__ float silu_of(float a) { return a * sigmoidf_stable(a); }

struct FusedShape {
  int64_t B, T, C, runs, items;  // items = B runs lane rows of work
  int G, Gp;
};

__global__ void wpath_forward_fused_kernel(float* w, float* conv_out, const float* u, const float* wconv,
                                           const float* bias, FusedShape sh, float eps) {
  const int g = threadIdx.x % sh.Gp, C4 = static_cast<int>(sh.C / 4);
  const int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x / sh.Gp) + threadIdx.x / sh.Gp;
  if (item >= sh.items) return;  // whole lane rows (multiples of 32 threads)
  const bool ok = g < C4;
  const int64_t b = item / sh.runs, t0 = item % sh.runs * kRun, t1 = min(sh.T, t0 + kRun);
  float wk[3][4];
  for (int k = 0; k < 3; ++k)
    for (int e = 0; e < 4; ++e) wk[k][e] = ok ? wconv[(4 * g + e) * 3 + k] : 0.f;
  const float4 b4 = bias ? load4(bias + 4 * g, ok) : f4(0.f);
  const float* ub = u + b * sh.T * sh.C + 4 * g;
  float4 uw[kRun + 2];  // u[t0 - 2 .. t0 + kRun): all loads issued before the math
#pragma unroll
  for (int i = 0; i < kRun + 2; ++i) {
    const int64_t t = t0 - 2 + i;
    uw[i] = load4(ub + t * sh.C, ok && t >= 0 && t < t1);
  }
#pragma unroll
  for (int i = 0; i < kRun; ++i) {
    const int64_t t = t0 + i;
    if (t >= t1) break;  // uniform over the lane row
    float4 a = b4;
    if (t >= 2) a = fma4(wk[0], uw[i], a);
    if (t >= 1) a = fma4(wk[1], uw[i + 1], a);
    a = fma4(wk[2], uw[i + 2], a);
    const float4 hv = make_float4(silu_of(a.x), silu_of(a.y), silu_of(a.z), silu_of(a.w));
    const float ss = group_sum(hv.x * hv.x + hv.y * hv.y + hv.z * hv.z + hv.w * hv.w, sh.G);
    const float inv = 1.f / sqrtf(ss + eps);
    if (ok) {
      const int64_t o = (b * sh.T + t) * sh.C + 4 * g;
      *reinterpret_cast<float4*>(conv_out + o) = a;
      *reinterpret_cast<float4*>(w + o) = make_float4(hv.x * inv, hv.y * inv, hv.z * inv, hv.w * inv);
    }
  }
}

// da for this thread's columns from their conv_out a and dw gr (zeros where !ok): through the
// normalisation and SiLU.
__device__ __forceinline__ float4 wpath_da(float4 a, float4 gr, float eps, int G) {
  const float s[4] = {sigmoidf_stable(a.x), sigmoidf_stable(a.y), sigmoidf_stable(a.z), sigmoidf_stable(a.w)};
  const float av[4] = {a.x, a.y, a.z, a.w}, gv[4] = {gr.x, gr.y, gr.z, gr.w};
  float hv[4], ss = 0.f, hg = 0.f;
  for (int e = 0; e < 4; ++e) hv[e] = av[e] * s[e], ss += hv[e] * hv[e], hg += hv[e] * gv[e];
  const float inv = 1.f / sqrtf(group_sum(ss, G) + eps);
  const float wdw = group_sum(hg, G) * inv;
  float da[4];
  for (int e = 0; e < 4; ++e) {
    const float dh = (gv[e] - hv[e] * inv * wdw) * inv;
    da[e] = dh * s[e] * (1.f + av[e] * (1.f - s[e]));
  }
  return make_float4(da[0], da[1], da[2], da[3]);
}

// The whole backward in one pass: for the run [t0, t1) the thread computes da at t0 .. t1 + 1 (two
// steps of halo for du), du[t] = sum_k wconv[c, k] da[t + 2 - k] (the CPU's order: k = 2, 1, 0), and
// its parameter-gradient terms da[t] u[t - 2 + k], da[t] in registers over all its items (block-stride
// over the items, a fixed order), each step's loads issued before the previous step's math. The CTA
// then adds its lane rows' terms in order: into dwconv / dbias when it is the only CTA (part_w null),
// else into part_w[blockIdx.x, c * 3 + k] and part_b[blockIdx.x, c].
__global__ void wpath_backward_fused_kernel(float* __restrict__ du, float* dwconv, float* dbias, float* part_w,
                                            float* part_b, const float* __restrict__ dw,
                                            const float* __restrict__ conv_out, const float* __restrict__ u,
                                            const float* wconv, FusedShape sh, float eps) {
  extern __shared__ float4 terms[];  // [lane rows][4 sums][Gp]
  const int g = threadIdx.x % sh.Gp, lrow = threadIdx.x / sh.Gp, lrows = blockDim.x / sh.Gp;
  const int C4 = static_cast<int>(sh.C / 4);
  const bool ok = g < C4, params = dwconv != nullptr;
  float wk[3][4];
  for (int k = 0; k < 3; ++k)
    for (int e = 0; e < 4; ++e) wk[k][e] = ok ? wconv[(4 * g + e) * 3 + k] : 0.f;
  float4 acc[4] = {f4(0.f), f4(0.f), f4(0.f), f4(0.f)};
  for (int64_t item = blockIdx.x * static_cast<int64_t>(lrows) + lrow; item < sh.items;
       item += static_cast<int64_t>(gridDim.x) * lrows) {
    const int64_t b = item / sh.runs, t0 = item % sh.runs * kRun, t1 = min(sh.T, t0 + kRun);
    const int64_t base = b * sh.T * sh.C + 4 * g;
    float4 um2 = load4(u + base + (t0 - 2) * sh.C, params && ok && t0 >= 2);
    float4 um1 = load4(u + base + (t0 - 1) * sh.C, params && ok && t0 >= 1);
    float4 dam2 = f4(0.f), dam1 = f4(0.f);  // da[t - 2], da[t - 1]
    // Step t's loads (conv_out, dw where t < T; u where t < t1), issued one step ahead.
    const auto loads = [&](int64_t t, float4& a, float4& gr, float4& uu) {
      a = load4(conv_out + base + t * sh.C, ok && t < sh.T);
      gr = load4(dw + base + t * sh.C, ok && t < sh.T);
      uu = load4(u + base + t * sh.C, params && ok && t < t1);
    };
    float4 a_next, g_next, u_next;
    loads(t0, a_next, g_next, u_next);
#pragma unroll
    for (int i = 0; i < kRun + 2; ++i) {
      const int64_t t = t0 + i;
      if (t >= t1 + 2) break;  // uniform over the lane row
      const float4 a = a_next, gr = g_next, u0 = u_next;
      if (t + 1 < t1 + 2) loads(t + 1, a_next, g_next, u_next);
      const bool in = t < sh.T;
      const float4 da = in ? wpath_da(a, gr, eps, sh.G) : f4(0.f);
      if (t < t1 && params) {
        if (t >= 2) acc[0] = add_mul(acc[0], da, um2);
        if (t >= 1) acc[1] = add_mul(acc[1], da, um1);
        acc[2] = add_mul(acc[2], da, u0);
        acc[3] = add_mul(acc[3], da, f4(1.f));
        um2 = um1, um1 = u0;
      }
      if (i >= 2 && du && ok) {  // du[t - 2] from da[t - 2], da[t - 1], da[t]
        float4 d = make_float4(wk[2][0] * dam2.x, wk[2][1] * dam2.y, wk[2][2] * dam2.z, wk[2][3] * dam2.w);
        if (t - 1 < sh.T) d = fma4(wk[1], dam1, d);
        if (in) d = fma4(wk[0], da, d);
        *reinterpret_cast<float4*>(du + base + (t - 2) * sh.C) = d;
      }
      dam2 = dam1, dam1 = da;
    }
  }
  if (!params) return;
  for (int k = 0; k < 4; ++k) terms[(lrow * 4 + k) * sh.Gp + g] = acc[k];
  __syncthreads();
  const float* tf = reinterpret_cast<const float*>(terms);
  const int64_t cols = 4 * sh.C, stride = 4 * static_cast<int64_t>(sh.Gp);  // floats per sum k of a lane row
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const int64_t k = i / sh.C, c = i % sh.C;
    float s = 0.f;
    for (int r = 0; r < lrows; ++r) s += tf[(r * 4 + k) * stride + c];
    if (part_w) {
      if (k < 3) part_w[blockIdx.x * 3 * sh.C + c * 3 + k] = s;
      else part_b[blockIdx.x * sh.C + c] = s;
    } else if (k < 3) {
      dwconv[c * 3 + k] += s;
    } else if (dbias) {
      dbias[c] += s;
    }
  }
}

// The fused kernels' shape, or items = 0 where they do not apply (Dh % 4, Dh > 128, C > 1024, or a
// pointer not 16-byte aligned).
FusedShape fused_shape(int64_t B, int64_t T, int64_t H, int64_t Dh, std::initializer_list<const void*> ptrs) {
  FusedShape sh{B, T, H * Dh, (T + kRun - 1) / kRun, 0, static_cast<int>(Dh / 4), 0};
  const int64_t G = Dh / 4;
  if (Dh % 4 != 0 || G > 32 || (G & (G - 1)) != 0 || sh.C > 1024) return sh;
  for (const void* p : ptrs)
    if (p && !aligned_to(p, 16)) return sh;
  sh.Gp = static_cast<int>((sh.C / 4 + 31) / 32 * 32);
  sh.items = B * sh.runs;
  return sh;
}

__global__ void beta_forward_kernel(float* beta, const float* z, int64_t n, float beta_max) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) beta[i] = fminf(2.f * sigmoidf_stable(z[i]), beta_max);
}
__global__ void beta_backward_kernel(float* dz, const float* dbeta, const float* z, int64_t n, float beta_max) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float sg = sigmoidf_stable(z[i]);
  dz[i] = 2.f * sg > beta_max ? 0.f : dbeta[i] * 2.f * sg * (1.f - sg);
}

}  // namespace

using namespace ops_detail;

void path_wpath_forward_cuda(float* w, float* conv_out, const float* u, const float* wconv, const float* bias,
                             int64_t B, int64_t T, int64_t H, int64_t Dh, float eps, cudaStream_t stream) {
  const int64_t rows = B * T * H;
  if (rows <= 0) return;
  const FusedShape sh = fused_shape(B, T, H, Dh, {w, conv_out, u, bias});
  if (sh.items > 0) {
    const int lrows = std::max(1, kThreads / sh.Gp);
    wpath_forward_fused_kernel<<<blocks_for(sh.items, lrows), lrows * sh.Gp, 0, stream>>>(w, conv_out, u, wconv, bias,
                                                                                         sh, eps);
    SB_CUDA_CHECK_LAUNCH();
    return;
  }
  wpath_forward_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(w, conv_out, u, wconv,
                                                                                              bias, rows, T, H, Dh, eps);
  SB_CUDA_CHECK_LAUNCH();
}

void path_wpath_backward_cuda(float* du, float* dwconv, float* dbias, float* da_scratch, const float* dw,
                              const float* conv_out, const float* u, const float* wconv, int64_t B, int64_t T,
                              int64_t H, int64_t Dh, float eps, cudaStream_t stream, ReduceScratch scratch) {
  const int64_t rows = B * T * H, N = B * T, C = H * Dh;
  if (rows <= 0) return;
  const FusedShape sh = fused_shape(B, T, H, Dh, {du, dw, conv_out, u});
  if (sh.items > 0) {
    const int lrows = std::max(1, kThreads / sh.Gp);
    int64_t grid = blocks_for(sh.items, lrows);
    float *part_w = nullptr, *part_b = nullptr;
    if (dwconv) {  // a partial row per CTA, kept in da_scratch (N C floats, unused by the fused path) or
                   // else the ReduceScratch; at most 1024 (none fits: one CTA adds straight into dwconv)
      float* part = da_scratch ? da_scratch : scratch.data;
      const int64_t room = da_scratch ? N * C : scratch.data ? scratch.floats : 0;
      grid = std::max<int64_t>(1, std::min<int64_t>({grid, room / (4 * C), 1024}));
      if (grid > 1) part_w = part, part_b = part + grid * 3 * C;
    }
    const size_t smem = static_cast<size_t>(lrows) * 4 * sh.Gp * sizeof(float4);
    wpath_backward_fused_kernel<<<static_cast<unsigned>(grid), lrows * sh.Gp, smem, stream>>>(
        du, dwconv, dbias, part_w, part_b, dw, conv_out, u, wconv, sh, eps);
    SB_CUDA_CHECK_LAUNCH();
    if (part_w) {
      chunk_sum(dwconv, part_w, grid, 3 * C, stream);
      if (dbias) chunk_sum(dbias, part_b, grid, C, stream);
    }
    return;
  }
  wpath_da_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(da_scratch, dw, conv_out,
                                                                                         rows, H, Dh, eps);
  SB_CUDA_CHECK_LAUNCH();
  if (du) {
    wpath_du_kernel<<<blocks_for(N * C), kThreads, 0, stream>>>(du, da_scratch, wconv, N, T, C);
    SB_CUDA_CHECK_LAUNCH();
  }
  if (dwconv) {
    const int64_t chunks = reduce_chunks(N, 4 * C, scratch), rows_per = (N + chunks - 1) / chunks;
    float* partial = chunks > 1 ? scratch.data : nullptr;
    wpath_param_grad_kernel<<<dim3(blocks_for(C, 32), static_cast<unsigned>(chunks)), dim3(32, 16), 0, stream>>>(
        dwconv, dbias, partial, da_scratch, u, N, T, C, rows_per);
    SB_CUDA_CHECK_LAUNCH();
    if (partial) {
      wpath_chunk_sum_kernel<<<blocks_for(4 * C), kThreads, 0, stream>>>(dwconv, dbias, partial, chunks, C);
      SB_CUDA_CHECK_LAUNCH();
    }
  }
}

void path_beta_forward_cuda(float* beta, const float* z, int64_t n, float beta_max, cudaStream_t stream) {
  if (n <= 0) return;
  beta_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(beta, z, n, beta_max);
  SB_CUDA_CHECK_LAUNCH();
}

void path_beta_backward_cuda(float* dz, const float* dbeta, const float* z, int64_t n, float beta_max,
                             cudaStream_t stream) {
  if (n <= 0) return;
  beta_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dz, dbeta, z, n, beta_max);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace sb::cuda
