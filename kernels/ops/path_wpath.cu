// path_wpath.cu: CUDA kernels of the PaTH projections: the w path (short causal convolution,
// SiLU, L2 normalisation per head) and beta = min(2 sigmoid(z), beta_max), forward and backward.
// Head dims Dh = 4, 8, ..., 128 with H Dh <= 1024 take fused one-pass kernels (forward; backward with
// its parameter-gradient sums); other shapes the per-row kernels. The backward recomputes the
// convolution from u (the forward saves nothing). Declarations: kernels/ops/ops.hpp; the CPU
// reference: src/nn/path_wpath.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <initializer_list>

#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

// The w path's sigmoid and 1 / sqrt on the fast hardware functions (a few ulp; the kernels are bound
// by this arithmetic, not by memory). Every w path kernel uses them, so that the backward's
// recomputation matches its forward.
__device__ __forceinline__ float sigmoid_of(float a) { return __fdividef(1.f, 1.f + __expf(-a)); }
__device__ __forceinline__ float silu_of(float a) { return a * sigmoid_of(a); }
__device__ __forceinline__ float inv_norm(float ss, float eps) { return rsqrtf(ss + eps); }

// ---- PaTH w path: one warp per (b, t, head) ------------------------------------------------------
// The convolution's output a[n, c] = bias[c] + sum_k wconv[c, k] u[n - 2 + k, c] (row n at time t of
// its sequence; taps before t = 0 skipped), in the CPU's order.
__device__ __forceinline__ float conv_at(const float* u, const float* wconv, const float* bias, int64_t n, int64_t t,
                                         int64_t c, int64_t C) {
  float a = bias ? bias[c] : 0.f;
  for (int k = 0; k < 3; ++k)
    if (t - 2 + k >= 0) a += wconv[c * 3 + k] * u[(n - 2 + k) * C + c];
  return a;
}

__global__ void wpath_forward_kernel(float* w, const float* u, const float* wconv, const float* bias, int64_t rows,
                                     int64_t T, int64_t H, int64_t Dh, float eps) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;  // (b * T + t) * H + h
  if (row >= rows) return;
  const int64_t C = H * Dh, h = row % H, bt = row / H, t = bt % T;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const int64_t c = h * Dh + i;
    const float hv = silu_of(conv_at(u, wconv, bias, bt, t, c, C));
    w[bt * C + c] = hv;
    ss += hv * hv;
  }
  const float inv = inv_norm(warp_sum(ss), eps);
  for (int64_t i = threadIdx.x; i < Dh; i += 32) w[bt * C + h * Dh + i] *= inv;
}

__global__ void wpath_da_kernel(float* da, const float* dw, const float* u, const float* wconv, const float* bias,
                                int64_t rows, int64_t T, int64_t H, int64_t Dh, float eps) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (row >= rows) return;
  const int64_t C = H * Dh, h = row % H, bt = row / H, t = bt % T;
  const float* g = dw + row * Dh;  // [B, T, H * Dh] row-major = rows of Dh
  float ss = 0.f, hg = 0.f;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const float hv = silu_of(conv_at(u, wconv, bias, bt, t, h * Dh + i, C));
    ss += hv * hv, hg += hv * g[i];
  }
  const float inv = inv_norm(warp_sum(ss), eps);
  const float wdw = warp_sum(hg) * inv;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const float a = conv_at(u, wconv, bias, bt, t, h * Dh + i, C);
    const float sg = sigmoid_of(a);
    const float hv = a * sg;
    const float dh = (g[i] - hv * inv * wdw) * inv;
    da[row * Dh + i] = dh * sg * (1.f + a * (1.f - sg));
  }
}

// du[n, c] (fp32 [N, C], or with dub bf16 at dub[n ld + c]).
__global__ void wpath_du_kernel(float* du, uint16_t* dub, int64_t ld, const float* da, const float* wconv, int64_t N,
                                int64_t T, int64_t C) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * C) return;
  const int64_t c = i % C, n = i / C, t = n % T;
  float acc = 0.f;
  for (int k = 2; k >= 0; --k) {  // u[t] feeds a[t + 2 - k] through tap k
    const int64_t dst = t + 2 - k;
    if (dst < T) acc += wconv[c * 3 + k] * da[(n + 2 - k) * C + c];
  }
  if (dub) dub[n * ld + c] = bf16_bits(acc);
  else du[i] = acc;
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
// time steps; thread g of it owns columns 4g .. 4g + 3 (head g / G), so a head is G adjacent lanes of
// one warp and its L2 norm is a G-lane xor sum. Threads g >= C / 4 are whole head groups that compute
// zeros and store nothing. Walking t inside the run keeps the convolution's window in registers. The
// forward holds its run's u (RUN + 2 float4) at once, so its runs are short (more threads, fewer
// registers); the backward streams, recomputing two steps of halo a run, so its runs are longer.
constexpr int kFwdRun = 4, kBwdRun = 8;

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
// The convolution's output at time t from u[t - 2], u[t - 1], u[t] (taps before t = 0 skipped):
// conv_at's arithmetic, four columns at once; the forward and the backward's recomputation agree.
__device__ __forceinline__ float4 conv4(const float (&wk)[3][4], float4 b4, float4 um2, float4 um1, float4 u0,
                                        int64_t t) {
  float4 a = b4;
  if (t >= 2) a = fma4(wk[0], um2, a);
  if (t >= 1) a = fma4(wk[1], um1, a);
  return fma4(wk[2], u0, a);
}

struct FusedShape {
  int64_t B, T, C, runs, items;  // items = B runs lane rows of work
  int G, Gp;
};
// This thread's taps wconv[c, k] and bias (zeros where !ok).
struct Taps {
  float wk[3][4];
  float4 b4;
  __device__ Taps(const float* wconv, const float* bias, int g, bool ok) {
    for (int k = 0; k < 3; ++k)
      for (int e = 0; e < 4; ++e) wk[k][e] = ok ? wconv[(4 * g + e) * 3 + k] : 0.f;
    b4 = bias ? load4(bias + 4 * g, ok) : f4(0.f);
  }
};

template <int RUN>
__global__ void __launch_bounds__(kThreads, 4) wpath_forward_fused_kernel(float* w, const float* u, const float* wconv,
                                                                          const float* bias, FusedShape sh, float eps) {
  const int g = threadIdx.x % sh.Gp, C4 = static_cast<int>(sh.C / 4);
  const int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x / sh.Gp) + threadIdx.x / sh.Gp;
  if (item >= sh.items) return;  // whole lane rows (multiples of 32 threads)
  const bool ok = g < C4;
  const int64_t b = item / sh.runs, t0 = item % sh.runs * RUN, t1 = min(sh.T, t0 + RUN);
  const float* ub = u + b * sh.T * sh.C + 4 * g;
  float4 uw[RUN + 2];  // u[t0 - 2 .. t0 + RUN): all loads issued before the math
#pragma unroll
  for (int i = 0; i < RUN + 2; ++i) {
    const int64_t t = t0 - 2 + i;
    uw[i] = load4(ub + t * sh.C, ok && t >= 0 && t < t1);
  }
  const Taps tp(wconv, bias, g, ok);
#pragma unroll
  for (int i = 0; i < RUN; ++i) {
    const int64_t t = t0 + i;
    if (t >= t1) break;  // uniform over the lane row
    const float4 a = conv4(tp.wk, tp.b4, uw[i], uw[i + 1], uw[i + 2], t);
    const float4 hv = make_float4(silu_of(a.x), silu_of(a.y), silu_of(a.z), silu_of(a.w));
    const float ss = group_sum(hv.x * hv.x + hv.y * hv.y + hv.z * hv.z + hv.w * hv.w, sh.G);
    const float inv = inv_norm(ss, eps);
    if (ok)
      *reinterpret_cast<float4*>(w + (b * sh.T + t) * sh.C + 4 * g) =
          make_float4(hv.x * inv, hv.y * inv, hv.z * inv, hv.w * inv);
  }
}

// da for this thread's columns from their convolution output a and dw gr (zeros where !ok): through
// the normalisation and SiLU.
__device__ __forceinline__ float4 wpath_da(float4 a, float4 gr, float eps, int G) {
  const float s[4] = {sigmoid_of(a.x), sigmoid_of(a.y), sigmoid_of(a.z), sigmoid_of(a.w)};
  const float av[4] = {a.x, a.y, a.z, a.w}, gv[4] = {gr.x, gr.y, gr.z, gr.w};
  float hv[4], ss = 0.f, hg = 0.f;
  for (int e = 0; e < 4; ++e) hv[e] = av[e] * s[e], ss += hv[e] * hv[e], hg += hv[e] * gv[e];
  const float inv = inv_norm(group_sum(ss, G), eps);
  const float wdw = group_sum(hg, G) * inv;
  float da[4];
  for (int e = 0; e < 4; ++e) {
    const float dh = (gv[e] - hv[e] * inv * wdw) * inv;
    da[e] = dh * s[e] * (1.f + av[e] * (1.f - s[e]));
  }
  return make_float4(da[0], da[1], da[2], da[3]);
}

// The whole backward in one pass: for the run [t0, t1) the thread recomputes the convolution and da
// at t0 .. t1 + 1 (two steps of halo for du), du[t] = sum_k wconv[c, k] da[t + 2 - k] (the CPU's
// order: k = 2, 1, 0), and its parameter-gradient terms da[t] u[t - 2 + k], da[t] in registers over
// all its items (block-stride over the items, a fixed order), each step's loads issued before the
// previous step's math. The CTA then adds its lane rows' terms in order: into dwconv / dbias when it
// is the only CTA (part_w null), else into part_w[blockIdx.x, c * 3 + k] and part_b[blockIdx.x, c].
template <int RUN>
__global__ void __launch_bounds__(kThreads)
    wpath_backward_fused_kernel(float* __restrict__ du, uint16_t* __restrict__ dub, int64_t dub_ld, float* dwconv,
                                float* dbias, float* part_w, float* part_b, const float* __restrict__ dw,
                                const float* __restrict__ u, const float* wconv, const float* bias, FusedShape sh,
                                float eps) {
  extern __shared__ float4 terms[];  // [lane rows][4 sums][Gp]
  const int g = threadIdx.x % sh.Gp, lrow = threadIdx.x / sh.Gp, lrows = blockDim.x / sh.Gp;
  const int C4 = static_cast<int>(sh.C / 4);
  const bool ok = g < C4, params = dwconv != nullptr;
  const Taps tp(wconv, bias, g, ok);
  float4 acc[4] = {f4(0.f), f4(0.f), f4(0.f), f4(0.f)};
  for (int64_t item = blockIdx.x * static_cast<int64_t>(lrows) + lrow; item < sh.items;
       item += static_cast<int64_t>(gridDim.x) * lrows) {
    const int64_t b = item / sh.runs;
    const int T = static_cast<int>(sh.T), C = static_cast<int>(sh.C);  // a sequence's rows: T C < 2^31
    const int t0 = static_cast<int>(item % sh.runs) * RUN, t1 = min(T, t0 + RUN);
    const int64_t base = b * sh.T * sh.C + 4 * g;
    const float *dwb = dw + base, *ub = u + base;
    float4 um2 = load4(ub + (t0 - 2) * C, ok && t0 >= 2);
    float4 um1 = load4(ub + (t0 - 1) * C, ok && t0 >= 1);
    float4 dam2 = f4(0.f), dam1 = f4(0.f);  // da[t - 2], da[t - 1]
    // Step t's loads (dw and u where t < T), issued one step ahead.
    float4 g_next = load4(dwb + t0 * C, ok), u_next = load4(ub + t0 * C, ok);
#pragma unroll 1
    for (int t = t0; t < t1 + 2; ++t) {
      const float4 gr = g_next, u0 = u_next;
      const bool next = t + 1 < T && t + 1 < t1 + 2;
      g_next = load4(dwb + (t + 1) * C, ok && next), u_next = load4(ub + (t + 1) * C, ok && next);
      const bool in = t < T;
      const float4 da = in ? wpath_da(conv4(tp.wk, tp.b4, um2, um1, u0, t), gr, eps, sh.G) : f4(0.f);
      if (t < t1 && params) {
        if (t >= 2) acc[0] = add_mul(acc[0], da, um2);
        if (t >= 1) acc[1] = add_mul(acc[1], da, um1);
        acc[2] = add_mul(acc[2], da, u0);
        acc[3] = add_mul(acc[3], da, f4(1.f));
      }
      um2 = um1, um1 = u0;
      if (t >= t0 + 2 && (du || dub) && ok) {  // du[t - 2] from da[t - 2], da[t - 1], da[t]
        float4 d = make_float4(tp.wk[2][0] * dam2.x, tp.wk[2][1] * dam2.y, tp.wk[2][2] * dam2.z, tp.wk[2][3] * dam2.w);
        if (t - 1 < T) d = fma4(tp.wk[1], dam1, d);
        if (in) d = fma4(tp.wk[0], da, d);
        if (dub) {
          const float v[4] = {d.x, d.y, d.z, d.w};
          store_vec<4>(dub + (b * sh.T + t - 2) * dub_ld + 4 * g, v);
        } else {
          *reinterpret_cast<float4*>(du + base + (t - 2) * C) = d;
        }
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

// The fused kernels' shape for runs of `run` steps, or items = 0 where they do not apply (Dh % 4,
// Dh > 128, C > 1024, or a pointer not 16-byte aligned).
FusedShape fused_shape(int64_t B, int64_t T, int64_t H, int64_t Dh, int64_t run,
                       std::initializer_list<const void*> ptrs) {
  FusedShape sh{B, T, H * Dh, (T + run - 1) / run, 0, static_cast<int>(Dh / 4), 0};
  const int64_t G = Dh / 4;
  if (Dh % 4 != 0 || G > 32 || (G & (G - 1)) != 0 || sh.C > 1024) return sh;
  for (const void* p : ptrs)
    if (p && !aligned_to(p, 16)) return sh;
  sh.Gp = static_cast<int>((sh.C / 4 + 31) / 32 * 32);
  sh.items = B * sh.runs;
  return sh;
}

// beta over [N, H] (i = n H + h): with bias, z[i] += bias[h] first, in place (the backward reads it).
__global__ void beta_forward_kernel(float* beta, float* z, const float* bias, int64_t n, int64_t H, float beta_max) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float zi = z[i];
  if (bias) z[i] = zi = zi + bias[i % H];
  beta[i] = fminf(2.f * sigmoidf_stable(zi), beta_max);
}
// dz over kBetaPerThread elements a thread (i = base + tid + kThreads j); with part (H a power of two
// dividing kThreads: a thread's elements share column tid % H), part[cta, h] = the CTA's sum of
// column h, the threads' sums added as a tree (threads t and t + s, s a multiple of H, share a column).
constexpr int kBetaPerThread = 2;
__global__ void beta_backward_kernel(float* dz, float* part, const float* dbeta, const float* z, int64_t n, int H,
                                     float beta_max) {
  __shared__ float sums[kThreads];
  const int64_t base = blockIdx.x * static_cast<int64_t>(kThreads) * kBetaPerThread + threadIdx.x;
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < kBetaPerThread; ++j) {
    const int64_t i = base + j * kThreads;
    if (i < n) {
      const float sg = sigmoidf_stable(z[i]);
      const float d = 2.f * sg > beta_max ? 0.f : dbeta[i] * 2.f * sg * (1.f - sg);
      dz[i] = d;
      acc += d;
    }
  }
  if (!part) return;
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s >= H; s >>= 1) {
    if (threadIdx.x < s) sums[threadIdx.x] += sums[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x < H) part[blockIdx.x * static_cast<int64_t>(H) + threadIdx.x] = sums[threadIdx.x];
}

}  // namespace

using namespace ops_detail;

void path_wpath_forward_cuda(float* w, const float* u, const float* wconv, const float* bias, int64_t B, int64_t T,
                             int64_t H, int64_t Dh, float eps, cudaStream_t stream) {
  const int64_t rows = B * T * H;
  if (rows <= 0) return;
  const FusedShape sh = fused_shape(B, T, H, Dh, kFwdRun, {w, u, bias});
  if (sh.items > 0) {
    const int lrows = std::max(1, kThreads / sh.Gp);
    wpath_forward_fused_kernel<kFwdRun>
        <<<blocks_for(sh.items, lrows), lrows * sh.Gp, 0, stream>>>(w, u, wconv, bias, sh, eps);
    SB_CUDA_CHECK_LAUNCH();
    return;
  }
  wpath_forward_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(w, u, wconv, bias, rows,
                                                                                                T, H, Dh, eps);
  SB_CUDA_CHECK_LAUNCH();
}

void path_wpath_backward_cuda(float* du, float* dwconv, float* dbias, float* da_scratch, const float* dw,
                              const float* u, const float* wconv, const float* bias, int64_t B, int64_t T, int64_t H,
                              int64_t Dh, float eps, cudaStream_t stream, ReduceScratch scratch, uint16_t* du_bf16,
                              int64_t du_ld) {
  const int64_t rows = B * T * H, N = B * T, C = H * Dh;
  if (rows <= 0) return;
  FusedShape sh = fused_shape(B, T, H, Dh, kBwdRun, {du, dw, u, bias});
  if (du_bf16 && (!aligned_to(du_bf16, 8) || du_ld % 4 != 0)) sh.items = 0;  // the fused kernel's 4-column stores
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
    wpath_backward_fused_kernel<kBwdRun><<<static_cast<unsigned>(grid), lrows * sh.Gp, smem, stream>>>(
        du, du_bf16, du_ld, dwconv, dbias, part_w, part_b, dw, u, wconv, bias, sh, eps);
    SB_CUDA_CHECK_LAUNCH();
    if (part_w) chunk_sum(dwconv, part_w, grid, 3 * C, stream, dbias, dbias ? part_b : nullptr, C);
    return;
  }
  wpath_da_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(da_scratch, dw, u, wconv,
                                                                                           bias, rows, T, H, Dh, eps);
  SB_CUDA_CHECK_LAUNCH();
  if (du || du_bf16) {
    wpath_du_kernel<<<blocks_for(N * C), kThreads, 0, stream>>>(du, du_bf16, du_ld, da_scratch, wconv, N, T, C);
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

void path_beta_forward_cuda(float* beta, float* z, const float* bias, int64_t N, int64_t H, float beta_max,
                            cudaStream_t stream) {
  const int64_t n = N * H;
  if (n <= 0) return;
  beta_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(beta, z, bias, n, H, beta_max);
  SB_CUDA_CHECK_LAUNCH();
}

void path_beta_backward_cuda(float* dz, float* dbias, const float* dbeta, const float* z, int64_t N, int64_t H,
                             float beta_max, cudaStream_t stream, ReduceScratch scratch) {
  const int64_t n = N * H;
  if (n <= 0) return;
  const int64_t ctas = (n + kThreads * kBetaPerThread - 1) / (kThreads * kBetaPerThread);
  // The bias gradient's partial sums in the same pass where a thread's elements share a column and
  // they fit the scratch; else column sums over dz afterwards.
  const bool fused = dbias && H <= kThreads && (H & (H - 1)) == 0 && scratch.data && ctas * H <= scratch.floats;
  beta_backward_kernel<<<static_cast<unsigned>(ctas), kThreads, 0, stream>>>(dz, fused ? scratch.data : nullptr, dbeta,
                                                                             z, n, static_cast<int>(H), beta_max);
  SB_CUDA_CHECK_LAUNCH();
  if (fused) chunk_sum(dbias, scratch.data, ctas, H, stream);
  else if (dbias) colsum(dbias, dz, nullptr, nullptr, nullptr, N, H, 0, stream, scratch);
}

}  // namespace sb::cuda
