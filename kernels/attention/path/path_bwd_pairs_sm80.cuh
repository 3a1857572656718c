// path_bwd_pairs_sm80.cuh: the fused causal PaTH attention backward kernel over the pairs (query
// block n, key block m < n) (internal, instantiated in kernels/attention/path/path_bwd.cu; the own blocks m = n
// are kernels/attention/path/path_bwd_own.cu's, softmax attention has its own key-centric kernel). With superchunks (p.sc),
// key blocks in earlier superchunks see one query state per superchunk and keys pushed to its end
// (plain attention per pair; kernels/attention/path/path_superchunk.cu turns their gradients back). Persistent CTAs take
// the (query block, head) items with n > 0 of one group of heads (p.nbh rows from p.bh0) from a
// counter, heaviest first (path_item); a query block of 16 * warps rows recomputes its
// probabilities from lse and its transported queries X_m (m = n-1 .. 0) from per-CTA checkpoints
// (segments of `seg` blocks, kernels/DESIGN.md). Key blocks are then visited left to right carrying
// G = dL/dX (the adjoint of the transports): per
// block, dV += P^T dO, dKt += dS^T X and the block-product gradient (dense dP += X^T G, or factored
// dW, dY) go to the group's fp32 accumulators by atomics; G <- G P^T + dS Kt. The final G, dL/dQt
// of the queries pulled back to their block's start, goes to p.dqt for the own-block kernel.
// Everything is in unscaled-query space: dS_raw = scale * dS. With p.inter (bf16 on sm_90) the
// pairs with earlier superchunks move to softmax_bwd_wgmma_kernel<Dh, true>: a first launch
// (inter = 1) only writes the states X_{e_b}, a second (inter = 2) reads them back and adds their
// gradients from dxs instead of visiting those keys.
#pragma once
#include <cmath>

#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"
#include "kernels/attention/path/path_bwd_parts.cuh"

namespace sb::cuda::detail {

struct BwdSmem : KeyTiles {
  Tile Q, dO;
  Tile X, G, P, dS, A, dA;
  float* colb = nullptr;       // [2][64]
  int bytes = 0;
};

// The item start's W and Y (the pull-back, split) overlaid on `stages` pipeline stages: the pushed
// keys and values (with_kv) and the transport operands (C dense; W, Y factored, back to back:
// superchunk_tile). Leaves the carver after the larger of the two.
__host__ __device__ inline void carve_stages(Carve& cv, BwdSmem& s, int Dh, bool f32, bool dense, int stages,
                                             bool with_kv) {
  const int start = cv.off;
  s.W = cv.tile(kL, Dh, true);
  s.Y = cv.tile(kL, Dh, true);
  const int pull_back_end = cv.off;
  cv.off = start;
  if (with_kv) s.Kb = cv.tile(kL, Dh, f32), s.Vb = cv.tile(kL, Dh, f32);
  if (dense) s.Cb = cv.tile(Dh, Dh, true);
  else s.Wb = cv.tile(kL, Dh, true), s.Yb = cv.tile(kL, Dh, true);
  s.stage_bytes = cv.off - start;
  cv.off = start + stages * s.stage_bytes;
  if (cv.off < pull_back_end) cv.off = pull_back_end;
}

// Q and dO, the stages, the per-pair tiles X, G, P, dS, and for factored transports A and dA
// (-G Y^T and X W^T).
__host__ __device__ inline BwdSmem bwd_smem(unsigned char* base, int Dh, bool f32, bool dense, int Bq,
                                            int stages) {
  Carve cv{base, 0};
  BwdSmem s;
  s.Q = cv.tile(Bq, Dh, f32);
  s.dO = cv.tile(Bq, Dh, f32);
  carve_stages(cv, s, Dh, f32, dense, stages, true);
  s.X = cv.tile(Bq, Dh, f32);
  s.G = cv.tile(Bq, Dh, f32);
  s.P = cv.tile(Bq, kL, f32);
  s.dS = cv.tile(Bq, kL, f32);
  if (!dense) {
    s.A = cv.tile(Bq, kL, true);  // -G Y^T
    s.dA = cv.tile(Bq, kL, f32);  // X W^T
  }
  s.colb = cv.floats(2 * kL);
  s.bytes = cv.off;
  return s;
}

// The states launch (inter = 1, path_bwd_kernel<Dh, false, true>) needs only Q and the stages
// without keys and values: a third of the full layout at Dh = 64, so several CTAs share an SM.
__host__ __device__ inline BwdSmem states_smem(unsigned char* base, int Dh, bool dense, int Bq, int stages) {
  Carve cv{base, 0};
  BwdSmem s;
  s.Q = cv.tile(Bq, Dh, false);
  carve_stages(cv, s, Dh, false, dense, stages, false);
  s.bytes = cv.off;
  return s;
}

// Starts loading block j's operands into pipeline stage st: the transport operands (C_j dense;
// W_j, Y_j factored) when j > 0, and with `step` also the pushed keys, values and gate bias.
template <int Dh, bool kBf16>
__device__ __forceinline__ void issue_block(const BwdSmem& sm, const BwdParams& p, int64_t bh, int64_t head0,
                                            int64_t rs, const double* gh, double gref, int j, int st, bool step,
                                            bool inter, int tid) {
  const int64_t k0 = static_cast<int64_t>(j) * kL, Tp = static_cast<int64_t>(p.nb) * kL;
  const int sb = st * sm.stage_bytes;
  if (j > 0 && !inter) {
    if (p.dense) {
      load_planes_tile(shifted(sm.Cb, sb), Dh, Dh, p.c_hi, p.c_lo, (bh * p.nb + j) * Dh * Dh, tid);
    } else {
      load_tile(shifted(sm.Wb, sb), kL, Dh, p.w + head0 + k0 * rs, rs, false, kL, tid, blockDim.x);
      load_planes_tile(shifted(sm.Yb, sb), kL, Dh, p.y_hi, p.y_lo, (bh * Tp + k0) * Dh, tid);
    }
  }
  if (step) {
    load_planes_tile(shifted(sm.Kb, sb), kL, Dh, inter ? p.ke_hi : p.kt_hi, inter ? p.ke_lo : p.kt_lo,
                     (bh * Tp + k0) * Dh, tid);
    load_input_tile<kBf16>(shifted(sm.Vb, sb), kL, Dh, input_at<kBf16>(p.v, head0 + k0 * rs), rs, kL, tid);
    fill_colbias(sm.colb + st * kL, gh, k0, p.T, gref, tid);
  }
  cp_async_commit();
}

// Pipeline bookkeeping: before using stage `cur`, start the next block's loads (if any) into the
// other stage, then wait for `cur`. One stage: load and wait in place.
template <int Dh, bool kBf16>
__device__ __forceinline__ int pipeline_next(const BwdSmem& sm, const BwdParams& p, int64_t bh, int64_t head0,
                                             int64_t rs, const double* gh, double gref, int it, int j, int jnext,
                                             bool has_next, bool step, bool inter, int tid) {
  if (p.stages == 2) {
    const int cur = it & 1;
    if (has_next)
      issue_block<Dh, kBf16>(sm, p, bh, head0, rs, gh, gref, jnext, cur ^ 1, step, inter, tid);
    else
      cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    return cur;
  }
  issue_block<Dh, kBf16>(sm, p, bh, head0, rs, gh, gref, j, 0, step, inter, tid);
  cp_async_wait<0>();
  __syncthreads();
  return 0;
}

// Loads Cs_b (synchronously: the pipeline is idle between superchunks).
template <int Dh>
__device__ __forceinline__ Tile load_sc(const BwdSmem& sm, const BwdParams& p, int64_t bh, int b, int tid) {
  const Tile t = superchunk_tile(sm, Dh, p.dense, 0);
  __syncthreads();
  load_planes_tile(t, Dh, Dh, p.cs_hi, p.cs_lo, (bh * p.nsc + b) * Dh * Dh, tid);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  return t;
}

// Item t of a launch -> (query block qb, local head lb), heaviest first: the persistent CTAs take
// items in this order from p.tickets, so the last ones to start are the cheapest. With the wgmma
// pass the blocks' order is p.item_order (launch_path_item_order: by the own superchunk's chain and
// key blocks and the phases of the earlier ones); otherwise every earlier key block is visited: by
// query block, from the last.
__device__ __forceinline__ void path_item(int64_t t, const BwdParams& p, int& qb, int64_t& lb) {
  lb = t % p.nbh;
  const int r = static_cast<int>(t / p.nbh);
  qb = p.item_order ? p.item_order[r] : p.nqb - 1 - r;
}

// kStates: the states launch (p.inter = 1, bf16 only): the chains and their states X_{e_b}, in the
// compact layout states_smem, at several CTAs per SM.
template <int Dh, bool kF32, bool kStates = false>
__global__ void __launch_bounds__(128, kStates ? 3 : 1) path_bwd_kernel(const BwdParams p) {
  static_assert(!(kStates && kF32), "the states launch is bf16 only");
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  constexpr bool kCall = Dh <= 64;  // the item start's W tile load out of line (load_w_tile)
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr bool f32 = kF32;  // split every product (fp32 inputs); bf16 inputs are exact in one plane
  constexpr bool bf = !kF32;  // element type of q, k, v, out, dout, dq
  // G's block transports: a gradient chain of at most sc - 1 blocks, so one bf16 plane per operand
  // with bf16 inputs (the X chains recompute forward values: always split).
  constexpr bool gsplit = f32;
  const int warps = p.warps, Bq = 16 * warps, kt = warps;
  const BwdSmem sm = kStates ? states_smem(smem_raw, Dh, p.dense, Bq, p.stages)
                             : bwd_smem(smem_raw, Dh, f32, p.dense, Bq, p.stages);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3, r0 = 16 * warp;
  const int64_t Tp = static_cast<int64_t>(p.nb) * kL, rs = p.H * Dh;
  const int64_t nitems = static_cast<int64_t>(p.nqb) * p.nbh;
  const float sl2 = p.scale * kLog2e;
  float* slots = p.scratch ? p.scratch + static_cast<int64_t>(blockIdx.x) * p.slot_floats : nullptr;

  // Tickets: a CTA takes its next item when it is done with this one (taking it as this one starts
  // would hide the atomic's latency, but reserves items for CTAs still busy: measured 10% slower at
  // (2,8192,16,128)). The two slots let thread 0 write the next while others may read this one.
  __shared__ int ticket[2];
  for (int par = 0;; par ^= 1) {
    if (tid == 0) ticket[par] = static_cast<int>(atomicAdd(p.tickets, 1u));
    __syncthreads();
    const int64_t item = ticket[par];
    if (item >= nitems) break;
    // bh (global) indexes inputs, factors, lse, delta, gcum and dg; lb (local) the accumulators.
    int qb = 0;
    int64_t lb = 0;
    path_item(item, p, qb, lb);
    const int64_t bh = p.bh0 + lb, b = bh / p.H, h = bh % p.H;
    const int64_t i0 = static_cast<int64_t>(qb) * Bq, head0 = (b * p.T * p.H + h) * Dh;
    const int n = static_cast<int>(i0 / kL), q0 = static_cast<int>(i0 % kL);
    const int64_t kn0 = static_cast<int64_t>(n) * kL;
    if (kStates ? n < p.sc : n == 0) continue;  // no earlier superchunk (states) / key block
    const int nvalid = static_cast<int>(min64(Bq, p.T - i0));
    const int kvalid = static_cast<int>(min64(kL, p.T - kn0));
    const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
    const double gref = gh ? gh[kn0] : 0.0;
    float lse2[2], dl[2], rb2[2], dgr[2] = {0.f, 0.f};
    load_row_stats(lse2, dl, rb2, p, bh, i0, r0, g, gh, gref);

    __syncthreads();  // the previous item is done with shared memory
    load_input_tile<bf>(sm.Q, Bq, Dh, input_at<bf>(p.q, head0 + i0 * rs), rs, nvalid, tid);
    if (!kStates) load_input_tile<bf>(sm.dO, Bq, Dh, input_at<bf>(p.dout, head0 + i0 * rs), rs, nvalid, tid);
    load_w_tile<Dh, kCall>(sm.W, p.w + head0 + kn0 * rs, rs, kvalid, tid);
    load_planes_tile(sm.Y, kL, Dh, p.y_hi, p.y_lo, (bh * Tp + kn0) * Dh, tid);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float X[NTD][4], G[NTD][4];
    zero(G);
    {  // Qt = Q - lower(Q W^T) Y: the queries pulled back to the block start
      float A[8][4];
      zero(A);
      mma_sA<8, false, BL::NK>(A, sm.Q, r0, 0, KTD, sm.W, 0, 0, true, lane);
      mask_lower(A, q0 + r0, lane);
      load_frag_global(X, input_at<bf>(p.q, head0 + i0 * rs), rs, bf, r0, nvalid, lane);
      mma_rA<4, NTD, BL::KN>(X, A, -1.f, sm.Y, 0, 0, true, lane);
    }

    // ---- key blocks m < n, left to right (n > 0 for every item here) ----
    __syncthreads();  // the pull-back's W and Y tiles alias the pipeline buffers
    const bool two = p.stages == 2;
    // Transports X through blocks hi, hi-1, .., lo+1 (pipelined), saving X_m into slot
    // slot_of(m) first when that is >= 0.
    auto chain = [&](int hi, int lo, auto slot_of) {
      if (two && hi > lo) issue_block<Dh, bf>(sm, p, bh, head0, rs, gh, gref, hi, 0, false, false, tid);
      for (int j = hi, it = 0; j >= lo; --j, ++it) {
        const int64_t slot = slot_of(j);
        if (slot >= 0) save_state<bf>(X, slots, slot, Bq, Dh, warp, lane);
        if (j == lo) break;
        const int cur = pipeline_next<Dh, bf>(sm, p, bh, head0, rs, gh, gref, it, j, j - 1, j - 1 > lo,
                                                     false, false, tid);
        transport_rows<Dh>(X, sm.Cb, sm.Wb, sm.Yb, cur * sm.stage_bytes, p.dense, lane);
        __syncthreads();
      }
    };
    const int a = p.sc > 0 ? n / p.sc : 0, s_a = a * p.sc;
    auto sc_slot = [&](int b) -> int64_t { return p.ck_slots + p.sc + b; };
    const int seg = p.seg, nseg = (n + seg - 1) / seg;
    // Rows of X_{e_b} / dL/dX_{e_b} in xs / dxs (inter modes).
    const int64_t S = static_cast<int64_t>(p.sc) * kL;
    auto xs_row = [&](int b) { return lb * p.xs_rows + sc_state_row(b, Tp, S) - (b + 1) * S + i0; };
    // All 64 rows, as the forward writes them: padded queries' states are zero (zero-filled Q rows
    // stay zero through the row-wise transports), so the wgmma pass's TMA loads read finite rows.
    if constexpr (kStates) {  // X_{e_{a-1}}, then X_{e_{b-1}} = X_{e_b} W_b, straight to xs (bf16)
      chain(n - 1, s_a - 1, [](int) -> int64_t { return -1; });
      store_frag_global(p.xs + xs_row(a - 1) * Dh, Dh, true, r0, kL, X, 1.f, lane);
      for (int b = a - 1; b >= 1; --b) {
        const Tile cs = load_sc<Dh>(sm, p, bh, b, tid);
        transport_rows<Dh>(X, cs, cs, cs, 0, true, lane);
        store_frag_global(p.xs + xs_row(b - 1) * Dh, Dh, true, r0, kL, X, 1.f, lane);
      }
      continue;
    }
    if (a > 0 && p.inter == 2) {  // own superchunk only: X_{e_b} are in xs (the states launch)
      chain(n - 1, s_a, [&](int m) -> int64_t { return p.ck_slots + (m - s_a); });
    } else if (a > 0) {  // superchunks: n's own from s_a, earlier ones b < a by X_{e_b}
      chain(n - 1, s_a - 1, [&](int m) -> int64_t { return m >= s_a ? p.ck_slots + (m - s_a) : sc_slot(a - 1); });
      for (int b = a - 1; b >= 1; --b) {  // X_{e_{b-1}} = X_{e_b} W_b
        const Tile cs = load_sc<Dh>(sm, p, bh, b, tid);
        transport_rows<Dh>(X, cs, cs, cs, 0, true, lane);
        save_state<bf>(X, slots, sc_slot(b - 1), Bq, Dh, warp, lane);
      }
    } else if (nseg > 1) {  // pass 1: checkpoints X_top(s) of every segment s
      chain(n - 1, seg - 1, [&](int m) -> int64_t {
        const int s = m / seg;
        return m == min(n, (s + 1) * seg) - 1 ? s : -1;
      });
    }
    // Phases, left to right: superchunks b < a (inter) then the own one from s_a; or segments.
    const int nphase = a > 0 ? a + 1 : nseg;
    for (int ph = 0; ph < nphase; ++ph) {
      const bool inter = ph < a;
      const int lo = a > 0 ? (inter ? ph * p.sc : s_a) : ph * seg;
      const int hi = inter ? lo + p.sc - 1 : (a > 0 ? n - 1 : min(n, lo + seg) - 1);
      if (hi < lo) continue;
      if (inter) {
        if (p.inter == 2)  // the same bf16 values the states launch computed (bf16 mode)
          load_frag_global(X, p.xs + xs_row(ph) * Dh, Dh, true, r0, nvalid, lane);
        else
          load_state<bf>(X, slots, sc_slot(ph), Bq, Dh, warp, lane);
        if (ph > 0) {  // G = dL/dX_{e_{b-1}}: dW_b += X_{e_b}^T G, G <- G W_b^T (= G - G Cs_b^T)
          const Tile cs = load_sc<Dh>(sm, p, bh, ph, tid);
          store_frag(sm.X, r0, X, 1.f, lane);
          store_frag(sm.G, r0, G, 1.f, lane);
          __syncthreads();
          cta_atb_atomic<NTD>(p.dws_acc + (lb * p.nsc + ph) * Dh * Dh, Dh, Dh / 16, sm.X, sm.G, kt, 1.f, f32, warp,
                              warps, lane);
          float Tm[NTD][4];
          zero(Tm);
          mma_rA<KTD, NTD, BL::NK>(Tm, G, 1.f, cs, 0, 0, true, lane);
#pragma unroll
          for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) G[nt][e] -= Tm[nt][e];
          __syncthreads();  // the Cs_b tile and X / G tiles are reused
        }
        if (p.inter == 2) {  // G += dL/dX_{e_b} over this superchunk's keys (the wgmma pass)
          float D[NTD][4];
          load_frag_global(D, p.dxs + xs_row(ph) * Dh, Dh, false, r0, nvalid, lane);
#pragma unroll
          for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) G[nt][e] += D[nt][e];
          continue;
        }
      } else if (a == 0) {  // this segment's states X_hi .. X_lo
        if (nseg > 1) load_state<bf>(X, slots, lo / seg, Bq, Dh, warp, lane);
        chain(hi, lo, [&](int m) -> int64_t { return p.ck_slots + (m - lo); });
      }
      // Key blocks lo .. hi. Own superchunk / segment: X_m from slot ck_slots + (m - lo), pushed
      // keys Kt_m and the block transports' adjoints. Earlier superchunk (inter): X = X_{e_b}
      // fixed, keys pushed to the superchunk's end (Ke_m), no transports.
      if (two) issue_block<Dh, bf>(sm, p, bh, head0, rs, gh, gref, lo, 0, true, inter, tid);
      for (int m = lo, it = 0; m <= hi; ++m, ++it) {
        const int64_t k0 = static_cast<int64_t>(m) * kL;
        if (!inter) load_state<bf>(X, slots, p.ck_slots + (m - lo), Bq, Dh, warp, lane);
        const int cur = pipeline_next<Dh, bf>(sm, p, bh, head0, rs, gh, gref, it, m, m + 1, m < hi, true,
                                                     inter, tid);
        const int cb = cur * sm.stage_bytes;
        const Tile Kc = shifted(sm.Kb, cb), Vc = shifted(sm.Vb, cb);
        const float* colb = sm.colb + cur * kL;

        float S[8][4], dS[8][4];
        zero(S);
        zero(dS);
        mma_rA<KTD, 8, BL::NK>(S, X, 1.f, Kc, 0, 0, f32, lane);
        mma_sA<8, false, BL::NK>(dS, sm.dO, r0, 0, KTD, Vc, 0, 0, f32, lane);  // dP = dO V^T
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int rr = e >> 1;
            S[nt][e] = fast_exp2(S[nt][e] * sl2 + rb2[rr] - colb[nt * 8 + 2 * tq + (e & 1)] - lse2[rr]);
            dS[nt][e] = S[nt][e] * (dS[nt][e] - dl[rr]);
            dgr[rr] += dS[nt][e];
          }
        if (gh) add_column_sums(p.dg + bh * Tp + k0, dS, -1.f, kL, lane);
        store_frag(sm.P, r0, S, 1.f, lane);
        store_frag(sm.dS, r0, dS, p.scale, lane);
        store_frag(sm.X, r0, X, 1.f, lane);
        const bool tr = !inter && m > 0;  // a block transport precedes this block's state
        if (tr) {
          store_frag(sm.G, r0, G, 1.f, lane);
          if (!p.dense) {
            float T2[8][4];
            zero(T2);
            mma_rA<KTD, 8, BL::NK>(T2, G, 1.f, shifted(sm.Yb, cb), 0, 0, gsplit, lane);  // G Y^T
            store_frag(sm.A, r0, T2, -1.f, lane);
            zero(T2);
            mma_rA<KTD, 8, BL::NK>(T2, X, 1.f, shifted(sm.Wb, cb), 0, 0, f32, lane);  // X W^T
            store_frag(sm.dA, r0, T2, 1.f, lane);
          }
        }
        __syncthreads();

        // CTA-wide products over the query rows, into the accumulators.
        cta_atb_atomic<NTD>(p.dv_acc + (lb * Tp + k0) * Dh, Dh, 4, sm.P, sm.dO, kt, 1.f, f32, warp, warps, lane);
        cta_atb_atomic<NTD>((inter ? p.dke_acc : p.dkt_acc) + (lb * Tp + k0) * Dh, Dh, 4, sm.dS, sm.X, kt, 1.f, f32,
                            warp, warps, lane);
        if (tr) {
          if (p.dense) {
            cta_atb_atomic<NTD>(p.dp_acc + (lb * p.nb + m) * Dh * Dh, Dh, Dh / 16, sm.X, sm.G, kt, 1.f, f32, warp,
                                warps, lane);
          } else {  // dW -= (G Y^T)^T X,  dY -= (X W^T)^T G
            cta_atb_atomic<NTD>(p.dw_acc + (lb * Tp + k0) * Dh, Dh, 4, sm.A, sm.X, kt, 1.f, f32, warp, warps,
                                lane);
            cta_atb_atomic<NTD>(p.dy_acc + (lb * Tp + k0) * Dh, Dh, 4, sm.dA, sm.G, kt, -1.f, f32, warp, warps,
                                lane);
          }
          // G <- G P_m^T
          if (p.dense) {
            float Tm[NTD][4];
            zero(Tm);
            mma_rA<KTD, NTD, BL::NK>(Tm, G, 1.f, shifted(sm.Cb, cb), 0, 0, gsplit, lane);  // G C^T
#pragma unroll
            for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) G[nt][e] -= Tm[nt][e];
          } else {
            mma_sA<NTD, false, BL::KN>(G, sm.A, r0, 0, 4, shifted(sm.Wb, cb), 0, 0, gsplit, lane);  // G += (-G Y^T) W
          }
        }
        mma_sA<NTD, false, BL::KN>(G, sm.dS, r0, 0, 4, Kc, 0, 0, f32, lane);  // G += dS_raw Kt (or Ke)
        __syncthreads();  // stage `cur` and the P / dS / X / G tiles are reused next
      }
    }

    // ---- G = dL/dQt for the own-block kernel; the pairs' share of the gate's row sums ----
    if constexpr (!kStates) {
      store_frag_global(p.dqt + (lb * Tp + i0) * Dh, Dh, false, r0, nvalid, G, 1.f, lane);
      if (gh) {
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const float sum = quad_sum(dgr[rr]);
          const int row = r0 + g + 8 * rr;
          if (tq == 0 && row < nvalid) atomicAdd(p.dg + bh * Tp + i0 + row, sum);
        }
      }
    }
  }
}

}  // namespace sb::cuda::detail
