// path_short_warp_sm80.cu: PaTH attention at T <= 32 and Dh 16 or 32 (plan.hpp path_short_warp), forward
// and backward: one warp per (b, h), lane i owning row i of q, k, v, w and of every T x T matrix, the
// other rows read from shared memory by broadcast; only __syncwarp between phases, each warp of a CTA
// its own head. The math of path_short_sm80.cu (docs/path-backward.md's own block, fp32 FMAs, the
// backward recomputing the forward from lse), with the triangular solves a lane per column.
#include "kernels/attention/internal.hpp"
#include "kernels/attention/path/path_short_args.hpp"
#include "kernels/attention/path/path_short_warp_ops.cuh"

namespace sb::cuda::detail {
namespace {

using namespace short_warp;
// Warps per CTA at most (plan.hpp path_short_warps); one CTA per SM as the launch bound's floor:
// shared memory sets the residency, and without a floor ptxas caps the registers for an occupancy
// that cannot be reached (and spills at Dh 32).
constexpr int kMaxWarps = 4;

// The tensors of path_short_args.hpp, plus the heads (B H) and the warps per CTA.
struct WarpArgs : PathShortArgs {
  int64_t BH;
  int warps;
};

// Rows t < T of a [T, Dh] head tensor (row t at e0 + t es), times mul, into an operand.
template <int Dh, bool BF>
__device__ void fill(float* x, const void* g, int64_t e0, int64_t es, int T, float mul, int lane) {
  constexpr int C4 = Dh / 4;
  for (int idx = lane; idx < T * C4; idx += 32) {
    const int t = idx / C4, c = 4 * (idx % C4);
    const float4 v = load4<BF>(g, e0 + t * es + c);
    st4(x + t * (Dh + 4) + c, make_float4(mul * v.x, mul * v.y, mul * v.z, mul * v.w));
  }
}

// Zeroes the warp's region, loads Qs = scale q, K and W, beta (0 past T) and the gate's prefix sums
// G_t = sum_{s=1..t} log f_s (double, 0 without a gate); returns G_lane.
template <int Dh, bool BF>
__device__ double load_head(float* s, int64_t floats, const WarpArgs& a, int64_t s0, int64_t e0, int T, int lane) {
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  for (int64_t i = 4 * lane; i < floats; i += 128) st4(s + i, make_float4(0.f, 0.f, 0.f, 0.f));
  __syncwarp();
  const int64_t es = a.H * Dh;
  fill<Dh, BF>(s + L.qs, a.q, e0, es, T, a.scale, lane);
  fill<Dh, BF>(s + L.k, a.k, e0, es, T, 1.f, lane);
  fill<Dh, false>(s + L.w, a.w, e0, es, T, 1.f, lane);
  s[L.beta + lane] = lane < T ? a.beta[s0 + lane * a.H] : 0.f;
  double g = a.log_f && lane >= 1 && lane < T ? static_cast<double>(a.log_f[s0 + lane * a.H]) : 0.0;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(kAll, g, o);
    if (lane >= o) g += y;
  }
  reinterpret_cast<double*>(s + L.g)[lane] = g;
  return g;
}

// Column `lane` of Tinv = (I + strictLower(D Gram))^-1 D by forward substitution (zero above the
// diagonal): x_r = beta_r ([r == lane] - sum_{p<r} Gram_rp x_p), Gram from the strictly lower part
// of `gram`.
__device__ __forceinline__ void tinv_column(float (&x)[TP], const float* gram, const float* beta, int T, int lane) {
  zero(x);
#pragma unroll
  for (int r = 0; r < TP; ++r) {
    if (r >= T) break;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int p4 = 0; p4 < (r + 3) / 4; ++p4) {
      const float4 g = ld4(gram + r * LT + 4 * p4);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (4 * p4 + u < r) acc[u] = fmaf(at4(g, u), x[4 * p4 + u], acc[u]);
    }
    x[r] = beta[r] * ((r == lane ? 1.f : 0.f) - ((acc[0] + acc[1]) + (acc[2] + acc[3])));
  }
}

// Column `lane` of R = M^-T dTinv by back substitution, x holding column `lane` of dTinv (zero above
// the diagonal) on entry: x_r -= sum_{p>r} beta_p Gram_pr x_p. Rows >= T of gram and x are 0.
__device__ __forceinline__ void r_column(float (&x)[TP], const float* gram, const float* beta, int T) {
  float bx[TP];
#pragma unroll
  for (int r = TP - 1; r >= 0; --r) {
    if (r < T) {
      float acc[2] = {0.f, 0.f};
#pragma unroll
      for (int p = r + 1; p < TP; ++p) acc[p & 1] = fmaf(gram[p * LT + r], bx[p], acc[p & 1]);
      x[r] -= acc[0] + acc[1];
      bx[r] = beta[r] * x[r];
    } else {
      bx[r] = 0.f;
    }
  }
}

// The forward's own-block part, shared by both directions: Gram (s1, strictly lower), A =
// lower(Qs W^T) (s3, lower), Tinv (s2, stored transposed: row l = column l of Tinv), C (s1's
// strictly upper part, transposed: row j = column j of C), Z = Tinv C (s2's strictly lower part),
// and this lane's row of the logits S = lower(Qs K^T) - A Z + G_i - G_j (columns > lane: undefined).
template <int Dh>
__device__ void own_block(float (&S)[TP], float* s, const WarpArgs& a, double g_lane, int T, int lane) {
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  const int nc = (T + 3) >> 2;
  float* s1 = s + L.s1;
  float* s2 = s + L.s2;
  float* s3 = s + L.s3;
  const float* const own_rows[2] = {s + L.w, s + L.qs};
  float v[2][TP];
  dot_rows<Dh, 2>(v, own_rows, s + L.w, nc, lane);  // Gram_lane,p = w_lane . w_p; A_lane,r = qs_lane . w_r
  store_row<Tri::StrictLower>(s1, v[0], nc, T, lane);
  store_row<Tri::Lower>(s3, v[1], nc, T, lane);
  __syncwarp();
  tinv_column(v[0], s1, s + L.beta, T, lane);
  store_row<Tri::Full>(s2, v[0], nc, T, lane);
  __syncwarp();
  dot_rows<Dh, 2>(v, own_rows, s + L.k, nc, lane);  // C_lane,j = w_lane . k_j (j < lane); Qs K^T
  store_col<Tri::StrictUpper>(s1, v[0], nc, T, lane);
#pragma unroll
  for (int j = 0; j < TP; ++j) S[j] = v[1][j];
  __syncwarp();
  // Z_r,lane = sum_{lane<l<=r} Tinv_rl C_l,lane: the row of Tinv^T at l broadcast.
  float z[TP] = {};
  axpy<TP, Tri::Upper>(z, [&](int k4) { return own4<Tri::StrictUpper>(s1, k4, lane); }, s2, LT, T, nc);
  __syncwarp();
  store_col<Tri::StrictLower>(s2, z, nc, T, lane);
  __syncwarp();
  // S -= A Z (r in (j, lane]).
  axpy<TP, Tri::StrictLower>(S, [&](int k4) { return own4<Tri::Lower, true>(s3, k4, lane); }, s2, LT, T, nc);
  if (a.log_f) {
    const double* G = reinterpret_cast<const double*>(s + L.g);
#pragma unroll
    for (int j = 0; j < TP; ++j)
      if (j <= lane) S[j] += static_cast<float>(g_lane - G[j]);
  }
}

template <int Dh, bool BF>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) path_short_warp_fwd_kernel(const WarpArgs a) {
  extern __shared__ __align__(16) float smem[];
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t bh = static_cast<int64_t>(blockIdx.x) * a.warps + warp;
  if (bh >= a.BH) return;  // whole warps only
  float* s = smem + warp * L.fwd_floats;
  const int T = static_cast<int>(a.T), nc = (T + 3) >> 2;
  const int64_t s0 = (bh / a.H) * a.T * a.H + bh % a.H, e0 = s0 * Dh, es = a.H * Dh;
  const double g = load_head<Dh, BF>(s, L.fwd_floats, a, s0, e0, T, lane);
  __syncwarp();
  float S[TP];
  own_block<Dh>(S, s, a, g, T, lane);
  // Softmax of this lane's row: P = exp(S - lse) (0 past the diagonal and for rows >= T), lse out.
  float mx = -INFINITY, l = 0.f;
#pragma unroll
  for (int j = 0; j < TP; ++j)
    if (j <= lane) mx = fmaxf(mx, S[j]);
#pragma unroll
  for (int j = 0; j < TP; ++j)
    if (j <= lane) l += expf(S[j] - mx);
  const float lse = mx + logf(l);
#pragma unroll
  for (int j = 0; j < TP; ++j) S[j] = j <= lane && lane < T ? expf(S[j] - lse) : 0.f;
  if (lane < T) a.lse[bh * a.T + lane] = lse;
  __syncwarp();  // s1..s3 are no longer read: P into s3, v over s1..s2
  store_row<Tri::Lower>(s + L.s3, S, nc, T, lane);
  fill<Dh, BF>(s + L.fwd_v, a.v, e0, es, T, 1.f, lane);
  __syncwarp();
  float o[Dh];  // out = P V
  zero(o);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::Full>(s + L.s3, k4, lane); }, s + L.fwd_v, Dh + 4, T, Dh / 4);
  if (lane < T) store_grow<Dh, BF>(a.out, e0 + lane * es, o, 1.f);
}

// The backward: phases in order, each lane a row (or, where noted, a column) of each result; the
// slots' contents as in own_block, then s4 = P^T, then dS (both triangles: row j = dS row j on and
// below the diagonal, dS column j above), s5 = dA likewise, s2's strictly lower part dZ, then R,
// s3's upper part dTinv^T, its strictly lower part dC, s1's strictly upper part dC^T, and finally
// s2 = E in both triangles.
template <int Dh, bool BF>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) path_short_warp_bwd_kernel(const WarpArgs a) {
  extern __shared__ __align__(16) float smem[];
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  constexpr int LX = Dh + 4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t bh = static_cast<int64_t>(blockIdx.x) * a.warps + warp;
  if (bh >= a.BH) return;
  float* s = smem + warp * L.bwd_floats;
  float *s1 = s + L.s1, *s2 = s + L.s2, *s3 = s + L.s3, *s4 = s + L.s4, *s5 = s + L.s5;
  const float* beta = s + L.beta;
  const int T = static_cast<int>(a.T), nc = (T + 3) >> 2;
  const int64_t s0 = (bh / a.H) * a.T * a.H + bh % a.H, e0 = s0 * Dh, es = a.H * Dh, row = e0 + lane * es;
  const double g = load_head<Dh, BF>(s, L.bwd_floats, a, s0, e0, T, lane);
  fill<Dh, BF>(s + L.v, a.v, e0, es, T, 1.f, lane);
  fill<Dh, BF>(s + L.dout, a.dout, e0, es, T, 1.f, lane);
  const float lse = lane < T ? a.lse_in[bh * a.T + lane] : 0.f;
  __syncwarp();
  float P[TP];
  own_block<Dh>(P, s, a, g, T, lane);
#pragma unroll
  for (int j = 0; j < TP; ++j) P[j] = j <= lane && lane < T ? expf(P[j] - lse) : 0.f;
  // dP_lane,j = dout_lane . v_j; delta = sum_j P dP; dS = P (dP - delta), kept in dS.
  float dP[1][TP];
  const float* const dout_row[1] = {s + L.dout};
  dot_rows<Dh, 1>(dP, dout_row, s + L.v, nc, lane);
  float(&dS)[TP] = dP[0];
  float delta = 0.f;
#pragma unroll
  for (int j = 0; j < TP; ++j) delta = fmaf(P[j], dS[j], delta);
  float rowsum = 0.f;
#pragma unroll
  for (int j = 0; j < TP; ++j) dS[j] = P[j] * (dS[j] - delta), rowsum += dS[j];
  __syncwarp();  // v is no longer read: P^T into s4
  store_col<Tri::Full>(s4, P, nc, T, lane);
  __syncwarp();
  float o[Dh];  // dv_lane = sum_i P_i,lane dout_i
  zero(o);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::Full>(s4, k4, lane); }, s + L.dout, LX, T, Dh / 4);
  if (lane < T) store_grow<Dh, BF>(a.dv, row, o, 1.f);
  __syncwarp();  // dout and P^T are no longer read: dS into s4
  store_row<Tri::Lower>(s4, dS, nc, T, lane);
  __syncwarp();
  store_col<Tri::StrictUpper>(s4, dS, nc, T, lane);
  __syncwarp();
  // Gate: dG_t = sum_j dS_tj - sum_i dS_it; dlog_f_s = sum_{t>=s} dG_t (s >= 1; position 0 gets 0).
  if (a.log_f) {
    float colsum = 0.f;
    for (int k4 = 0; k4 < nc; ++k4) {
      const float4 c = own4<Tri::Upper>(s4, k4, lane);
      colsum += ((c.x + c.y) + (c.z + c.w));
    }
    float x = lane < T ? rowsum - colsum : 0.f;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const float y = __shfl_down_sync(kAll, x, d);
      if (lane + d < 32) x += y;
    }
    if (lane < T) a.dlog_f[s0 + lane * a.H] = lane == 0 ? 0.f : x;
  }
  // S = lower(Qs K^T) - A Z. dA = lower(-dS Z^T), a column per lane: dA_i,lane = -sum_j Z_lane,j dS_ij.
  float t[TP] = {};
  axpy<TP, Tri::Upper>(t, [&](int k4) { return own4<Tri::StrictLower, true>(s2, k4, lane); }, s4, LT, T, nc);
  store_row<Tri::Upper>(s5, t, nc, T, lane);
  __syncwarp();
  store_col<Tri::StrictLower>(s5, t, nc, T, lane);
  // dZ = strictLower(-A^T dS), a column per lane: dZ_r,lane = -sum_i dS_i,lane A_ir; into s2 below Tinv^T.
  zero(t);
  axpy<TP, Tri::Lower>(t, [&](int k4) { return own4<Tri::Upper, true>(s4, k4, lane); }, s3, LT, T, nc);
  __syncwarp();
  store_col<Tri::StrictLower>(s2, t, nc, T, lane);
  __syncwarp();
  // dq = scale (dS K + dA W).
  zero(o);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::Lower>(s4, k4, lane); }, s + L.k, LX, T, Dh / 4);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::Lower>(s5, k4, lane); }, s + L.w, LX, T, Dh / 4);
  if (lane < T) store_grow<Dh, BF>(a.dq, row, o, a.scale);
  // Z = Tinv C: dTinv = lower(dZ C^T) (rows), into s3's upper part transposed (A is no longer read).
  zero(t);
  axpy<TP, Tri::StrictUpper>(t, [&](int k4) { return own4<Tri::StrictLower>(s2, k4, lane); }, s1, LT, T, nc);
  store_col<Tri::Upper>(s3, t, nc, T, lane);
  __syncwarp();
  // dC = strictLower(Tinv^T dZ) (rows): into s3's strictly lower part and transposed into s1's
  // strictly upper part (C is no longer read).
  zero(t);
  axpy<TP, Tri::StrictLower>(t, [&](int k4) { return own4<Tri::Upper>(s2, k4, lane); }, s2, LT, T, nc);
  store_row<Tri::StrictLower, true>(s3, t, nc, T, lane);
  store_col<Tri::StrictUpper>(s1, t, nc, T, lane);
  __syncwarp();
  // dk = dS^T Qs + dC^T W.
  zero(o);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::Upper>(s4, k4, lane); }, s + L.qs, LX, T, Dh / 4);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::StrictUpper>(s1, k4, lane); }, s + L.w, LX, T, Dh / 4);
  if (lane < T) store_grow<Dh, BF>(a.dk, row, o, 1.f);
  // R = M^-T dTinv, a column per lane (only its strictly lower part and diagonal are used), the
  // strictly lower part into s2 below Tinv^T (dZ is no longer read).
  float x[TP];
#pragma unroll
  for (int n4 = 0; n4 < TP / 4; ++n4) {
    const float4 c = n4 < nc ? own4<Tri::Upper>(s3, n4, lane) : make_float4(0.f, 0.f, 0.f, 0.f);
    x[4 * n4] = c.x, x[4 * n4 + 1] = c.y, x[4 * n4 + 2] = c.z, x[4 * n4 + 3] = c.w;
  }
  r_column(x, s1, beta, T);
  float rr = 0.f;  // R_lane,lane
#pragma unroll
  for (int r = 0; r < TP; ++r) select_if_eq(rr, x[r], r, lane);
  store_col<Tri::StrictLower>(s2, x, nc, T, lane);
  __syncwarp();
  // E = strictLower(-R Tinv^T) (rows); dbeta_r = R_rr + sum_{p<r} E_rp Gram_rp.
  zero(t);
  axpy<TP, Tri::Upper>(t, [&](int k4) { return own4<Tri::StrictLower, true>(s2, k4, lane); }, s2, LT, T, nc);
  float db = rr;
#pragma unroll
  for (int n4 = 0; n4 < TP / 4; ++n4) {
    if (n4 >= nc) break;
    const float4 gr = ld4(s1 + lane * LT + 4 * n4);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (4 * n4 + u < lane) db = fmaf(t[4 * n4 + u], at4(gr, u), db);
  }
  if (lane < T) a.dbeta[s0 + lane * a.H] = db;
  __syncwarp();  // Tinv^T and R are no longer read: E into s2, both triangles
  store_row<Tri::StrictLower>(s2, t, nc, T, lane);
  __syncwarp();
  store_col<Tri::StrictUpper>(s2, t, nc, T, lane);
  __syncwarp();
  // dw = dA^T Qs + dC K + (dGram + dGram^T) W, dGram = D E: row lane of the last factor is
  // beta_lane E_lane,p (p < lane) + beta_p E_p,lane (p > lane).
  zero(o);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::Upper>(s5, k4, lane); }, s + L.qs, LX, T, Dh / 4);
  axpy<Dh, Tri::Full>(o, [&](int k4) { return own4<Tri::StrictLower>(s3, k4, lane); }, s + L.k, LX, T, Dh / 4);
  const float beta_lane = beta[lane];
  axpy<Dh, Tri::Full>(
      o,
      [&](int k4) {
        const float4 e = ld4(s2 + lane * LT + 4 * k4), b = ld4(beta + 4 * k4);
        const int p = 4 * k4;
        return make_float4(e.x * (p < lane ? beta_lane : b.x), e.y * (p + 1 < lane ? beta_lane : b.y),
                           e.z * (p + 2 < lane ? beta_lane : b.z), e.w * (p + 3 < lane ? beta_lane : b.w));
      },
      s + L.w, LX, T, Dh / 4);
  if (lane < T) store_grow<Dh, false>(a.dw, row, o, 1.f);
}

WarpArgs warp_args(const PathShortArgs& base, const AttnDims& d) {
  if (d.T > kShortWarpT) throw_error("path_short_warp: T must be at most 32 (plan.hpp path_short_warp)");
  WarpArgs a{base};
  a.BH = d.B * d.H;
  return a;
}

template <class Kernel>
void launch(Kernel kernel, int64_t floats, const AttnDims& d, WarpArgs a, const DeviceLimits& dev,
            cudaStream_t stream) {
  a.warps = path_short_warps(floats, dev);
  const int bytes = static_cast<int>(a.warps * floats * 4);
  if (bytes > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  const int64_t blocks = (d.B * d.H + a.warps - 1) / a.warps;
  kernel<<<static_cast<unsigned>(blocks), 32 * a.warps, bytes, stream>>>(a);
  SB_CUDA_CHECK_LAUNCH();
}

template <class F>
void with_warp_dh(int64_t Dh, F&& f) {
  switch (Dh) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    default: throw_error("path_short_warp: head dim must be 16 or 32 (plan.hpp path_short_warp)");
  }
}

}  // namespace

void path_short_warp_forward(void* out, float* lse, const void* q, const void* k, const void* v, const float* w,
                             const float* beta, const float* log_f, const AttnDims& d, float scale, bool bf16,
                             const DeviceLimits& dev, cudaStream_t stream) {
  const WarpArgs a = warp_args(path_short_forward_args(out, lse, q, k, v, w, beta, log_f, d, scale), d);
  with_warp_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int64_t floats = path_short_warp_layout(D).fwd_floats;
    launch(bf16 ? path_short_warp_fwd_kernel<D, true> : path_short_warp_fwd_kernel<D, false>, floats, d, a, dev,
           stream);
  });
}

void path_short_warp_backward(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f,
                              const void* dout, const void* q, const void* k, const void* v, const float* w,
                              const float* beta, const float* log_f, const float* lse, const AttnDims& d,
                              float scale, bool bf16, const DeviceLimits& dev, cudaStream_t stream) {
  const WarpArgs a = warp_args(
      path_short_backward_args(dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, lse, d, scale), d);
  with_warp_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int64_t floats = path_short_warp_layout(D).bwd_floats;
    launch(bf16 ? path_short_warp_bwd_kernel<D, true> : path_short_warp_bwd_kernel<D, false>, floats, d, a, dev,
           stream);
  });
}

}  // namespace sb::cuda::detail
