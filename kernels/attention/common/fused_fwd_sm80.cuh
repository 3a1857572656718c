// fused_fwd_sm80.cuh: the fused causal attention forward kernel (internal), instantiated for PaTH
// (kPath, in kernels/attention/path/path_fwd.cu) and plain softmax attention (kernels/attention/softmax/softmax.cu).
// One CTA = one 64-query block of one head, 4 warps x 16 query rows; online softmax in registers.
// PaTH: the own block scores lower(Q K^T) - A Z with A = lower(Q W^T), the queries start as
// Qt = Q - A Y (pulled back to the block start), then key blocks m = n-1 .. 0 are scored with the
// pushed keys Kt_m and the queries are transported X <- X P_m (dense X - X C_m or factored
// X - (X W_m^T) Y_m, split precision). Queries stay unscaled; the scale multiplies the scores.
// With FwdParams::inter the PaTH kernel stops at its superchunk and writes the states for the wgmma pass.
#pragma once
#include <cmath>

#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {

struct FwdSmem : KeyTiles {
  Tile Q;
  float* colb = nullptr;  // [2][64] gate bias of the buffered key block (log2 units)
  int bytes = 0;
};

__host__ __device__ inline FwdSmem fwd_smem(unsigned char* base, int Dh, bool f32, bool path, bool dense,
                                            int stages) {
  Carve cv{base, 0};
  FwdSmem s;
  s.Q = cv.tile(kL, Dh, f32);
  static_cast<KeyTiles&>(s) = carve_key_tiles(cv, Dh, f32, path, dense, stages);
  s.colb = cv.floats(2 * kL);
  s.bytes = cv.off;
  return s;
}

// A row's running max moves only when a block raises it by more than this (log2 units, a factor
// of 256; the lazy rescaling of FlashAttention-4): probabilities stay below 2^8, harmless to l, O
// (fp32) and P (bf16 or split), and most blocks skip the rescale of O.
constexpr float kMaxSlack2 = 8.f;

// Online-softmax update of two rows per thread with logits scale2 * S (log2 units, -inf = masked;
// scale2 > 0, so the row max is taken on S and each probability costs one FFMA + ex2): moves the
// running max (lazily, kMaxSlack2) and rescales O and l when it moved, leaves the probabilities
// (relative to the running max) in S. Warp-uniform (a vote skips the O rescale).
template <int NTD>
__device__ __forceinline__ void online_softmax(float (&S)[8][4], float (&m2)[2], float (&l)[2], float (&O)[NTD][4],
                                               float scale2) {
  float alpha[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) mx = fmaxf(mx, fmaxf(S[nt][2 * rr], S[nt][2 * rr + 1]));
    const float cand = quad_max(mx) * scale2;
    const bool move = cand > m2[rr] + kMaxSlack2;  // any finite cand when m2 = -inf; never when cand = -inf
    const float mnew = move ? cand : m2[rr];
    const float base = mnew == -INFINITY ? 0.f : mnew;
    alpha[rr] = move ? fast_exp2(m2[rr] - base) : 1.f;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      S[nt][2 * rr] = fast_exp2(fmaf(S[nt][2 * rr], scale2, -base));
      S[nt][2 * rr + 1] = fast_exp2(fmaf(S[nt][2 * rr + 1], scale2, -base));
      sum += S[nt][2 * rr] + S[nt][2 * rr + 1];
    }
    l[rr] = l[rr] * alpha[rr] + sum;
    m2[rr] = mnew;
  }
  if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt) {
      O[nt][0] *= alpha[0];
      O[nt][1] *= alpha[0];
      O[nt][2] *= alpha[1];
      O[nt][3] *= alpha[1];
    }
  }
}

// The forward's query gate biases of this thread's rows r0 + g (+8) of query block i0, relative to
// gref (log2 units; 0 without a gate or past T).
__device__ __forceinline__ void query_gate_bias(float (&rb2)[2], const double* gh, int64_t i0, int r0, int64_t T,
                                                double gref, int lane) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int64_t i = i0 + r0 + (lane >> 2) + 8 * rr;
    rb2[rr] = (gh && i < T) ? static_cast<float>(gh[i] - gref) * kLog2e : 0.f;
  }
}

// Scores -> logits for online_softmax, a warp's 16 query rows (r0 + g (+8)) x 64 keys: with
// prescale S sl2 + query bias - key bias (log2 units), else S unchanged (the scale is folded into the
// exponent); on the diagonal block keys after the query and padded queries (row >= nvalid) -> -inf.
__device__ __forceinline__ void fwd_logits(float (&S)[8][4], bool prescale, float sl2, const float (&rb2)[2],
                                           const float* colb, bool diag, int r0, int nvalid, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + g + ((e & 2) ? 8 : 0), col = nt * 8 + 2 * tq + (e & 1);
      const float x = prescale ? S[nt][e] * sl2 + rb2[e >> 1] - colb[col] : S[nt][e];
      S[nt][e] = (!diag || (col <= row && row < nvalid)) ? x : -INFINITY;
    }
}

// Normalises O by the row sums and writes lse (natural log) and the output rows r0 + g (+8) < nvalid
// of query block i0 (out_rows: the block's first output row).
template <int NTD>
__device__ __forceinline__ void fwd_finish(const FwdParams& p, float (&O)[NTD][4], const float (&m2)[2],
                                           const float (&l)[2], int64_t bh, int64_t i0, int nvalid, void* out_rows,
                                           int64_t rs, bool bf, int r0, int lane) {
  const int g = lane >> 2, tq = lane & 3;
  float inv[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float lt = quad_sum(l[rr]);
    const int row = r0 + g + 8 * rr;
    if (row < nvalid && tq == 0) p.lse[bh * p.T + i0 + row] = (m2[rr] + log2f(lt)) * kLn2;
    inv[rr] = 1.f / lt;
  }
#pragma unroll
  for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) O[nt][e] *= inv[e >> 1];
  store_frag_global(out_rows, rs, bf, r0, nvalid, O, 1.f, lane);
}

// The own block's W (fp32, split into planes) and Z (packed triangle) tiles with both tiles' loads
// in flight together (this kernel runs 128 threads); one after the other at Dh = 128, for registers.
template <int Dh>
__device__ __forceinline__ void load_w_z_tiles(const Tile& W, const float* w, int64_t rs, int valid, const Tile& Z,
                                               const float* z, int tid) {
  constexpr int kT = 128;
  if constexpr (Dh <= 64) {
    float4 fw[kL * Dh / 4 / kT], fz[kL * kL / 4 / kT];
    tile_issue(fw, tid, kL, Dh, w, rs, false, valid, kT);
    tri_issue(fz, tid, z, kT);
    tile_finish(W, fw, tid, kL, Dh, false, kT);
    tri_finish(Z, fz, tid, 0.f, nullptr, kT);
  } else {
    load_tile(W, kL, Dh, w, rs, false, valid, tid, kT);
    load_tri_tile(Z, z, 0.f, nullptr, tid, kT);
  }
}

template <int Dh, bool kPath, bool kF32>
__global__ void __launch_bounds__(128, kPath ? 1 : (Dh <= 32 ? 5 : (Dh <= 64 ? 4 : 1))) attn_fwd_kernel(const FwdParams p) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr bool f32 = kF32;  // split every product (fp32 inputs); bf16 inputs are exact in one plane
  constexpr bool bf = !kF32;  // element type of q, k, v, out, dout, dq
  const FwdSmem sm = fwd_smem(smem_raw, Dh, f32, kPath, p.dense, p.stages);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t NBH = p.nbh > 0 ? p.nbh : p.B * p.H, item = blockIdx.x;  // heaviest query blocks first
  const int64_t lb = item % NBH, bh = p.bh0 + lb, b = bh / p.H, h = bh % p.H;
  const int n = p.nb - 1 - static_cast<int>(item / NBH);
  const int64_t i0 = static_cast<int64_t>(n) * kL, Tp = static_cast<int64_t>(p.nb) * kL;
  const int nvalid = static_cast<int>(min64(kL, p.T - i0));
  const int64_t rs = p.H * Dh, head0 = (b * p.T * p.H + h) * Dh;
  constexpr size_t esz = bf ? 2 : 4;
  const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
  const double gref = gh ? gh[i0] : 0.0;
  const float sl2 = p.scale * kLog2e;
  // Gate biases turn the scores into log2-unit logits before the softmax; otherwise the scale (positive:
  // the API checks it) is folded into its exponent.
  const bool prescale = gh != nullptr;
  const int r0 = 16 * warp;
  float rb2[2];
  query_gate_bias(rb2, gh, i0, r0, p.T, gref, lane);

  // ---- own block ----
  load_input_tile<bf>(sm.Q, kL, Dh, input_at<bf>(p.q, head0 + i0 * rs), rs, nvalid, tid);
  load_input_tile<bf>(sm.K, kL, Dh, input_at<bf>(p.k, head0 + i0 * rs), rs, nvalid, tid);
  load_input_tile<bf>(sm.V, kL, Dh, input_at<bf>(p.v, head0 + i0 * rs), rs, nvalid, tid);
  if constexpr (kPath) {
    load_planes_tile(sm.Y, kL, Dh, p.y_hi, p.y_lo, (bh * Tp + i0) * Dh, tid);
    load_w_z_tiles<Dh>(sm.W, p.w + head0 + i0 * rs, rs, nvalid, sm.Z, p.z + (bh * p.nb + n) * kTriFloats, tid);
  }
  cp_async_commit();
  fill_colbias(sm.colb, gh, i0, p.T, gref, tid);
  cp_async_wait<0>();
  __syncthreads();

  float S[8][4], O[NTD][4], X[NTD][4];
  float m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  zero(S);
  zero(O);
  mma_sA<8, false, BL::NK>(S, sm.Q, r0, 0, KTD, sm.K, 0, 0, f32, lane);  // Q K^T
  if constexpr (kPath) {
    float A[8][4];
    zero(A);
    mma_sA<8, false, BL::NK>(A, sm.Q, r0, 0, KTD, sm.W, 0, 0, true, lane);  // Q W^T
    mask_lower(A, r0, lane);
    mma_rA<4, 8, BL::KN>(S, A, -1.f, sm.Z, 0, 0, f32, lane);  // - A Z
    load_frag_global(X, input_at<bf>(p.q, head0 + i0 * rs), rs, bf, r0, nvalid, lane);
    mma_rA<4, NTD, BL::KN>(X, A, -1.f, sm.Y, 0, 0, true, lane);  // Qt = Q - A Y
  }
  fwd_logits(S, prescale, sl2, rb2, sm.colb, true, r0, nvalid, lane);
  const float scale2 = prescale ? 1.f : sl2;
  online_softmax(S, m2, l, O, scale2);
  mma_rA<4, NTD, BL::KN>(O, S, 1.f, sm.V, 0, 0, f32, lane);  // O += P V
  __syncthreads();  // the own-block tiles alias the pipeline buffers

  // ---- earlier key blocks, right to left, through a `stages`-deep cp.async pipeline ----
  // Starts the loads of key block j into buffer st (its pushed keys, values, transport operands).
  // PaTH with superchunks: blocks before s_a (earlier superchunks) use the keys pushed to their
  // superchunk's end and X transported once per superchunk (X <- X - X Cs_b after its first block).
  const int s_a = kPath && p.sc > 0 ? (n / p.sc) * p.sc : 0;
  const int lo = kPath && p.inter ? s_a : 0;  // with the wgmma pass: the own superchunk only
  auto issue = [&](int j, int st) {
    const int64_t k0 = static_cast<int64_t>(j) * kL;
    const int sb = st * sm.stage_bytes;
    if constexpr (kPath) {
      const bool inter = j < s_a;
      load_planes_tile<true>(shifted(sm.Kb, sb), kL, Dh, inter ? p.ke_hi : p.kt_hi, inter ? p.ke_lo : p.kt_lo,
                       (bh * Tp + k0) * Dh, tid);
      if (j > 0 && !inter) {
        if (p.dense) {
          load_planes_tile<true>(shifted(sm.Cb, sb), Dh, Dh, p.c_hi, p.c_lo, (bh * p.nb + j) * Dh * Dh, tid);
        } else {
          load_tile(shifted(sm.Wb, sb), kL, Dh, p.w + head0 + k0 * rs, rs, false, kL, tid, blockDim.x);
          load_planes_tile<true>(shifted(sm.Yb, sb), kL, Dh, p.y_hi, p.y_lo, (bh * Tp + k0) * Dh, tid);
        }
      }
    } else {
      load_input_tile<bf, true>(shifted(sm.Kb, sb), kL, Dh, input_at<bf>(p.k, head0 + k0 * rs), rs, kL, tid);
    }
    load_input_tile<bf, true>(shifted(sm.Vb, sb), kL, Dh, input_at<bf>(p.v, head0 + k0 * rs), rs, kL, tid);
    fill_colbias(sm.colb + st * kL, gh, k0, p.T, gref, tid);
    cp_async_commit();
  };
  // Softmax: this warp's query fragments stay in registers across the key blocks.
  uint32_t qh[kPath ? 1 : KTD][4], ql[kPath ? 1 : KTD][4] = {};
  if constexpr (!kPath) {
#pragma unroll
    for (int kk = 0; kk < KTD; ++kk) {
      load_a<false>(qh[kk], sm.Q.hi, sm.Q.ld, r0, 16 * kk, lane);
      if (f32) load_a<false>(ql[kk], sm.Q.lo, sm.Q.ld, r0, 16 * kk, lane);
    }
  }
  const bool two = p.stages == 2;
  if (two && n > lo) issue(n - 1, 0);
  for (int m = n - 1, it = 0; m >= lo; --m, ++it) {
    const int cur = two ? (it & 1) : 0;
    if (two) {
      if (m > lo) issue(m - 1, cur ^ 1);
      else cp_async_commit();
      cp_async_wait<1>();
    } else {
      issue(m, 0);
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* colb = sm.colb + cur * kL;
    const int cb = cur * sm.stage_bytes;
    const Tile Kc = shifted(sm.Kb, cb), Vc = shifted(sm.Vb, cb);
    zero(S);
    if constexpr (kPath) {
      mma_rA<KTD, 8, BL::NK>(S, X, 1.f, Kc, 0, 0, f32, lane);  // X Kt^T
    } else {
#pragma unroll
      for (int kk = 0; kk < KTD; ++kk) mma_ktile<8, BL::NK>(S, qh[kk], ql[kk], Kc, 16 * kk, 0, f32, f32, lane);
    }
    if (prescale) fwd_logits(S, true, sl2, rb2, colb, false, r0, nvalid, lane);
    online_softmax(S, m2, l, O, scale2);
    mma_rA<4, NTD, BL::KN>(O, S, 1.f, Vc, 0, 0, f32, lane);
    if constexpr (kPath) {
      if (m >= s_a) {
        if (m > 0) transport_rows<Dh>(X, sm.Cb, sm.Wb, sm.Yb, cb, p.dense, lane);  // X <- X P_m
      } else if (m > 0 && m % p.sc == 0) {  // X_{e_{b-1}} = X_{e_b} W_b, Cs_b into stage cur's idle transport tile
        const Tile cs = superchunk_tile(sm, Dh, p.dense, cb);
        load_planes_tile(cs, Dh, Dh, p.cs_hi, p.cs_lo, (bh * p.nsc + m / p.sc) * Dh * Dh, tid);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        transport_rows<Dh>(X, cs, cs, cs, 0, true, lane);
      }
    }
    __syncthreads();  // buffer `cur` is refilled by the next-but-one issue
  }
  if constexpr (kPath) {
    if (p.inter) {  // X = X_{e_{a-1}}: the states of the earlier superchunks, X_{e_{b-1}} = X_{e_b} W_b
      // (Cs_b loaded synchronously: double-buffering it in the two stages' tiles measured slower.)
      const int64_t S = static_cast<int64_t>(p.sc) * kL;
      const Tile cs = superchunk_tile(sm, Dh, p.dense, 0);
      for (int sb = s_a / p.sc - 1; sb >= 0; --sb) {
        const int64_t row0 = lb * p.xs_rows + sc_state_row(sb, Tp, S) + i0 - (sb + 1) * S;
        store_frag_global(p.xs + row0 * Dh, Dh, true, r0, kL, X, 1.f, lane);
        if (sb == 0) break;
        load_planes_tile(cs, Dh, Dh, p.cs_hi, p.cs_lo, (bh * p.nsc + sb) * Dh * Dh, tid);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        transport_rows<Dh>(X, cs, cs, cs, 0, true, lane);
        __syncthreads();  // before the next superchunk's tile
      }
    }
  }

  fwd_finish(p, O, m2, l, bh, i0, nvalid, static_cast<unsigned char*>(p.out) + (head0 + i0 * rs) * esz, rs, bf, r0,
             lane);
}

}  // namespace sb::cuda::detail
