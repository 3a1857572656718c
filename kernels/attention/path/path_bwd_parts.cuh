// path_bwd_parts.cuh: per-warp and per-CTA pieces of the PaTH backward kernels (internal: the pairs
// kernel kernels/attention/path/path_bwd_pairs_sm80.cuh and the own-block kernel kernels/attention/path/path_bwd_own.cu): the query rows' statistics,
// query states in the per-CTA scratch, the CTA-wide A^T B products added to the fp32 accumulators by
// atomics, and the out-of-line W tile load that runs once per item (the instruction footprint,
// kernels/DESIGN.md).
#pragma once
#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {

// Per-thread slice of a query state (16 x Dh per warp) in the CTA's scratch slot `slot`: fp32, or
// with kBf16 rounded to bf16 (half the scratch). A bf16-mode state only feeds bf16 products (scores,
// the X tile), which round it the same way; only a checkpoint's restarted chain sees the rounding.
template <bool kBf16, int NTD>
__device__ __forceinline__ void save_state(const float (&X)[NTD][4], float* base, int64_t slot, int Bq, int Dh,
                                           int warp, int lane) {
  if constexpr (kBf16) {
    uint2* p = reinterpret_cast<uint2*>(base + slot * Bq * Dh / 2);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
      p[(warp * NTD + nt) * 32 + lane] = make_uint2(pack_bf16(X[nt][0], X[nt][1]), pack_bf16(X[nt][2], X[nt][3]));
  } else {
    float4* p = reinterpret_cast<float4*>(base + slot * Bq * Dh);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
      p[(warp * NTD + nt) * 32 + lane] = make_float4(X[nt][0], X[nt][1], X[nt][2], X[nt][3]);
  }
}
template <bool kBf16, int NTD>
__device__ __forceinline__ void load_state(float (&X)[NTD][4], const float* base, int64_t slot, int Bq, int Dh,
                                           int warp, int lane) {
  if constexpr (kBf16) {
    const uint2* p = reinterpret_cast<const uint2*>(base + slot * Bq * Dh / 2);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt) {
      const uint2 u = p[(warp * NTD + nt) * 32 + lane];
      const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
      const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
      X[nt][0] = a.x, X[nt][1] = a.y, X[nt][2] = b.x, X[nt][3] = b.y;
    }
  } else {
    const float4* p = reinterpret_cast<const float4*>(base + slot * Bq * Dh);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt) {
      const float4 v = p[(warp * NTD + nt) * 32 + lane];
      X[nt][0] = v.x, X[nt][1] = v.y, X[nt][2] = v.z, X[nt][3] = v.w;
    }
  }
}
// Per-thread statistics of the query rows i0 + r0 + g and + 8 of head bh: lse and the gate's row
// bias (gcum relative to gref) in log2 units, and delta; rows past T get lse = +inf (P = 0).
__device__ __forceinline__ void load_row_stats(float (&lse2)[2], float (&dl)[2], float (&rb2)[2], const BwdParams& p,
                                               int64_t bh, int64_t i0, int r0, int g, const double* gh,
                                               double gref) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int64_t i = i0 + r0 + g + 8 * rr;
    const bool ok = i < p.T;
    lse2[rr] = ok ? p.lse[bh * p.T + i] * kLog2e : INFINITY;
    dl[rr] = ok ? p.delta[bh * p.T + i] : 0.f;
    rb2[rr] = (gh && ok) ? static_cast<float>(gh[i] - gref) * kLog2e : 0.f;
  }
}

// One CTA-wide product out (M x 8NT, M = 16 * mtiles) = A^T B with A stored [k][m] and B [k][n]
// (k = the Bq query rows), added to dst rows by atomics.
template <int NT>
__device__ __forceinline__ void cta_atb_atomic(float* dst, int64_t ld, int mtiles, const Tile& A, const Tile& B,
                                               int kt, float mul, bool split, int warp, int warps, int lane) {
  for (int mt = warp; mt < mtiles; mt += warps) {
    float acc[NT][4];
    zero(acc);
    mma_sA<NT, true, BL::KN>(acc, A, 16 * mt, 0, kt, B, 0, 0, split, lane);
    atomic_frag(dst, ld, 16 * mt, acc, mul, lane);
  }
}
// The W tile of a query's own block (fp32 w, split into planes), loaded at the start of a pairs
// kernel item for the pull-back: one out-of-line copy at Dh <= 64 (each inlined batched load is ~430
// instructions of the footprint).
template <int Dh>
__device__ __noinline__ void load_w_tile_call(const Tile T, const float* src, int64_t rs, int valid, int tid) {
  load_tile(T, kL, Dh, src, rs, false, valid, tid, blockDim.x);
}
template <int Dh, bool kCall>
__device__ __forceinline__ void load_w_tile(const Tile& T, const float* src, int64_t rs, int valid, int tid) {
  if constexpr (kCall)
    load_w_tile_call<Dh>(T, src, rs, valid, tid);
  else
    load_tile(T, kL, Dh, src, rs, false, valid, tid, blockDim.x);
}

}  // namespace sb::cuda::detail
