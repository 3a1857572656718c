// softmax_sm90.cuh: the Hopper (sm_90a) causal softmax attention kernels for bf16 inputs at head
// dims 64 and 128 (internal; instantiated in kernels/attention/softmax/softmax.cu, and the backward for PaTH's pairs
// between superchunks in kernels/attention/path/path_bwd.cu). Same algorithms, statistics
// and numerics as kernels/attention/common/fused_fwd_sm80.cuh (softmax) and kernels/attention/softmax/softmax_bwd_sm80.cuh, but every product is a
// warpgroup wgmma over 128-byte-swizzled shared-memory tiles (kernels/attention/common/wgmma_sm90.cuh): the B operand is
// read once per warpgroup instead of once per warp, the main cost of the mma.sync kernels.
#pragma once
#include <cmath>
#include <type_traits>

#include "kernels/attention/common/fused_fwd_sm80.cuh"
#include "kernels/attention/common/wgmma_sm90.cuh"
#include "kernels/attention/softmax/softmax_bwd_sm80.cuh"

namespace sb::cuda::detail {

// The 64-column panel np of a [16 rows x Dh] accumulator (n-tiles 8np .. 8np+7).
template <int NTD>
__device__ __forceinline__ float (&panel(float (&acc)[NTD][4], int np))[8][4] {
  return *reinterpret_cast<float(*)[8][4]>(&acc[8 * np]);
}

// acc (64 x Dh over the warpgroup) += A (64 x 64, this warp's 16 rows packed by pack_a, k-tiles
// 0..3) B, B a swizzled 64-row tile, MN-major: one n128 product per k-tile at Dh = 128 (not two
// n64 ones: A is read once).
template <int NTD>
__device__ __forceinline__ void wg_product_rs(float (&acc)[NTD][4], const uint32_t (&a)[4][4], const unsigned char* B) {
  if constexpr (NTD == 16) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) wgmma_rs<1>(acc, a[kk], desc_mnmajor128(B, kL, kk));
  } else {
#pragma unroll
    for (int np = 0; np < NTD / 8; ++np)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) wgmma_rs<1>(panel(acc, np), a[kk], desc_mnmajor(B, kL, 64 * np, kk));
  }
}

// The forwards' two halves of a key block, for a warpgroup's 64 queries: S = Q K^T (Q rows qrow0 ..
// qrow0 + 63 of a tile of qrows, and K, both K-major in shared memory), then, on the logits, the
// online softmax and O += P V (V MN-major).
template <int KTD>
__device__ __forceinline__ void wg_scores(float (&S)[8][4], const unsigned char* Q, int qrows, int qrow0,
                                          const unsigned char* K) {
  zero(S);
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < KTD; ++kk) wgmma_ss<0, 0>(S, desc_kmajor(Q, qrows, qrow0, kk), desc_kmajor(K, kL, 0, kk));
  wg_commit();
  wg_wait<0>();
  wg_hold(S);
}
template <int NTD>
__device__ __forceinline__ void wg_softmax_pv(float (&S)[8][4], float (&O)[NTD][4], float (&m2)[2], float (&l)[2],
                                              float scale2, const unsigned char* V) {
  online_softmax(S, m2, l, O, scale2);
  uint32_t pa[4][4], unused[4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) pack_a(pa[kk], unused, S, kk, 1.f, false);
  wg_fence();
  wg_product_rs(O, pa, V);
  wg_commit();
  wg_wait<0>();
  wg_hold(O);
}

// Forward pipeline stages (key blocks in flight). 3 or 4 stages measured no faster at Dh 64, nor
// 3-4 stages at one CTA per SM at Dh 128 (kernels/DESIGN.md).
constexpr int kWgFwdStages = 2;
// Shared memory of the forward: Q (128 rows), then the stages of (K, V), then the key gate biases
// [stages][64].
__host__ __device__ constexpr int wg_fwd_smem_bytes(int Dh) {
  return 1024 + (2 + 2 * kWgFwdStages) * sw_bytes(kL, Dh) + kWgFwdStages * kL * 4;
}
// Backward pipeline stages of (Q, dO): 3.
__host__ __device__ constexpr int wg_bwd_stages(int) { return 3; }
// At Dh = 128 the three stages fill an sm_90 CTA's 227 KB only without the 1024 bytes of slack that
// align1024 needs, so there the kernel takes the dynamic shared memory base as it is: 1024-aligned
// on sm_90 (what CUTLASS's TMA kernels also rely on), and the kernel traps if it is not.
__host__ __device__ constexpr int wg_bwd_slack(int Dh) { return Dh == 64 ? 1024 : 0; }
// Backward: K, V (128 keys), the stages of (Q, dO) (64 queries), two dS^T buffers [128 keys][64
// queries], the 8 warps' dQ staging tiles (tma_add_frag: 16 rows x Dh / 2 fp32 each), statistics
// [stages][3][64], key gate biases [128], the stages' mbarriers (TMA loads): 232216 bytes at
// Dh = 128, of the 232448 allowed.
__host__ __device__ constexpr int wg_bwd_smem_bytes(int Dh) {
  return wg_bwd_slack(Dh) + 2 * sw_bytes(2 * kL, Dh) + 2 * wg_bwd_stages(Dh) * sw_bytes(kL, Dh) +
         2 * sw_bytes(2 * kL, kL) + 8 * 16 * (Dh / 2) * 4 + (3 * wg_bwd_stages(Dh) + 2) * kL * 4 +
         8 * wg_bwd_stages(Dh);
}

// Forward: one CTA of two warpgroups per 128-query block of one head, warpgroup w owning queries
// 64w .. 64w+63, both reading each K / V tile (half the L2 traffic of a 64-query CTA: 26% faster at
// Dh = 128, the same at 64). Key blocks of 64 from the diagonal down to 0 through a kWgFwdStages
// cp.async pipeline with one barrier per block; per warpgroup S = Q K^T (both K-major from shared
// memory), online softmax in registers, O += P V (P from registers, V MN-major). Warpgroup 0 skips
// the block's last key block (all after its queries). (A 64-query version that computed the next
// block's scores during the softmax was 7% slower at Dh = 64, 5% faster at 128: kernels/DESIGN.md.)
template <int Dh>
__global__ void __launch_bounds__(256, 2) softmax_fwd_wgmma_kernel(const FwdParams p) {
#if SB_WGMMA
  constexpr int NTD = Dh / 8, KTD = Dh / 16, tile = sw_bytes(kL, Dh), kS = kWgFwdStages;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* const sQ = align1024(smem_raw);  // Q: one 128-row tile, warpgroup w's rows from 64w
  unsigned char* const sKV = sQ + 2 * tile;       // stage s: K at sKV + 2 s tile, V one tile further
  float* const colb = reinterpret_cast<float*>(sKV + 2 * kS * tile);  // [kS][64]
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, r0 = 16 * warp;
  const int nq2 = (p.nb + 1) / 2;
  int64_t bh, job;  // heaviest (last) query blocks first
  head_order(blockIdx.x, p.B * p.H, nq2, p.head_chunk, bh, job);
  const int64_t b = bh / p.H, h = bh % p.H;
  const int n2 = nq2 - 1 - static_cast<int>(job);  // 128-query block
  const int top = min(2 * n2 + 1, p.nb - 1);  // the last key block with a query of this CTA
  const int diag = 2 * n2 + wg;               // this warpgroup's diagonal key block
  const int64_t c0 = static_cast<int64_t>(n2) * 2 * kL, i0 = c0 + wg * kL, rs = p.H * Dh;
  const int64_t head0 = (b * p.T * p.H + h) * Dh;
  const int nvalid = static_cast<int>(min64(kL, p.T - i0));  // <= 0: warpgroup 1 past T (idle)
  const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
  const double gref = gh ? gh[c0] : 0.0;
  const float sl2 = p.scale * kLog2e;
  const bool prescale = gh != nullptr;  // as in attn_fwd_kernel
  const float scale2 = prescale ? 1.f : sl2;
  float rb2[2];
  query_gate_bias(rb2, gh, i0, r0, p.T, gref, lane);
  const bf16* k = static_cast<const bf16*>(p.k);
  const bf16* v = static_cast<const bf16*>(p.v);
  sw_copy_async(sQ, 2 * kL, Dh, static_cast<const bf16*>(p.q) + head0 + c0 * rs, rs,
                static_cast<int>(min64(2 * kL, p.T - c0)), tid, 256);
  auto issue = [&](int it) {  // key block top - it into stage it % kS (an empty group past block 0)
    if (it <= top) {
      const int64_t k0 = static_cast<int64_t>(top - it) * kL;
      const int kvalid = static_cast<int>(min64(kL, p.T - k0));
      unsigned char* kv = sKV + 2 * (it % kS) * tile;
      sw_copy_tile_async<kL, Dh>(kv, k + head0 + k0 * rs, rs, kvalid, tid);
      sw_copy_tile_async<kL, Dh>(kv + tile, v + head0 + k0 * rs, rs, kvalid, tid);
      fill_colbias(colb + (it % kS) * kL, gh, k0, p.T, gref, tid);
    }
    cp_async_commit();
  };

  float O[NTD][4], m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  zero(O);
#pragma unroll
  for (int s = 0; s < kS - 1; ++s) issue(s);
  for (int it = 0; it <= top; ++it) {
    cp_async_wait<kS - 2>();  // key block top - it has landed
    fence_async_smem();
    __syncthreads();  // ... for every thread; and every warpgroup is done with the stage refilled next
    issue(it + kS - 1);
    const int m = top - it, cur = it % kS;
    if (m > diag || nvalid <= 0) continue;
    const unsigned char* Kc = sKV + 2 * cur * tile;
    float S[8][4];
    wg_scores<KTD>(S, sQ, 2 * kL, kL * wg, Kc);
    if (prescale || m == diag) fwd_logits(S, prescale, sl2, rb2, colb + cur * kL, m == diag, r0, nvalid, lane);
    wg_softmax_pv(S, O, m2, l, scale2, Kc + tile);
  }
  if (nvalid > 0)
    fwd_finish(p, O, m2, l, bh, i0, nvalid, static_cast<bf16*>(p.out) + head0 + i0 * rs, rs, true, r0, lane);
#endif
}

// Backward: one CTA of two warpgroups per (128-key block, head); warpgroup w owns keys 64w ..
// 64w+63 of the block. Query blocks of 64 from the block's first to the end through a
// cp.async pipeline of wg_bwd_stages(Dh) stages, each tile of Q and dO serving both warpgroups. Per query
// block, each warpgroup: S^T = K Q^T and dP^T = V dO^T (K-major), P^T and dS^T in registers
// (softmax_bwd_probs), dV += P^T dO and dK += dS^T Q (A from registers, B MN-major), dS^T rows to
// one of two shared buffers. The query block's dQ (64 queries x Dh) = dS K over all 128 keys runs
// in the next iteration, behind that block's dV, dK products (one barrier per query block),
// warpgroup w computing columns [w Dh/2, (w+1) Dh/2) (A and B MN-major), added to the fp32
// accumulator by TMA reductions from each warp's shared staging tile (FlashAttention-3's way: the
// warps no longer wait on atomics; BwdParams::dq_bulk), or by 16-byte atomics. 128 keys
// per CTA halve the L2 traffic of both the Q / dO tiles and the dQ additions against 64.
// kInter: the same pass over PaTH's inter-superchunk pairs (kernels/attention/path/path_bwd.cu, BwdParams::inter):
// a CTA takes two key blocks of superchunk b of a head of the group (one when the superchunk's
// block count is odd), their keys pushed to the superchunk's end (ke_hi) against the states
// X_{e_b} (xs) of one range of the query blocks after the superchunk (inter_range: long ranges
// are split over several CTAs), without a causal mask; dV and dKe are added to the group's fp32
// accumulators by atomics and dL/dX_{e_b} to dxs like dQ (TMA reductions or atomics).
// kTma (BwdParams::load_tma): thread 0 loads each stage's Q (the states with kInter), dO, lse and
// delta by TMA on the stage's mbarrier instead of every thread by cp.async: a proxy fence (before
// each dQ reduction and after the dS^T stores) waits for the thread's pending cp.async copies, so
// with cp.async the fence in the middle of an iteration waited for the stage issued at its top.
template <int Dh, bool kInter, bool kTma>
__global__ void __launch_bounds__(256, 1) softmax_bwd_wgmma_kernel(const __grid_constant__ BwdParams p) {
#if SB_WGMMA
  constexpr int NTD = Dh / 8, KTD = Dh / 16, kN = 2 * kL, DQN = Dh / 2, kS = wg_bwd_stages(Dh);
  constexpr int ktile = sw_bytes(kN, Dh), qtile = sw_bytes(kL, Dh);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  if (wg_bwd_slack(Dh) == 0 && (smem_addr(smem_raw) & 1023u) != 0) __trap();  // no room to align it
  unsigned char* const sK = wg_bwd_slack(Dh) ? align1024(smem_raw) : smem_raw;
  unsigned char* const sV = sK + ktile;
  unsigned char* const sQO = sV + ktile;        // stage s: Q at sQO + 2 s qtile, dO one tile further
  unsigned char* const sdS = sQO + 2 * kS * qtile;  // buffer it % 2: dS^T (scaled) of iteration it, [128 keys][64 queries]
  float* const sdQ = reinterpret_cast<float*>(sdS + 2 * sw_bytes(kN, kL));  // [8 warps][16][DQN], swizzled panels
  float* const stats = sdQ + 8 * 16 * DQN;                                  // [kS][3][64]
  float* const colb = stats + 3 * kS * kL;                                // [128]
  uint64_t* const full = reinterpret_cast<uint64_t*>(colb + kN);          // [kS] (kTma)
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2;
  const int r0 = 16 * warp, kr0 = kL * wg;  // this warp's rows in its warpgroup; the warpgroup's first key row
  float* const dq_stage = sdQ + (tid >> 5) * 16 * DQN;  // this warp's
  const int64_t Tp = static_cast<int64_t>(p.nb) * kL, rs = p.H * Dh, item = blockIdx.x;  // heaviest first
  // This CTA's head (bh global, lb local to the group), first key block kb0 (warpgroup w's 64 keys
  // are block kb0 + w), its query blocks qb0 .. qend - 1 and their rows: Q (q, or the states in
  // xs) and dQ.
  int64_t bh, lb = 0, xrow0 = 0;
  int kb0, qb0, qend, kvalid;
  if constexpr (kInter) {
    const int npair = (p.sc + 1) / 2;
    int64_t job;  // superchunk 0's query ranges (the most query blocks after it) first
    head_order(item, p.nbh, inter_ranges(p.nb, p.sc, p.nsc, p.qchunk) * npair, p.head_chunk, lb, job);
    bh = p.bh0 + lb;
    int sb;
    inter_range(job / npair, p.nb, p.sc, p.nsc, p.qchunk, sb, qb0, qend);
    const int j = static_cast<int>(job % npair), first = (sb + 1) * p.sc;
    kb0 = sb * p.sc + 2 * j;
    kvalid = kL * min(2, first - kb0);  // keys of earlier superchunks are all valid
    xrow0 = lb * p.xs_rows + sc_state_row(sb, Tp, static_cast<int64_t>(p.sc) * kL) - static_cast<int64_t>(first) * kL;
  } else {
    int64_t job;  // heaviest (first) key blocks first
    head_order(item, p.B * p.H, (p.nb + 1) / 2, p.head_chunk, bh, job);
    kb0 = 2 * static_cast<int>(job), qb0 = kb0, qend = p.nb;
    kvalid = static_cast<int>(min64(kN, p.T - static_cast<int64_t>(kb0) * kL));
  }
  const int64_t b = bh / p.H, h = bh % p.H, k0 = static_cast<int64_t>(kb0) * kL;
  const int64_t head0 = (b * p.T * p.H + h) * Dh;
  const int wvalid = kvalid - kr0;  // valid keys of this warpgroup
  const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
  const double gref = gh ? gh[k0] : 0.0;
  const float sl2 = p.scale * kLog2e;
  const bf16* q = static_cast<const bf16*>(kInter ? static_cast<const void*>(p.xs) : p.q);
  const bf16* dout = static_cast<const bf16*>(p.dout);
  auto q_at = [&](int64_t i0) { return kInter ? q + (xrow0 + i0) * Dh : q + head0 + i0 * rs; };  // query row i0
  const int64_t qstride = kInter ? Dh : rs;
  const bf16* kp = kInter ? reinterpret_cast<const bf16*>(p.ke_hi) + (bh * Tp + k0) * Dh
                          : static_cast<const bf16*>(p.k) + head0 + k0 * rs;

  sw_copy_async(sK, kN, Dh, kp, kInter ? Dh : rs, kvalid, tid, 256);
  sw_copy_async(sV, kN, Dh, static_cast<const bf16*>(p.v) + head0 + k0 * rs, rs, kvalid, tid, 256);
  fill_colbias(colb, gh, k0, p.T, gref, tid);
  fill_colbias(colb + kL, gh, k0 + kL, p.T, gref, tid);
  if constexpr (kTma) {
    cp_async_commit();
    if (tid == 0) {
      for (int s = 0; s < kS; ++s) mbar_init(full + s);
      fence_mbar_init();
    }
    __syncthreads();  // the barriers are initialised before any TMA load or wait
  }
  auto issue = [&](int qb, int st) {  // query block qb into stage st: Q, dO and the statistics (past nb: an empty group)
    if constexpr (kTma) {  // thread 0 arms the stage's barrier and loads; the gate biases as before
      if (qb >= qend) return;
      const int64_t i0 = static_cast<int64_t>(qb) * kL;
      unsigned char* qo = sQO + 2 * st * qtile;
      float* sst = stats + st * 3 * kL;
      if (tid == 0) {
        mbar_expect_tx(full + st, 2 * qtile + 2 * kL * 4);
#pragma unroll
        for (int pn = 0; pn < Dh / 64; ++pn) {
          if constexpr (kInter)
            tma_load_2d(qo + pn * kL * 128, &p.q_map, full + st, 64 * pn, static_cast<int>(xrow0 + i0));
          else
            tma_load_4d(qo + pn * kL * 128, &p.q_map, full + st, 64 * pn, static_cast<int>(i0), static_cast<int>(h),
                        static_cast<int>(b));
          tma_load_4d(qo + qtile + pn * kL * 128, &p.do_map, full + st, 64 * pn, static_cast<int>(i0),
                      static_cast<int>(h), static_cast<int>(b));
        }
        tma_load_1d(sst, &p.lse_map, full + st, static_cast<int>(bh * p.T + i0));
        tma_load_1d(sst + kL, &p.delta_map, full + st, static_cast<int>(bh * p.T + i0));
      }
      fill_query_bias(sst + 2 * kL, gh, i0, p.T, gref, tid);
      return;
    }
    if (qb >= qend) {
      cp_async_commit();
      return;
    }
    const int64_t i0 = static_cast<int64_t>(qb) * kL;
    const int nvalid = static_cast<int>(min64(kL, p.T - i0));
    unsigned char* qo = sQO + 2 * st * qtile;
    sw_copy_tile_async<kL, Dh>(qo, q_at(i0), qstride, nvalid, tid);
    sw_copy_tile_async<kL, Dh>(qo + qtile, dout + head0 + i0 * rs, rs, nvalid, tid);
    load_query_stats(stats + st * 3 * kL, p, bh, i0, gh, gref, tid);
    cp_async_commit();
  };

  float dK[NTD][4], dV[NTD][4];
  zero(dK);
  zero(dV);
  float kb2[2] = {0.f, 0.f}, dgk[2] = {0.f, 0.f};  // key gate bias (set after the first barrier), dg sums
  // dQ columns [wg DQN, (wg+1) DQN) of query block qb += dS K over the 128 keys, from dS^T buffer buf.
  float dQ[DQN / 8][4];
  auto issue_dq = [&](int buf) {
    zero(dQ);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk)
      wgmma_ss<1, 1>(dQ, desc_mnmajor(sdS + buf * sw_bytes(kN, kL), kN, 0, kk), desc_mnmajor(sK, kN, DQN * wg, kk));
    wg_commit();
  };
  auto add_dq = [&](int qb) {
    wg_hold(dQ);
    const int64_t i0 = static_cast<int64_t>(qb) * kL;
    const int64_t row = (kInter ? xrow0 : bh * Tp) + i0;  // of dxs or dq_acc, [rows, Dh]
    if (p.dq_bulk)
      tma_add_frag(&p.dq_map, DQN * wg, static_cast<int>(row) + r0, dQ, dq_stage, lane);
    else
      atomic_frag((kInter ? p.dxs : p.dq_acc) + row * Dh + DQN * wg, Dh, r0, dQ, 1.f, lane);
  };
#pragma unroll
  for (int s = 0; s < kS - 1; ++s) issue(qb0 + s, s);
  if constexpr (kTma) {  // K and V (the only cp.async copies) before the loop
    cp_async_wait<0>();
    fence_async_smem();
  }
  for (int qb = qb0, it = 0; qb < qend; ++qb, ++it) {
    const int cur = it % kS, dsb = it & 1;  // stage of (Q, dO); dS^T buffer
    if constexpr (kTma) {
      mbar_wait(full + cur, static_cast<uint32_t>(it / kS) & 1u);
      const int64_t i0 = static_cast<int64_t>(qb) * kL;
      if (i0 + kL > p.T) {  // the last block's padded queries: P = 0 (the 1-D statistics boxes read on
        float* sst = stats + cur * 3 * kL;  // into the next head; their Q / state rows are zeros)
        for (int c = tid; c < 2 * kL; c += blockDim.x)
          if (i0 + (c & (kL - 1)) >= p.T) sst[c] = c < kL ? INFINITY : 0.f;
      }
    } else {
      cp_async_wait<kS - 2>();
      fence_async_smem();
    }
    __syncthreads();  // stage `cur` and dS^T of the previous query block are complete; the previous stage is free
    issue(qb + kS - 1, (it + kS - 1) % kS);
    if (it == 0) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) kb2[rr] = colb[kr0 + r0 + g + 8 * rr];
    }
    const unsigned char* Qc = sQO + 2 * cur * qtile;
    const unsigned char* dOc = Qc + qtile;
    const int64_t i0 = static_cast<int64_t>(qb) * kL;
    // Softmax: warpgroup 1 has nothing to do on the block's first query block (all its keys come
    // later). Inter: a warpgroup without a key block (odd superchunk) has nothing to do.
    const bool active = kInter ? wvalid > 0 : qb >= qb0 + wg;

    // The previous query block's dQ is issued behind this block's dV, dK (no barrier between them).
    uint32_t sa[4][4] = {};
    if (active) {
      float Pt[8][4], dSt[8][4];
      zero(Pt);
      zero(dSt);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < KTD; ++kk) wgmma_ss<0, 0>(Pt, desc_kmajor(sK, kN, kr0, kk), desc_kmajor(Qc, kL, 0, kk));
#pragma unroll
      for (int kk = 0; kk < KTD; ++kk) wgmma_ss<0, 0>(dSt, desc_kmajor(sV, kN, kr0, kk), desc_kmajor(dOc, kL, 0, kk));
      wg_commit();
      wg_wait<0>();
      wg_hold(Pt);
      wg_hold(dSt);
      const float* st = stats + cur * 3 * kL;
      const bool diag = !kInter && qb == qb0 + wg;
      if (gh)
        softmax_bwd_probs<true>(Pt, dSt, st, diag, r0, sl2, p.scale, kb2, dgk, lane);
      else
        softmax_bwd_probs<false>(Pt, dSt, st, diag, r0, sl2, p.scale, kb2, dgk, lane);
      if (gh) add_column_sums(p.dg + bh * Tp + i0, dSt, 1.f / p.scale, p.T - i0, lane);  // queries' share: + sum over keys

      uint32_t pa[4][4], unused[4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        pack_a(pa[kk], unused, Pt, kk, 1.f, false);
        pack_a(sa[kk], unused, dSt, kk, 1.f, false);
      }
      wg_fence();
      wg_product_rs(dV, pa, dOc);
      wg_product_rs(dK, sa, Qc);
      wg_commit();
    }
    if (it > 0) {
      issue_dq(dsb ^ 1);
      wg_wait<0>();
      add_dq(qb - 1);
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) sw_store_a(sdS + dsb * sw_bytes(kN, kL), kN, kr0 + r0, kk, sa[kk], lane);
    fence_async_smem();
    wg_wait<0>();  // dV, dK (still pending on the first query block): their A registers are reused next
    wg_hold(dK);
    wg_hold(dV);
  }
  __syncthreads();  // the last query block's dS^T
  issue_dq((qend - 1 - qb0) & 1);
  wg_wait<0>();
  add_dq(qend - 1);
  if (p.dq_bulk && lane == 0) bulk_wait_read();  // the staging tile stays valid until read

  if constexpr (kInter) {
    if (wvalid > 0) {
      const int64_t kw = (lb * Tp + k0 + kr0) * Dh;
      atomic_frag(p.dke_acc + kw, Dh, r0, dK, 1.f, lane);
      atomic_frag(p.dv_acc + kw, Dh, r0, dV, 1.f, lane);
    }
  } else {
    const int64_t kw = head0 + (k0 + kr0) * rs;
    store_frag_global(static_cast<bf16*>(p.dk) + kw, rs, true, r0, wvalid, dK, 1.f, lane);
    store_frag_global(static_cast<bf16*>(p.dv) + kw, rs, true, r0, wvalid, dV, 1.f, lane);
  }
  if (gh) {  // the keys' share: - sum over queries of dS
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const float sum = quad_sum(dgk[rr]);
      const int row = r0 + g + 8 * rr;
      if ((lane & 3) == 0 && row < wvalid) atomicAdd(p.dg + bh * Tp + k0 + kr0 + row, -sum / p.scale);
    }
  }
#endif
}

// Launches a wgmma kernel for Dh = 64 or 128 (kernel64 / kernel128; two warpgroups per CTA) with
// its shared memory.
template <typename P>
void launch_wgmma(void (*kernel64)(P), void (*kernel128)(P), int smem64, int smem128, const P& p, int64_t Dh,
                  int64_t grid, cudaStream_t stream) {
  auto* kernel = Dh == 64 ? kernel64 : kernel128;
  const int smem = Dh == 64 ? smem64 : smem128;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<static_cast<unsigned>(grid), 256, smem, stream>>>(p);
  SB_CUDA_CHECK_LAUNCH();
}

// Launches the wgmma backward (softmax, or PaTH's inter pass with kInter: its queries are the states
// xs) at Dh 64 or 128 on `grid` CTAs, adding dQ into the fp32 [dq_rows, Dh] dq (with_dq_map), with
// the TMA loads where with_load_maps keeps p.load_tma, else with cp.async.
template <bool kInter>
void launch_bwd_wgmma(const BwdParams& p0, float* dq, int64_t dq_rows, int64_t Dh, int64_t grid,
                      cudaStream_t stream) {
  const BwdParams p = with_load_maps(with_dq_map(p0, dq, dq_rows, Dh), Dh, kInter);
  if (p.load_tma)
    launch_wgmma(softmax_bwd_wgmma_kernel<64, kInter, true>, softmax_bwd_wgmma_kernel<128, kInter, true>,
                 wg_bwd_smem_bytes(64), wg_bwd_smem_bytes(128), p, Dh, grid, stream);
  else
    launch_wgmma(softmax_bwd_wgmma_kernel<64, kInter, false>, softmax_bwd_wgmma_kernel<128, kInter, false>,
                 wg_bwd_smem_bytes(64), wg_bwd_smem_bytes(128), p, Dh, grid, stream);
}

}  // namespace sb::cuda::detail
