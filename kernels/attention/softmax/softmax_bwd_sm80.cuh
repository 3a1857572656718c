// softmax_bwd_sm80.cuh: the key-centric (FlashAttention-2 style) causal softmax attention
// backward kernel (internal; instantiated in kernels/attention/softmax/softmax.cu). One CTA owns a 64-key block of
// one head (4 warps x 16 key rows) and walks the query blocks from the diagonal to the end through
// a double-buffered cp.async pipeline: P^T and dS^T are recomputed from lse and delta, dV += P^T dO
// and dK += dS^T Q stay in registers and are written once; dQ += dS K goes to an fp32 accumulator
// by 16-byte atomics (one tile per pair, where the query-centric kernel needed two).
#pragma once
#include <cmath>
#include <type_traits>

#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {

struct KvBwdSmem {
  Tile K, V;      // the CTA's key block
  Tile Q, dO;     // query block of pipeline stage 0; stage s is s * stage_bytes further on
  int stage_bytes = 0;
  Tile dS;        // [64 keys][64 queries], scaled
  float* stats = nullptr;  // [stages][3][64]: lse, delta, query gate bias (log2 units)
  float* colb = nullptr;   // [64] key gate bias (log2 units)
  int bytes = 0;
};

__host__ __device__ inline KvBwdSmem kv_bwd_smem(unsigned char* base, int Dh, bool f32, int stages) {
  Carve cv{base, 0};
  KvBwdSmem s;
  s.K = cv.tile(kL, Dh, f32);
  s.V = cv.tile(kL, Dh, f32);
  const int start = cv.off;
  s.Q = cv.tile(kL, Dh, f32);
  s.dO = cv.tile(kL, Dh, f32);
  s.stage_bytes = cv.off - start;
  cv.off = start + stages * s.stage_bytes;
  s.dS = cv.tile(kL, kL, f32);
  s.stats = cv.floats(stages * 3 * kL);
  s.colb = cv.floats(kL);
  s.bytes = cv.off;
  return s;
}

// The query gate biases of query block i0 relative to gref (log2 units; padded queries 0) into
// qbias[64], synchronously; nothing without a gate.
__device__ __forceinline__ void fill_query_bias(float* qbias, const double* gh, int64_t i0, int64_t T, double gref,
                                                int tid) {
  if (gh)
    for (int c = tid; c < kL; c += blockDim.x) {
      const int64_t i = i0 + c;
      qbias[c] = i < T ? static_cast<float>(gh[i] - gref) * kLog2e : 0.f;
    }
}

// Starts loading the per-query statistics of query block i0 into stats[3][64]: lse (natural log;
// padded queries +inf, so P = 0) and delta by 4-byte cp.async (complete after cp_async_wait and a
// barrier, off the critical path of the block before); the query gate bias (fill_query_bias).
__device__ __forceinline__ void load_query_stats(float* stats, const BwdParams& p, int64_t bh, int64_t i0,
                                                 const double* gh, double gref, int tid) {
  for (int c = tid; c < 2 * kL; c += blockDim.x) {
    const int col = c & (kL - 1);
    const int64_t i = i0 + col;
    const float* src = (c < kL ? p.lse : p.delta) + bh * p.T + i;
    if (i < p.T)
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(stats + c)), "l"(src) : "memory");
    else
      stats[c] = c < kL ? INFINITY : 0.f;
  }
  fill_query_bias(stats + 2 * kL, gh, i0, p.T, gref, tid);
}

// This warp's 16 keys (rows r0 + g (+8)) x 64 queries: St = K Q^T and dPt = V dO^T in, P^T and
// dS^T = scale P^T (dP^T - delta) out (the softmax scale applied here, one FFMA + FMUL per score),
// with P = 2^(S sl2 + query bias - key bias - lse log2e) (gate-free: one FFMA + ex2; stats as
// load_query_stats leaves them), the causal mask on the diagonal block, and with a gate dgk += row
// sums of dS^T (scaled: the caller divides by scale).
template <bool kGated>
__device__ __forceinline__ void softmax_bwd_probs(float (&Pt)[8][4], float (&dSt)[8][4], const float* stats, bool diag,
                                                  int r0, float sl2, float scale, const float (&kb2)[2],
                                                  float (&dgk)[2], int lane) {
  const int g = lane >> 2, tq = lane & 3;
  const float* lse = stats;
  const float* dl = stats + kL;
  const float* qbias = stats + 2 * kL;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c0 = nt * 8 + 2 * tq;
    float2 ls = *reinterpret_cast<const float2*>(lse + c0);
    ls.x *= kLog2e;
    ls.y *= kLog2e;
    float2 de = *reinterpret_cast<const float2*>(dl + c0);
    de.x *= scale;
    de.y *= scale;
    float2 qg = make_float2(0.f, 0.f);
    if constexpr (kGated) qg = *reinterpret_cast<const float2*>(qbias + c0);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int rr = e >> 1, col = c0 + (e & 1);
      const bool ok = !diag || col >= r0 + g + 8 * rr;
      const float lse_c = (e & 1) ? ls.y : ls.x, d_c = (e & 1) ? de.y : de.x;
      float x;
      if constexpr (kGated)
        x = Pt[nt][e] * sl2 + ((e & 1) ? qg.y : qg.x) - kb2[rr] - lse_c;
      else
        x = fmaf(Pt[nt][e], sl2, -lse_c);
      Pt[nt][e] = ok ? fast_exp2(x) : 0.f;
      dSt[nt][e] = Pt[nt][e] * fmaf(dSt[nt][e], scale, -d_c);
      if constexpr (kGated) dgk[rr] += dSt[nt][e];
    }
  }
}

// Softmax at Dh <= 64 fits 2 CTAs per SM (smem ~66 KB bf16) without spilling the dK, dV tiles.
template <int Dh, bool kF32>
__global__ void __launch_bounds__(128, Dh <= 64 ? 3 : 1) softmax_bwd_kv_kernel(const BwdParams p) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr bool f32 = kF32, bf = !kF32;
  const KvBwdSmem sm = kv_bwd_smem(smem_raw, Dh, f32, p.stages);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3, r0 = 16 * warp;
  const int64_t BH = p.B * p.H, item = blockIdx.x;  // heaviest key blocks (most query blocks) first
  const int64_t bh = item % BH, b = bh / p.H, h = bh % p.H;
  const int kb = static_cast<int>(item / BH);
  const int64_t k0 = static_cast<int64_t>(kb) * kL, Tp = static_cast<int64_t>(p.nb) * kL, rs = p.H * Dh;
  const int64_t head0 = (b * p.T * p.H + h) * Dh;
  const int kvalid = static_cast<int>(min64(kL, p.T - k0));
  constexpr size_t esz = bf ? 2 : 4;
  const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
  const double gref = gh ? gh[k0] : 0.0;
  const float sl2 = p.scale * kLog2e;

  load_input_tile<bf>(sm.K, kL, Dh, input_at<bf>(p.k, head0 + k0 * rs), rs, kvalid, tid);
  load_input_tile<bf>(sm.V, kL, Dh, input_at<bf>(p.v, head0 + k0 * rs), rs, kvalid, tid);
  fill_colbias(sm.colb, gh, k0, p.T, gref, tid);

  // Starts the loads of query block qb into stage st: Q, dO and the per-query statistics.
  auto issue = [&](int qb, int st) {
    const int64_t i0 = static_cast<int64_t>(qb) * kL;
    const int nvalid = static_cast<int>(min64(kL, p.T - i0)), sb = st * sm.stage_bytes;
    load_input_tile<bf>(shifted(sm.Q, sb), kL, Dh, input_at<bf>(p.q, head0 + i0 * rs), rs, nvalid, tid);
    load_input_tile<bf>(shifted(sm.dO, sb), kL, Dh, input_at<bf>(p.dout, head0 + i0 * rs), rs, nvalid, tid);
    load_query_stats(sm.stats + st * 3 * kL, p, bh, i0, gh, gref, tid);
    cp_async_commit();
  };

  float dK[NTD][4], dV[NTD][4];
  zero(dK);
  zero(dV);
  float kb2[2] = {0.f, 0.f}, dgk[2] = {0.f, 0.f};  // key gate bias (set after the first barrier), dg sums
  const bool two = p.stages == 2;
  if (two) issue(kb, 0);
  for (int qb = kb, it = 0; qb < p.nb; ++qb, ++it) {
    const int cur = two ? (it & 1) : 0;
    if (two) {
      if (qb + 1 < p.nb) issue(qb + 1, cur ^ 1);
      else cp_async_commit();
      cp_async_wait<1>();
    } else {
      issue(qb, 0);
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) kb2[rr] = sm.colb[r0 + g + 8 * rr];
    }
    const int cb = cur * sm.stage_bytes;
    const Tile Qc = shifted(sm.Q, cb), dOc = shifted(sm.dO, cb);
    const float* st = sm.stats + cur * 3 * kL;
    const int64_t i0 = static_cast<int64_t>(qb) * kL;
    const bool diag = qb == kb;

    // P^T and dP^T for this warp's 16 keys x the 64 queries.
    float Pt[8][4], dSt[8][4];
    zero(Pt);
    zero(dSt);
    mma_sA<8, false, BL::NK>(Pt, sm.K, r0, 0, KTD, Qc, 0, 0, f32, lane);   // K Q^T
    mma_sA<8, false, BL::NK>(dSt, sm.V, r0, 0, KTD, dOc, 0, 0, f32, lane);  // V dO^T
    if (gh)
      softmax_bwd_probs<true>(Pt, dSt, st, diag, r0, sl2, p.scale, kb2, dgk, lane);
    else
      softmax_bwd_probs<false>(Pt, dSt, st, diag, r0, sl2, p.scale, kb2, dgk, lane);
    if (gh) add_column_sums(p.dg + bh * Tp + i0, dSt, 1.f / p.scale, p.T - i0, lane);  // queries' share: + sum over keys
    mma_rA<4, NTD, BL::KN>(dV, Pt, 1.f, dOc, 0, 0, f32, lane);   // dV += P^T dO
    mma_rA<4, NTD, BL::KN>(dK, dSt, 1.f, Qc, 0, 0, f32, lane);   // dK += dS^T Q
    store_frag(sm.dS, r0, dSt, 1.f, lane);
    __syncthreads();

    // dQ rows [r0, r0 + 16) of this query block += dS K (A = dS stored transposed, scaled).
    float dQ[NTD][4];
    zero(dQ);
    mma_sA<NTD, true, BL::KN>(dQ, sm.dS, r0, 0, 4, sm.K, 0, 0, f32, lane);
    atomic_frag(p.dq_acc + (bh * Tp + i0) * Dh, Dh, r0, dQ, 1.f, lane);
    __syncthreads();  // stage `cur` and dS are refilled next
  }

  store_frag_global(static_cast<unsigned char*>(p.dk) + (head0 + k0 * rs) * esz, rs, bf, r0, kvalid, dK, 1.f, lane);
  store_frag_global(static_cast<unsigned char*>(p.dv) + (head0 + k0 * rs) * esz, rs, bf, r0, kvalid, dV, 1.f, lane);
  if (gh) {  // the keys' share: - sum over queries of dS
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const float sum = quad_sum(dgk[rr]);
      const int row = r0 + g + 8 * rr;
      if (tq == 0 && row < kvalid) atomicAdd(p.dg + bh * Tp + k0 + row, -sum / p.scale);
    }
  }
}

}  // namespace sb::cuda::detail
