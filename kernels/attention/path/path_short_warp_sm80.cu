// path_short_warp_sm80.cu: PaTH attention at T <= 32 and Dh 16, 32 or 64 (plan.hpp path_short_warp), forward
// and backward: a CTA of two warps per (b, h), each warp one 16-row half of every result. The math
// of path_short_sm80.cu (docs/path-backward.md's own block, the backward recomputing the forward from
// lse): every product on tensor cores (tf32 mma.sync over fp32 operands in shared memory), the
// softmax and its backward in fragments, Tinv's two diagonal 16 x 16 blocks solved a lane per column
// (one block a warp) and its off-diagonal block by two products; the backward's R = M^-T dTinv as
// the product D^-1 Tinv^T dTinv. Given the caller's factors buffer, the forward keeps each head's Tinv^T
// and Z (one 32 x 32 slot) there and the backward starts from them instead of solving again.
#include "kernels/attention/internal.hpp"
#include "kernels/attention/path/path_short_args.hpp"
#include "kernels/attention/common/short_warp_ops.cuh"

namespace sb::cuda::detail {
namespace {

using namespace short_warp;

// CTAs resident per SM for a region of `floats` (228 KiB of shared memory, 1 KiB reserved a CTA: an
// H100's), the launch bound's floor, so that ptxas keeps the registers within that residency.
constexpr int resident(int64_t floats) { return static_cast<int>((228 * 1024) / (floats * 4 + 1024)); }

// The tensors of path_short_args.hpp, plus the heads (B H).
struct WarpArgs : PathShortArgs {
  int64_t BH;
  int64_t is, gs;  // from one (b, t) row to the next: of q, k, v (AttnDims::qkv_ld), of dq, dk, dv (grad_ld)
  float* kept;     // [BH, 32, 32]: each head's slot s2 (Tinv^T | Z), written by the forward and read by the
                   // backward, or nullptr (the backward solves for them)
};

// Slot s2 (rows and columns 0..31) to or from the head's place in WarpArgs::kept, a float4 a thread.
constexpr int64_t kKeptFloats = kShortWarpT * kShortWarpT;
__device__ __forceinline__ void keep_slot(float* g, const float* slot, int tid) {
  for (int i = tid; i < TP * TP / 4; i += kThreads) st4(g + 4 * i, ld4(slot + (i >> 3) * LT + 4 * (i & 7)));
}
__device__ __forceinline__ void restore_slot(float* slot, const float* g, int tid) {
  for (int i = tid; i < TP * TP / 4; i += kThreads) st4(slot + (i >> 3) * LT + 4 * (i & 7), ld4(g + 4 * i));
}

// Zeroes the head's region and stores q (unscaled: bf16 inputs stay exact in one tf32 pass), K and W,
// beta (0 past T) and the gate's prefix sums G_t = sum_{s=1..t} log f_s (double, 0 without a gate),
// their loads in flight before the zeroing (W's after it where the three would hold more than 32
// registers a thread), as are any that the caller issued before this call (kEarly).
template <int Dh, bool BF>
__device__ void load_head(float* s, int64_t floats, const WarpArgs& a, int64_t s0, int64_t i0, int64_t e0, int T,
                          int tid) {
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  constexpr bool kOneRound = 2 * HeadRows<Dh, BF>::kRegisters + HeadRows<Dh, false>::kRegisters <= 32;
  const int64_t es = a.H * Dh;
  HeadRows<Dh, BF> q, k;
  HeadRows<Dh, false> w;
  q.load(a.q, i0, a.is, T, tid);
  k.load(a.k, i0, a.is, T, tid);
  if constexpr (kOneRound) w.load(a.w, e0, es, T, tid);
  const float beta = tid < T ? a.beta[s0 + tid * a.H] : 0.f;  // T <= 32: lanes of warp 0
  for (int64_t i = 4 * tid; i < floats; i += 4 * kThreads) st4(s + i, make_float4(0.f, 0.f, 0.f, 0.f));
  __syncthreads();
  q.store(s + L.qs, T, tid);
  k.store(s + L.k, T, tid);
  if constexpr (!kOneRound) w.load(a.w, e0, es, T, tid);
  w.template store<BF>(s + L.w, T, tid);  // rounded once for the one-pass products
  if (tid < 32) s[L.beta + tid] = beta;
  gate_prefix(reinterpret_cast<double*>(s + L.g), a.log_f, s0, a.H, T, tid);
}

// Views of the slots that the one-pass (bf16) kernels store rounded to tf32 (store_frag's ROUND = BF,
// the solve's writes): all but Gram (s1's strictly lower part) and dS (s4), which scalar code reads
// in fp32. The products read them without a conversion, the same bits as rounding each read.
template <Tri S, bool TR = false, bool NEG = false>
using SlotView = View<S, TR, NEG, Read::masked, true>;
template <Tri S, bool TR = false, bool NEG = false>
using SlotZeroed = View<S, TR, NEG, Read::zeroed, true>;

// Whether a kernel loads its late operands (v; the backward's v and dout) before load_head, holding
// them in registers (at most 8 a tensor), or after it.
template <int Dh, bool BF>
constexpr bool kEarly = HeadRows<Dh, BF>::kRegisters <= 8;

// Tinv = M^-1 D, M = I + strictLower(D Gram), in blocks of 16 rows and columns: the diagonal blocks
// Tinv_bb = M_bb^-1 D_b by forward substitution, block b on warp b at once, lane c (< 16) column
// 16 b + c: x_r = beta_{16b+r} ([r == c] - sum_{p<r} Gram_{16b+r, 16b+p} x_p); its row 16 b + c of s2
// (Tinv^T) gets x at columns 16 b .. 16 b + 15 and zeros elsewhere (and at rows or columns >= T).
template <bool ROUND>
__device__ __forceinline__ void tinv_diagonal_block(float* s2, const float* gram, const float* beta, int T, int b,
                                                    int lane) {
  float x[16];
  zero(x);
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int row = 16 * b + r;
    if (row >= T) break;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int p4 = 0; p4 < (r + 3) / 4; ++p4) {
      const float4 g = ld4(gram + row * LT + 16 * b + 4 * p4);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (4 * p4 + u < r) acc[u] = fmaf(at4(g, u), x[4 * p4 + u], acc[u]);
    }
    x[r] = beta[row] * ((r == lane ? 1.f : 0.f) - ((acc[0] + acc[1]) + (acc[2] + acc[3])));
  }
  const int c = 16 * b + lane;
  float* out = s2 + c * LT;
  if constexpr (ROUND)
#pragma unroll
    for (int r = 0; r < 16; ++r) x[r] = round_tf32(x[r]);
  const float4 z4 = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    st4(out + 16 * b + 4 * k, c < T ? make_float4(x[4 * k], x[4 * k + 1], x[4 * k + 2], x[4 * k + 3]) : z4);
    st4(out + 16 * (1 - b) + 4 * k, z4);
  }
}

// Entries (i, j), i >= 16 > j, of m-tile 1 of a [32, 32] result into a slot at (j, i) (ROUND: rounded
// to tf32).
template <bool ROUND>
__device__ __forceinline__ void store_lower_left_transposed(float* slot, const Frag<TP>& f, int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const float v = f.v[nt][2 * h + u];
        slot[frag_col(nt, u, lane) * LT + frag_row(1, 2 * h, lane)] = ROUND ? round_tf32(v) : v;
      }
}

// Tinv's lower-left block (rows 16..31, columns 0..15), by warp 1 once both diagonal blocks are in
// s2: Tinv_21 = -M_22^-1 M_21 M_11^-1 D_1 = -Tinv_22 Gram_21 Tinv_11 (M_21 = D_2 Gram_21), through
// Y = Gram_21 Tinv_11 in s1's upper part (transposed; free until C^T goes there), into s2 (transposed).
template <int NP>
__device__ __forceinline__ void tinv_lower_left_block(float* s1, float* s2, int T, int lane) {
  Frag<TP> f;
  zero(f);
  mma_acc<NP>(f, View<Tri::StrictLower>{s1, LT}, SlotView<Tri::Full, true>{s2, LT}, 16, lane, 1);
  store_lower_left_transposed<NP == 1>(s1, f, lane);
  __syncwarp();
  zero(f);
  mma_acc<NP>(f, SlotView<Tri::Full, true, true>{s2, LT}, SlotView<Tri::StrictUpper, true>{s1, LT}, T, lane, 1);
  store_lower_left_transposed<NP == 1>(s2, f, lane);
}

// The forward's own-block part, shared by both directions: Gram (s1, strictly lower), A =
// lower(Q W^T) (s3, lower; q unscaled here and below), Tinv (s2, stored transposed: row l = column
// l of Tinv), C (s1's strictly upper part, transposed: row j = column j of C), Z = Tinv C (s2's
// strictly lower part), and m-tile mt of the logits S = scale lower(Q K^T - A Z) + G_i - G_j in
// fragments (entries above the diagonal: undefined). KEPT: s2 already holds Tinv^T and Z (the
// forward's, restore_slot), the same values bit for bit.
template <int Dh, bool BF, bool KEPT = false>
__device__ void own_block(Frag<TP>& S, float* s, int T, int lane, int mt, float scale, bool gate) {
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  constexpr int LX = Dh + 4, NP = kPasses<BF>;
  float* s1 = s + L.s1;
  float* s2 = s + L.s2;
  float* s3 = s + L.s3;
  const Rows qs{s + L.qs, LX}, w{s + L.w, LX};
  const RowsT wT{s + L.w, LX}, kT{s + L.k, LX};
  Frag<TP> f;
  zero(f);
  mma_acc<NP>(f, w, wT, Dh, lane, mt);  // Gram = W W^T
  store_frag<Tri::StrictLower>(s1, f, T, lane, mt);
  zero(f);
  mma_acc<NP>(f, qs, wT, Dh, lane, mt);  // A = Q W^T
  store_frag<Tri::Lower, false, false, BF>(s3, f, T, lane, mt);
  __syncthreads();
  if constexpr (!KEPT) {
    if (lane < 16) tinv_diagonal_block<BF>(s2, s1, s + L.beta, T, mt, lane);
    __syncthreads();
    if (mt == 1 && T > 16) tinv_lower_left_block<NP>(s1, s2, T, lane);
    __syncthreads();
  }
  zero(f);
  mma_acc<NP>(f, w, kT, Dh, lane, mt);  // C = W K^T, its strictly lower part into s1 transposed
  store_frag<Tri::StrictUpper, true, true, BF>(s1, f, T, lane, mt);
  __syncthreads();
  if constexpr (!KEPT) {
    // Z_rl = sum_m Tinv_rm C_ml: Tinv_rm = s2(m, r), C_ml = s1(l, m).
    zero(f);
    mma_acc<NP>(f, SlotZeroed<Tri::Upper, true>{s2, LT}, SlotView<Tri::StrictUpper, true>{s1, LT}, T, lane, mt);
    __syncthreads();
    store_frag<Tri::StrictLower, false, true, BF>(s2, f, T, lane, mt);
    __syncthreads();
  }
  zero(S);
  mma_acc<NP>(S, qs, kT, Dh, lane, mt);
  mma_acc<NP>(S, SlotZeroed<Tri::Lower, false, true>{s3, LT}, SlotView<Tri::StrictLower>{s2, LT}, T, lane, mt);
  scale_frag(S, scale);
  if (gate) add_gate_bias(S, reinterpret_cast<const double*>(s + L.g), lane, mt);
}

template <int Dh, bool BF>
__global__ void __launch_bounds__(kThreads, resident(path_short_warp_layout(Dh).fwd_floats))
    path_short_warp_fwd_kernel(const WarpArgs a) {
  extern __shared__ __align__(16) float s[];
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  const int tid = threadIdx.x, lane = tid & 31, mt = tid >> 5;
  const int64_t bh = blockIdx.x;
  const int T = static_cast<int>(a.T);
  const auto [s0, e0, es] = head_at(bh, a.T, a.H, Dh);
  const int64_t i0 = head_row0(bh, a.T, a.H, Dh, a.is);  // q, k, v: rows i0 + t is
  HeadRows<Dh, BF> v;  // held until the softmax has freed its slots
  if constexpr (kEarly<Dh, BF>) v.load(a.v, i0, a.is, T, tid);
  load_head<Dh, BF>(s, L.fwd_floats, a, s0, i0, e0, T, tid);
  __syncthreads();
  Frag<TP> S;
  own_block<Dh, BF>(S, s, T, lane, mt, a.scale, a.log_f != nullptr);
  if (a.kept) keep_slot(a.kept + bh * kKeptFloats, s + L.s2, tid);  // s2 is complete since own_block's last barrier
  softmax_rows(S, a.lse + bh * a.T, T, lane, mt);
  __syncthreads();  // s1..s3 are no longer read: P into s3, v over s1..s2
  store_frag<Tri::Lower, false, false, BF>(s + L.s3, S, T, lane, mt);
  if constexpr (!kEarly<Dh, BF>) v.load(a.v, i0, a.is, T, tid);
  v.store(s + L.fwd_v, T, tid);
  __syncthreads();
  Frag<Dh> o;  // out = P V
  zero(o);
  mma_acc<kPasses<BF>>(o, SlotZeroed<Tri::Lower>{s + L.s3, LT}, Rows{s + L.fwd_v, Dh + 4}, T, lane, mt);
  store_frag_global<BF>(a.out, e0, es, o, T, lane, mt);
}

// The backward: phases in order, the slots' contents as in own_block, then s4 = P, then dS (lower;
// scaled: the gradient of Q K^T - A Z), s5 = dA (lower, over dout once it is dead), s2's strictly
// lower part dZ, then R' = D R, then D E; s3's upper part dTinv^T, its strictly lower part dC.
// dbeta's row sums and R's diagonal go through the prefix sums' region (dead after own_block).
template <int Dh, bool BF>
__global__ void __launch_bounds__(kThreads, resident(path_short_warp_layout(Dh).bwd_floats))
    path_short_warp_bwd_kernel(const WarpArgs a) {
  extern __shared__ __align__(16) float s[];
  constexpr PathShortWarpLayout L = path_short_warp_layout(Dh);
  constexpr int LX = Dh + 4, NP = kPasses<BF>;
  const int tid = threadIdx.x, lane = tid & 31, mt = tid >> 5;
  const int64_t bh = blockIdx.x;
  float *s1 = s + L.s1, *s2 = s + L.s2, *s3 = s + L.s3, *s4 = s + L.s4, *s5 = s + L.s5, *scr = s + L.g;
  const float* beta = s + L.beta;
  const Rows qs{s + L.qs, LX}, k{s + L.k, LX}, w{s + L.w, LX}, dout{s + L.dout, LX};
  const int T = static_cast<int>(a.T);
  const auto [s0, e0, es] = head_at(bh, a.T, a.H, Dh);
  const int64_t i0 = head_row0(bh, a.T, a.H, Dh, a.is);  // q, k, v: rows i0 + t is
  const int64_t g0 = head_row0(bh, a.T, a.H, Dh, a.gs);  // dq, dk, dv: rows g0 + t gs
  HeadRows<Dh, BF> v, d;
  if constexpr (kEarly<Dh, BF>) v.load(a.v, i0, a.is, T, tid), d.load(a.dout, e0, es, T, tid);
  load_head<Dh, BF>(s, L.bwd_floats, a, s0, i0, e0, T, tid);
  if constexpr (!kEarly<Dh, BF>) v.load(a.v, i0, a.is, T, tid), d.load(a.dout, e0, es, T, tid);
  v.store(s + L.v, T, tid);
  d.store(s + L.dout, T, tid);
  if (a.kept) restore_slot(s + L.s2, a.kept + bh * kKeptFloats, tid);
  float lse[2];
  rows_lse(lse, a.lse_in + bh * a.T, T, lane, mt);
  __syncthreads();
  Frag<TP> P;
  if (a.kept) own_block<Dh, BF, true>(P, s, T, lane, mt, a.scale, a.log_f != nullptr);
  else own_block<Dh, BF>(P, s, T, lane, mt, a.scale, a.log_f != nullptr);
  // P = exp(S - lse); dP = dout V^T; delta_i = sum_j P_ij dP_ij; dS = P (dP - delta) scale, in dS.
  Frag<TP> dS;
  zero(dS);
  mma_acc<NP>(dS, dout, RowsT{s + L.v, LX}, Dh, lane, mt);
  softmax_rows_backward(P, dS, lse, a.scale, T, lane, mt);
  __syncthreads();  // v and the prefix sums are no longer read: P into s4
  store_frag<Tri::Lower, false, false, BF>(s4, P, T, lane, mt);
  __syncthreads();
  Frag<Dh> o;  // dv = P^T dout
  zero(o);
  mma_acc<NP>(o, SlotZeroed<Tri::Lower, true>{s4, LT}, dout, T, lane, mt);
  store_frag_global<BF>(a.dv, g0, a.gs, o, T, lane, mt);
  __syncthreads();  // dout and P are no longer read: dS into s4
  store_frag<Tri::Lower>(s4, dS, T, lane, mt);
  __syncthreads();
  if (a.log_f && mt == 0) gate_grad(a.dlog_f, s4, s0, a.H, a.scale, T, lane);
  // dA = lower(-dS Z^T) into s5: dA_ir = -sum_j dS_ij Z_rj.
  Frag<TP> f;
  zero(f);
  mma_acc<NP>(f, Zeroed<Tri::Lower, false, true>{s4, LT}, SlotView<Tri::StrictLower, true>{s2, LT}, T, lane, mt);
  store_frag<Tri::Lower, false, false, BF>(s5, f, T, lane, mt);
  // dZ = strictLower(-A^T dS) into s2 below Tinv^T: dZ_rl = -sum_i A_ir dS_il.
  zero(f);
  mma_acc<NP>(f, SlotZeroed<Tri::Lower, true, true>{s3, LT}, Zeroed<Tri::Lower>{s4, LT}, T, lane, mt);
  __syncthreads();
  store_frag<Tri::StrictLower, false, true, BF>(s2, f, T, lane, mt);
  __syncthreads();
  // dq = dS K + dA W.
  zero(o);
  mma_acc<NP>(o, Zeroed<Tri::Lower>{s4, LT}, k, T, lane, mt);
  mma_acc<NP>(o, SlotZeroed<Tri::Lower>{s5, LT}, w, T, lane, mt);
  store_frag_global<BF>(a.dq, g0, a.gs, o, T, lane, mt);
  // Z = Tinv C: dTinv = lower(dZ C^T) (C_ml = s1(l, m)), dC = strictLower(Tinv^T dZ) (Tinv_rm = s2(m, r)).
  zero(f);
  mma_acc<NP>(f, SlotView<Tri::StrictLower>{s2, LT}, SlotView<Tri::StrictUpper>{s1, LT}, T, lane, mt);
  Frag<TP> f2;
  zero(f2);
  mma_acc<NP>(f2, SlotView<Tri::Upper>{s2, LT}, SlotView<Tri::StrictLower>{s2, LT}, T, lane, mt);
  // A is no longer read: dTinv^T into s3's upper part, dC into its strictly lower part.
  store_frag<Tri::Upper, true, true, BF>(s3, f, T, lane, mt);
  store_frag<Tri::StrictLower, false, true, BF>(s3, f2, T, lane, mt);
  __syncthreads();
  // dk = dS^T Q + dC^T W.
  zero(o);
  mma_acc<NP>(o, Zeroed<Tri::Lower, true>{s4, LT}, qs, T, lane, mt);
  mma_acc<NP>(o, SlotView<Tri::StrictLower, true>{s3, LT}, w, T, lane, mt);
  store_frag_global<BF>(a.dk, g0, a.gs, o, T, lane, mt);
  // R = M^-T dTinv is D^-1 Tinv^T dTinv (Tinv = M^-1 D), so R' = D R = Tinv^T dTinv is one product
  // (Tinv_qr = s2(r, q), dTinv_qc = s3(c, q)) instead of a back substitution. Only R's strictly
  // lower part and diagonal are used: R' strictly lower into s2 below Tinv^T (dZ is no longer read),
  // its diagonal into scr[32 ..].
  zero(f);
  mma_acc<NP>(f, SlotView<Tri::Upper>{s2, LT}, SlotView<Tri::Upper, true>{s3, LT}, T, lane, mt);
  __syncthreads();  // Tinv^T and dTinv^T are read
  store_frag<Tri::StrictLower, false, true, BF>(s2, f, T, lane, mt);
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u)
        if (frag_col(nt, u, lane) == frag_row(mt, 2 * h, lane))
          scr[32 + frag_row(mt, 2 * h, lane)] = f.v[nt][2 * h + u];
  __syncthreads();
  // D E = strictLower(-R' Tinv^T) (Tinv_pm = s2(m, p)), E = strictLower(-R Tinv^T); dbeta_r = R_rr +
  // sum_{p<r} E_rp Gram_rp = (R'_rr + sum_{p<r} (D E)_rp Gram_rp) / beta_r (0 where beta_r is 0: its
  // gate's gradient carries a factor beta_r).
  zero(f);
  mma_acc<NP>(f, SlotView<Tri::StrictLower, false, true>{s2, LT}, SlotView<Tri::Upper>{s2, LT}, T, lane, mt);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(mt, 2 * h, lane);
    float d = 0.f;
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int j = frag_col(nt, u, lane);
        if (j < i) d = fmaf(f.v[nt][2 * h + u], s1[i * LT + j], d);
      }
    d = quad_sum(d);
    if ((lane & 3) == 0) scr[i] = d;
  }
  __syncthreads();  // R' is no longer read: D E into s2's strictly lower part
  if (mt == 0 && lane < T)
    a.dbeta[s0 + lane * a.H] = beta[lane] > 0.f ? (scr[32 + lane] + scr[lane]) / beta[lane] : 0.f;
  store_frag<Tri::StrictLower, false, true, BF>(s2, f, T, lane, mt);
  __syncthreads();
  // dw = dA^T Q + dC K + (dGram + dGram^T) W, dGram = D E: entry (i, p) of the last factor is
  // (D E)_ip (p < i) or (D E)_pi (p > i).
  zero(o);
  mma_acc<NP>(o, SlotZeroed<Tri::Lower, true>{s5, LT}, qs, T, lane, mt);
  mma_acc<NP>(o, SlotView<Tri::StrictLower>{s3, LT}, k, T, lane, mt);
  const float* DE = s2;
  mma_acc<NP>(
      o, [&](int i, int p) { return p == i ? 0.f : DE[(p < i ? i : p) * LT + (p < i ? p : i)]; }, w, T, lane, mt);
  store_frag_global<false>(a.dw, e0, es, o, T, lane, mt);
}

WarpArgs warp_args(const PathShortArgs& base, const AttnDims& d) {
  if (d.T > kShortWarpT) throw_error("path_short_warp: T must be at most 32 (plan.hpp path_short_warp)");
  WarpArgs a{base};
  a.BH = d.B * d.H;
  a.is = d.qkv_stride();
  a.gs = d.grad_stride();
  return a;
}

template <class Kernel>
void launch(Kernel kernel, int64_t floats, const WarpArgs& a, const DeviceLimits& dev, cudaStream_t stream) {
  const int64_t bytes = floats * 4;
  if (bytes > dev.max_smem) throw_error("path_short_warp: a head's shared memory exceeds the device's");
  if (bytes > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  kernel<<<static_cast<unsigned>(a.BH), kThreads, static_cast<size_t>(bytes), stream>>>(a);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void path_short_warp_forward(void* out, float* lse, const void* q, const void* k, const void* v, const float* w,
                             const float* beta, const float* log_f, const AttnDims& d, float scale, bool bf16,
                             float* kept, const DeviceLimits& dev, cudaStream_t stream) {
  WarpArgs a = warp_args(path_short_forward_args(out, lse, q, k, v, w, beta, log_f, d, scale), d);
  a.kept = kept;
  with_short_dh(d.Dh, "path_short_warp", [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int64_t floats = path_short_warp_layout(D).fwd_floats;
    launch(bf16 ? path_short_warp_fwd_kernel<D, true> : path_short_warp_fwd_kernel<D, false>, floats, a, dev, stream);
  });
}

void path_short_warp_backward(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f, const void* dout,
                              const void* q, const void* k, const void* v, const float* w, const float* beta,
                              const float* log_f, const float* lse, const AttnDims& d, float scale, bool bf16,
                              const float* kept, const DeviceLimits& dev, cudaStream_t stream) {
  WarpArgs a = warp_args(
      path_short_backward_args(dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, lse, d, scale), d);
  a.kept = const_cast<float*>(kept);  // read only by the backward kernel
  with_short_dh(d.Dh, "path_short_warp", [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int64_t floats = path_short_warp_layout(D).bwd_floats;
    launch(bf16 ? path_short_warp_bwd_kernel<D, true> : path_short_warp_bwd_kernel<D, false>, floats, a, dev, stream);
  });
}

}  // namespace sb::cuda::detail
