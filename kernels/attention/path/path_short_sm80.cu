// path_short_sm80.cu: PaTH attention at short T (T <= 64, plan.hpp path_short), forward and backward:
// one CTA per (b, h) holds the whole sequence in shared memory as one UT block and does the factors,
// the logits, the softmax and (backward) every gradient on chip in fp32 with plain FMAs, one launch
// per direction. The math is docs/path-backward.md's own block with no other block (no query
// transport, no pushed keys); the backward recomputes the forward from the saved lse.
#include <cuda_bf16.h>

#include "kernels/attention/internal.hpp"
#include "kernels/attention/path/path_short_args.hpp"

namespace sb::cuda::detail {
namespace {

constexpr int kThreads = 256;

template <bool BF>
__device__ __forceinline__ float load_x(const void* p, int64_t i) {
  if constexpr (BF)
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  else
    return static_cast<const float*>(p)[i];
}
template <bool BF>
__device__ __forceinline__ void store_x(void* p, int64_t i, float x) {
  if constexpr (BF)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
  else
    static_cast<float*>(p)[i] = x;
}

// out(i, j, sum_k a(i, k) b(k, j)) for i < M, j < N, k in [k0, k1) of each 2 x 2 output tile
// (range(i0, j0, k0, k1) bounds the tile at rows i0, i0 + 1 and columns j0, j0 + 1; the operands'
// structural zeros make any superset of the nonzero terms exact). a and b must be readable (and 0)
// one row / column past M / N when they are odd. Tiles go round-robin over the CTA, columns fastest:
// two calls with the same M and N give each thread the same tiles.
template <class A, class B, class Range, class Out>
__device__ __forceinline__ void mm(int M, int N, A a, B b, Range range, Out out) {
  const int tn = (N + 1) / 2, tiles = ((M + 1) / 2) * tn;
  for (int t = threadIdx.x; t < tiles; t += kThreads) {
    const int i0 = 2 * (t / tn), j0 = 2 * (t % tn);
    int k0, k1;
    range(i0, j0, k0, k1);
    float c00 = 0.f, c01 = 0.f, c10 = 0.f, c11 = 0.f;
    for (int k = k0; k < k1; ++k) {
      const float a0 = a(i0, k), a1 = a(i0 + 1, k), b0 = b(k, j0), b1 = b(k, j0 + 1);
      c00 = fmaf(a0, b0, c00), c01 = fmaf(a0, b1, c01), c10 = fmaf(a1, b0, c10), c11 = fmaf(a1, b1, c11);
    }
    out(i0, j0, c00);
    if (j0 + 1 < N) out(i0, j0 + 1, c01);
    if (i0 + 1 < M) {
      out(i0 + 1, j0, c10);
      if (j0 + 1 < N) out(i0 + 1, j0 + 1, c11);
    }
  }
}

// The shared-memory view of one head (plan.hpp PathShortLayout). T x T matrices are stored in
// square slots; two triangular matrices may share a slot, one in the lower triangle and the other
// transposed in the strictly upper one, so every read goes through an accessor that applies the
// structure (entries outside it read as 0):
//   m1: Tinv (lower) | Gram = W W^T (strictly lower, transposed)
//   m2: Z = Tinv C (strictly lower) | C = W K^T (strictly lower, transposed)
//   m3: A = Qs W^T (lower); backward: dTinv, then R = M^-T dTinv in place (lower)
//   m4: P (lower); backward: dS (lower), then dC (strictly lower), then E, then dGram (strictly lower)
//   m5: backward: dP (lower), then dA (lower) | dZ (strictly lower, transposed)
struct View {
  float* s;
  int64_t T, ldx, ldt;
  PathShortLayout L;
  __device__ float* at(int64_t off) const { return s + off; }
  __device__ float& x(int64_t off, int r, int c) const { return s[off + r * ldx + c]; }
  __device__ float& m(int64_t off, int r, int c) const { return s[off + r * ldt + c]; }
  __device__ float lower(int64_t off, int r, int c) const { return c <= r ? m(off, r, c) : 0.f; }
  __device__ float strict(int64_t off, int r, int c) const { return c < r ? m(off, r, c) : 0.f; }
  __device__ float strict_t(int64_t off, int r, int c) const { return c < r ? m(off, c, r) : 0.f; }
  __device__ double* g() const { return reinterpret_cast<double*>(s + L.g); }
};

// Loads one head: Qs = scale q, K, W (and V) into the view, beta, the gate prefix sums
// G_t = sum_{s=1..t} log f_s in double (0 without a gate); every other float zeroed first.
template <int Dh, bool BF>
__device__ void load_head(const View& sv, const PathShortArgs& a, int64_t e0, int64_t es, int64_t s0, int64_t floats) {
  for (int64_t i = threadIdx.x; i < floats; i += kThreads) sv.s[i] = 0.f;
  __syncthreads();
  const int T = static_cast<int>(sv.T);
  for (int idx = threadIdx.x; idx < T * Dh; idx += kThreads) {
    const int t = idx / Dh, c = idx % Dh;
    const int64_t gi = e0 + t * es + c;
    sv.x(sv.L.qs, t, c) = a.scale * load_x<BF>(a.q, gi);
    sv.x(sv.L.k, t, c) = load_x<BF>(a.k, gi);
    sv.x(sv.L.w, t, c) = a.w[gi];
    sv.x(sv.L.v, t, c) = load_x<BF>(a.v, gi);
  }
  for (int t = threadIdx.x; t < T; t += kThreads) sv.at(sv.L.beta)[t] = a.beta[s0 + t * a.H];
  if (threadIdx.x == 0) {
    double gsum = 0.0;
    sv.g()[0] = 0.0;
    for (int t = 1; t < T; ++t) {
      if (a.log_f) gsum += a.log_f[s0 + t * a.H];
      sv.g()[t] = gsum;
    }
  }
  __syncthreads();
}

// The forward's on-chip part shared by both directions: Gram, C, A, Tinv (forward substitution,
// one thread per column), Z = Tinv C, and the logits S = lower(Qs K^T) - A Z + G_i - G_j into m4
// (lower; unscaled gate, as every PaTH kernel). Ends synchronised.
template <int Dh>
__device__ void logits(const View& sv) {
  const int T = static_cast<int>(sv.T);
  const PathShortLayout& L = sv.L;
  // The products over Dh below fill lower triangles only: tiles wholly above the diagonal are skipped.
  auto kdh = [](int i0, int j0, int& k0, int& k1) { k0 = 0, k1 = j0 > i0 + 1 ? 0 : Dh; };
  auto xw = [&](int i, int k) { return sv.x(L.w, i, k); };
  auto wt = [&](int k, int j) { return sv.x(L.w, j, k); };
  auto kt = [&](int k, int j) { return sv.x(L.k, j, k); };
  auto xq = [&](int i, int k) { return sv.x(L.qs, i, k); };
  // Gram_rp = w_r . w_p (p < r) into m1's upper triangle; C_lj = w_l . k_j (j < l) into m2's;
  // A_ir = qs_i . w_r (r <= i) into m3; Qs K^T into m4 (lower).
  mm(T, T, xw, wt, kdh, [&](int r, int p, float v) { if (p < r) sv.m(L.m1, p, r) = v; });
  mm(T, T, xw, kt, kdh, [&](int l, int j, float v) { if (j < l) sv.m(L.m2, j, l) = v; });
  mm(T, T, xq, wt, kdh, [&](int i, int r, float v) { if (r <= i) sv.m(L.m3, i, r) = v; });
  mm(T, T, xq, kt, kdh, [&](int i, int j, float v) { if (j <= i) sv.m(L.m4, i, j) = v; });
  __syncthreads();
  // Tinv = (I + strictLower(D Gram))^-1 D, column l: x_l = beta_l, x_r = -beta_r sum_{l<=p<r} Gram_rp x_p.
  const float* beta = sv.at(L.beta);
  for (int l = threadIdx.x; l < T; l += kThreads) {
    sv.m(L.m1, l, l) = beta[l];
    for (int r = l + 1; r < T; ++r) {
      float acc = 0.f;
      for (int p = l; p < r; ++p) acc = fmaf(sv.m(L.m1, p, r), sv.m(L.m1, p, l), acc);
      sv.m(L.m1, r, l) = -beta[r] * acc;
    }
  }
  __syncthreads();
  // Z_rj = sum_{j<l<=r} Tinv_rl C_lj (strictly lower, into m2's lower triangle).
  mm(T, T, [&](int r, int l) { return sv.lower(L.m1, r, l); }, [&](int l, int j) { return sv.strict_t(L.m2, l, j); },
     [&](int i0, int j0, int& k0, int& k1) { k0 = j0 + 1, k1 = min(i0 + 2, T); },
     [&](int r, int j, float v) { if (j < r) sv.m(L.m2, r, j) = v; });
  __syncthreads();
  // S -= A Z: sum over r in (j, i].
  mm(T, T, [&](int i, int r) { return sv.lower(L.m3, i, r); }, [&](int r, int j) { return sv.strict(L.m2, r, j); },
     [&](int i0, int j0, int& k0, int& k1) { k0 = j0 + 1, k1 = min(i0 + 2, T); },
     [&](int i, int j, float v) { if (j <= i) sv.m(L.m4, i, j) -= v; });
  __syncthreads();
  const double* g = sv.g();
  for (int idx = threadIdx.x; idx < T * T; idx += kThreads) {
    const int i = idx / T, j = idx % T;
    if (j <= i) sv.m(L.m4, i, j) += static_cast<float>(g[i] - g[j]);
  }
  __syncthreads();
}

template <int Dh, bool BF>
__global__ void __launch_bounds__(kThreads) path_short_fwd_kernel(const PathShortArgs a) {
  extern __shared__ __align__(16) float smem[];
  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
  const int64_t s0 = b * a.T * a.H + h, e0 = s0 * Dh, es = a.H * Dh;
  const View sv{smem, a.T, Dh + 1, path_short_layout(a.T, Dh).ldt, path_short_layout(a.T, Dh)};
  const PathShortLayout& L = sv.L;
  const int T = static_cast<int>(a.T);
  load_head<Dh, BF>(sv, a, e0, es, s0, L.fwd_floats);
  logits<Dh>(sv);
  // Softmax per row (a warp each): P = exp(S - lse) into m4 (lower), lse out.
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = warp; i < T; i += kThreads / 32) {
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32) mx = fmaxf(mx, sv.m(L.m4, i, j));
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float l = 0.f;
    for (int j = lane; j <= i; j += 32) l += expf(sv.m(L.m4, i, j) - mx);
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    const float lse = mx + logf(l);
    for (int j = lane; j <= i; j += 32) sv.m(L.m4, i, j) = expf(sv.m(L.m4, i, j) - lse);
    if (lane == 0) a.lse[bh * a.T + i] = lse;
  }
  __syncthreads();
  // out = P V (keys j <= i).
  mm(T, Dh, [&](int i, int j) { return sv.lower(L.m4, i, j); }, [&](int j, int c) { return sv.x(L.v, j, c); },
     [&](int i0, int, int& k0, int& k1) { k0 = 0, k1 = min(i0 + 2, T); },
     [&](int i, int c, float v) { store_x<BF>(a.out, e0 + i * es + c, v); });
}

template <int Dh, bool BF>
__global__ void __launch_bounds__(kThreads) path_short_bwd_kernel(const PathShortArgs a) {
  extern __shared__ __align__(16) float smem[];
  const int64_t bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
  const int64_t s0 = b * a.T * a.H + h, e0 = s0 * Dh, es = a.H * Dh;
  const View sv{smem, a.T, Dh + 1, path_short_layout(a.T, Dh).ldt, path_short_layout(a.T, Dh)};
  const PathShortLayout& L = sv.L;
  const int T = static_cast<int>(a.T);
  load_head<Dh, BF>(sv, a, e0, es, s0, L.bwd_floats);
  for (int idx = threadIdx.x; idx < T * Dh; idx += kThreads)
    sv.x(L.dout, idx / Dh, idx % Dh) = load_x<BF>(a.dout, e0 + (idx / Dh) * es + idx % Dh);
  for (int t = threadIdx.x; t < T; t += kThreads) sv.at(L.lse)[t] = a.lse_in[bh * a.T + t];
  logits<Dh>(sv);  // its first barrier orders the loads above
  const float* lse = sv.at(L.lse);
  const float* beta = sv.at(L.beta);
  for (int idx = threadIdx.x; idx < T * T; idx += kThreads) {  // P = exp(S - lse), lower
    const int i = idx / T, j = idx % T;
    if (j <= i) sv.m(L.m4, i, j) = expf(sv.m(L.m4, i, j) - lse[i]);
  }
  __syncthreads();
  auto P = [&](int i, int j) { return sv.lower(L.m4, i, j); };
  auto dO = [&](int i, int c) { return sv.x(L.dout, i, c); };
  // dv_j = sum_{i>=j} P_ij dout_i; dP_ij = dout_i . v_j (lower) into m5.
  mm(T, Dh, [&](int j, int i) { return P(i, j); }, dO, [&](int i0, int, int& k0, int& k1) { k0 = i0, k1 = T; },
     [&](int j, int c, float v) { store_x<BF>(a.dv, e0 + j * es + c, v); });
  mm(T, T, dO, [&](int c, int j) { return sv.x(L.v, j, c); },
     [](int i0, int j0, int& k0, int& k1) { k0 = 0, k1 = j0 > i0 + 1 ? 0 : Dh; },  // lower tiles only
     [&](int i, int j, float v) { if (j <= i) sv.m(L.m5, i, j) = v; });
  __syncthreads();
  // delta_i = sum_j P_ij dP_ij (= dout_i . out_i), a warp per row; then dS = P (dP - delta) into m4.
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i = warp; i < T; i += kThreads / 32) {
    float s = 0.f;
    for (int j = lane; j <= i; j += 32) s = fmaf(sv.m(L.m4, i, j), sv.m(L.m5, i, j), s);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) sv.at(L.delta)[i] = s;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < T * T; idx += kThreads) {
    const int i = idx / T, j = idx % T;
    if (j <= i) sv.m(L.m4, i, j) *= sv.m(L.m5, i, j) - sv.at(L.delta)[i];
  }
  __syncthreads();
  auto dS = [&](int i, int j) { return sv.lower(L.m4, i, j); };
  auto Z = [&](int r, int j) { return sv.strict(L.m2, r, j); };
  auto A = [&](int i, int r) { return sv.lower(L.m3, i, r); };
  auto C = [&](int l, int j) { return sv.strict_t(L.m2, l, j); };
  auto Tinv = [&](int r, int l) { return sv.lower(L.m1, r, l); };
  auto Gram = [&](int r, int p) { return sv.strict_t(L.m1, r, p); };
  auto xq = [&](int i, int c) { return sv.x(L.qs, i, c); };
  auto xk = [&](int i, int c) { return sv.x(L.k, i, c); };
  auto xw = [&](int i, int c) { return sv.x(L.w, i, c); };
  // Gate: dG_t = sum_j dS_tj - sum_i dS_it; dlog_f_s = sum_{t>=s} dG_t (s >= 1; position 0 is 0).
  if (a.log_f) {
    for (int t = threadIdx.x; t < T; t += kThreads) {
      float s = 0.f;
      for (int j = 0; j <= t; ++j) s += dS(t, j);
      for (int i = t; i < T; ++i) s -= dS(i, t);
      sv.at(L.dg)[t] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float s = 0.f;
      for (int t = T - 1; t >= 1; --t) s += sv.at(L.dg)[t], a.dlog_f[s0 + t * a.H] = s;
      a.dlog_f[s0] = 0.f;
    }
  }
  // dA = lower(-dS Z^T) into m5 (lower; dP is no longer read), dZ = strictLower(-A^T dS) into m5's
  // upper triangle (transposed): S = lower(Qs K^T) - A Z.
  mm(T, T, dS, [&](int j, int r) { return Z(r, j); },
     [&](int i0, int, int& k0, int& k1) { k0 = 0, k1 = min(i0 + 2, T); },
     [&](int i, int r, float v) { if (r <= i) sv.m(L.m5, i, r) = -v; });
  mm(T, T, [&](int r, int i) { return A(i, r); }, dS, [&](int i0, int, int& k0, int& k1) { k0 = i0, k1 = T; },
     [&](int r, int j, float v) { if (j < r) sv.m(L.m5, j, r) = -v; });
  __syncthreads();
  auto dA = [&](int i, int r) { return sv.lower(L.m5, i, r); };
  auto dZ = [&](int r, int j) { return sv.strict_t(L.m5, r, j); };
  // dq = scale (dS K + dA W), summed in the values' slot (v is no longer read); dk = dS^T Qs and
  // dw = dA^T Qs start their sums.
  auto lowk = [&](int i0, int, int& k0, int& k1) { k0 = 0, k1 = min(i0 + 2, T); };
  auto highk = [&](int i0, int, int& k0, int& k1) { k0 = i0, k1 = T; };
  mm(T, Dh, dS, xk, lowk, [&](int i, int c, float v) { sv.x(L.v, i, c) = v; });
  mm(T, Dh, [&](int j, int i) { return dS(i, j); }, xq, highk, [&](int j, int c, float v) { sv.x(L.dk, j, c) = v; });
  mm(T, Dh, [&](int r, int i) { return dA(i, r); }, xq, highk, [&](int r, int c, float v) { sv.x(L.dw, r, c) = v; });
  __syncthreads();
  mm(T, Dh, dA, xw, lowk, [&](int i, int c, float v) {
    store_x<BF>(a.dq, e0 + i * es + c, a.scale * (sv.x(L.v, i, c) + v));
  });
  __syncthreads();
  // Z = Tinv C: dTinv = lower(dZ C^T) into m3 (A is no longer read), dC = strictLower(Tinv^T dZ) into m4.
  mm(T, T, dZ, [&](int j, int l) { return C(l, j); },
     [&](int i0, int, int& k0, int& k1) { k0 = 0, k1 = min(i0 + 2, T); },
     [&](int r, int l, float v) { if (l <= r) sv.m(L.m3, r, l) = v; });
  mm(T, T, [&](int l, int r) { return Tinv(r, l); }, dZ, [&](int i0, int, int& k0, int& k1) { k0 = i0, k1 = T; },
     [&](int l, int j, float v) { if (j < l) sv.m(L.m4, l, j) = v; });
  __syncthreads();
  auto dC = [&](int l, int j) { return sv.strict(L.m4, l, j); };
  // C = W K^T: dk += dC^T W, dw += dC K.
  mm(T, Dh, [&](int j, int l) { return dC(l, j); }, xw, highk, [&](int j, int c, float v) { sv.x(L.dk, j, c) += v; });
  mm(T, Dh, dC, xk, lowk, [&](int l, int c, float v) { sv.x(L.dw, l, c) += v; });
  // R = M^-T dTinv in place (lower part only: the rest never reaches a gradient), column l from the
  // bottom: R_rl = dTinv_rl - sum_{p>r} beta_p Gram_pr R_pl.
  for (int l = threadIdx.x; l < T; l += kThreads)
    for (int r = T - 1; r >= l; --r) {
      float acc = sv.m(L.m3, r, l);
      for (int p = r + 1; p < T; ++p) acc = fmaf(-beta[p] * sv.m(L.m1, r, p), sv.m(L.m3, p, l), acc);
      sv.m(L.m3, r, l) = acc;
    }
  __syncthreads();
  // E = strictLower(-R Tinv^T) into m4 (dC is no longer read): sum over l <= p.
  mm(T, T, [&](int r, int l) { return sv.lower(L.m3, r, l); }, [&](int l, int p) { return Tinv(p, l); },
     [&](int i0, int, int& k0, int& k1) { k0 = 0, k1 = min(i0 + 2, T); },
     [&](int r, int p, float v) { if (p < r) sv.m(L.m4, r, p) = -v; });
  __syncthreads();
  // dbeta_r = R_rr + sum_{p<r} E_rp Gram_rp; dGram = D E in place (row r scaled by beta_r).
  for (int r = threadIdx.x; r < T; r += kThreads) {
    float db = sv.m(L.m3, r, r);
    for (int p = 0; p < r; ++p) {
      db = fmaf(sv.m(L.m4, r, p), Gram(r, p), db);
      sv.m(L.m4, r, p) *= beta[r];
    }
    a.dbeta[s0 + r * a.H] = db;
  }
  __syncthreads();
  // Gram = W W^T: dw += (dGram + dGram^T) W.
  mm(T, Dh, [&](int r, int p) { return sv.strict(L.m4, r, p) + sv.strict(L.m4, p, r); }, xw,
     [&](int, int, int& k0, int& k1) { k0 = 0, k1 = T; },
     [&](int r, int c, float v) {
       const int64_t o = e0 + r * es + c;
       a.dw[o] = sv.x(L.dw, r, c) + v;
       store_x<BF>(a.dk, o, sv.x(L.dk, r, c));
     });
}

template <class Kernel>
void launch(Kernel kernel, int64_t floats, const AttnDims& d, const PathShortArgs& a, cudaStream_t stream) {
  const int bytes = static_cast<int>(floats * 4);
  if (bytes > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  kernel<<<static_cast<unsigned>(d.B * d.H), kThreads, bytes, stream>>>(a);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void path_short_forward(void* out, float* lse, const void* q, const void* k, const void* v, const float* w,
                        const float* beta, const float* log_f, const AttnDims& d, float scale, bool bf16,
                        cudaStream_t stream) {
  const PathShortArgs a = path_short_forward_args(out, lse, q, k, v, w, beta, log_f, d, scale);
  const int64_t floats = path_short_layout(d.T, d.Dh).fwd_floats;
  with_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    launch(bf16 ? path_short_fwd_kernel<D, true> : path_short_fwd_kernel<D, false>, floats, d, a, stream);
  });
}

void path_short_backward(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f, const void* dout,
                         const void* q, const void* k, const void* v, const float* w, const float* beta,
                         const float* log_f, const float* lse, const AttnDims& d, float scale, bool bf16,
                         cudaStream_t stream) {
  const PathShortArgs a =
      path_short_backward_args(dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, lse, d, scale);
  const int64_t floats = path_short_layout(d.T, d.Dh).bwd_floats;
  with_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    launch(bf16 ? path_short_bwd_kernel<D, true> : path_short_bwd_kernel<D, false>, floats, d, a, stream);
  });
}

}  // namespace sb::cuda::detail
