// attn_bwd_kernel.cuh: the fused causal attention backward kernel (internal), instantiated for
// PaTH (path_attention_bwd.cu) and softmax attention (softmax_attention.cu). Persistent CTAs walk
// (query block, head) items heaviest first; a query block of 16 * warps rows recomputes its
// probabilities from lse and, for PaTH, its transported queries X_m (m = n-1 .. 0) from per-CTA
// checkpoints (segments of `seg` blocks, see NOTES.md). Key blocks are then visited left to right
// carrying G = dL/dX (the adjoint of the transports): per block, dV += P^T dO, dKt += dS^T X and
// the block-product gradient (dense dP += X^T G, or factored dW, dY) go to fp32 accumulators by
// atomics; G <- G P^T + dS Kt. The own block then yields dq (written directly) and the own-block
// terms of dK, dV, dW, dY, dZ. Everything is in unscaled-query space: dS_raw = scale * dS.
#pragma once
#include <cmath>

#include "kernels/attn_common.cuh"
#include "kernels/attn_internal.hpp"

namespace sb::cuda::detail {

struct BwdSmem {
  Tile Q, dO, K, V, W, Y, C, X, Z, G, P, dS, A, dA;
  float* colb = nullptr;
  int bytes = 0;
};

__host__ __device__ inline BwdSmem bwd_smem(unsigned char* base, int Dh, bool f32, bool path, bool dense, int Bq) {
  Carve cv{base, 0};
  BwdSmem s;
  s.Q = cv.tile(Bq, Dh, f32);
  s.dO = cv.tile(Bq, Dh, f32);
  s.K = cv.tile(kL, Dh, f32);
  s.V = cv.tile(kL, Dh, f32);
  if (path) {
    int start = cv.off;  // W, Y (own block, factored chain) | C (dense chain)
    s.W = cv.tile(kL, Dh, true);
    s.Y = cv.tile(kL, Dh, true);
    int end = cv.off;
    cv.off = start;
    if (dense) s.C = cv.tile(Dh, Dh, true);
    cv.off = cv.off > end ? cv.off : end;
    start = cv.off;  // X (chain) | Z (own block)
    s.X = cv.tile(Bq, Dh, f32);
    end = cv.off;
    cv.off = start;
    s.Z = cv.tile(kL, kL, f32);
    cv.off = cv.off > end ? cv.off : end;
    s.G = cv.tile(Bq, Dh, f32);
  }
  s.P = cv.tile(Bq, kL, f32);
  s.dS = cv.tile(Bq, kL, f32);
  if (path) {
    s.A = cv.tile(Bq, kL, true);  // -G Y^T (factored chain) | A (own block)
    s.dA = cv.tile(Bq, kL, f32);  // X W^T (factored chain) | dA (own block)
  }
  s.colb = cv.floats(kL);
  s.bytes = cv.off;
  return s;
}

// Per-thread slice of a query state (16 x Dh per warp) in the CTA's scratch slot `slot`.
template <int NTD>
__device__ __forceinline__ void save_state(const float (&X)[NTD][4], float* base, int64_t slot, int Bq, int Dh,
                                           int warp, int lane) {
  float* p = base + slot * Bq * Dh;
#pragma unroll
  for (int nt = 0; nt < NTD; ++nt)
    *reinterpret_cast<float4*>(p + ((warp * NTD + nt) * 32 + lane) * 4) = make_float4(X[nt][0], X[nt][1], X[nt][2], X[nt][3]);
}
template <int NTD>
__device__ __forceinline__ void load_state(float (&X)[NTD][4], const float* base, int64_t slot, int Bq, int Dh,
                                           int warp, int lane) {
  const float* p = base + slot * Bq * Dh;
#pragma unroll
  for (int nt = 0; nt < NTD; ++nt) {
    const float4 v = *reinterpret_cast<const float4*>(p + ((warp * NTD + nt) * 32 + lane) * 4);
    X[nt][0] = v.x, X[nt][1] = v.y, X[nt][2] = v.z, X[nt][3] = v.w;
  }
}

// Loads the transport operands of block m (C_m dense; W_m, Y_m factored) into shared memory.
template <int Dh>
__device__ __forceinline__ void load_transport(const BwdSmem& sm, const BwdParams& p, int64_t bh, int64_t head0,
                                               int64_t rs, int m, int tid) {
  const int64_t k0 = static_cast<int64_t>(m) * kL, Tp = static_cast<int64_t>(p.nb) * kL;
  if (p.dense) {
    load_tile(sm.C, Dh, Dh, p.c + (bh * p.nb + m) * Dh * Dh, Dh, false, Dh, tid, blockDim.x);
  } else {
    load_tile(sm.W, kL, Dh, p.w + head0 + k0 * rs, rs, false, kL, tid, blockDim.x);
    load_tile(sm.Y, kL, Dh, p.y + (bh * Tp + k0) * Dh, Dh, false, kL, tid, blockDim.x);
  }
}

// X <- X P_m with the operands of block m already in shared memory (split precision).
template <int Dh>
__device__ __forceinline__ void transport_rows(float (&X)[Dh / 8][4], const BwdSmem& sm, bool dense, int lane) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  if (dense) {
    float Tm[NTD][4];
    zero(Tm);
    mma_rA<KTD, NTD, BL::KN>(Tm, X, 1.f, sm.C, 0, 0, true, lane);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) X[nt][e] -= Tm[nt][e];
  } else {
    float T1[8][4];
    zero(T1);
    mma_rA<KTD, 8, BL::NK>(T1, X, 1.f, sm.W, 0, 0, true, lane);
    mma_rA<4, NTD, BL::KN>(X, T1, -1.f, sm.Y, 0, 0, true, lane);
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

template <int Dh, bool kPath, bool kF32>
__global__ void __launch_bounds__(128) attn_bwd_kernel(const BwdParams p) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr bool f32 = kF32;  // split every product (fp32 inputs); bf16 inputs are exact in one plane
  constexpr bool bf = !kF32;  // element type of q, k, v, out, dout, dq
  const int warps = p.warps, Bq = 16 * warps, kt = warps;
  const BwdSmem sm = bwd_smem(smem_raw, Dh, f32, kPath, p.dense, Bq);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3, r0 = 16 * warp;
  const int64_t BH = p.B * p.H, Tp = static_cast<int64_t>(p.nb) * kL, rs = p.H * Dh;
  const int64_t nitems = static_cast<int64_t>(p.nqb) * BH;
  constexpr size_t esz = bf ? 2 : 4;
  auto at = [&](const void* base, int64_t elem) {
    return static_cast<const void*>(static_cast<const unsigned char*>(base) + elem * esz);
  };
  const float sl2 = p.scale * kLog2e;
  float* slots = p.scratch ? p.scratch + static_cast<int64_t>(blockIdx.x) * p.slot_floats : nullptr;

  for (int64_t item = blockIdx.x; item < nitems; item += gridDim.x) {
    const int qb = p.nqb - 1 - static_cast<int>(item / BH);
    const int64_t bh = item % BH, b = bh / p.H, h = bh % p.H;
    const int64_t i0 = static_cast<int64_t>(qb) * Bq, head0 = (b * p.T * p.H + h) * Dh;
    const int n = static_cast<int>(i0 / kL), q0 = static_cast<int>(i0 % kL);
    const int64_t kn0 = static_cast<int64_t>(n) * kL;
    const int nvalid = static_cast<int>(min64(Bq, p.T - i0));
    const int kvalid = static_cast<int>(min64(kL, p.T - kn0));
    const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
    const double gref = gh ? gh[kn0] : 0.0;
    float lse2[2], dl[2], rb2[2], dgr[2] = {0.f, 0.f};
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int64_t i = i0 + r0 + g + 8 * rr;
      const bool ok = i < p.T;
      lse2[rr] = ok ? p.lse[bh * p.T + i] * kLog2e : INFINITY;  // padded rows: P = 0
      dl[rr] = ok ? p.delta[bh * p.T + i] : 0.f;
      rb2[rr] = (gh && ok) ? static_cast<float>(gh[i] - gref) * kLog2e : 0.f;
    }

    __syncthreads();  // the previous item is done with shared memory
    load_tile(sm.Q, Bq, Dh, at(p.q, head0 + i0 * rs), rs, bf, nvalid, tid, blockDim.x);
    load_tile(sm.dO, Bq, Dh, at(p.dout, head0 + i0 * rs), rs, bf, nvalid, tid, blockDim.x);
    if constexpr (kPath) {
      load_tile(sm.W, kL, Dh, p.w + head0 + kn0 * rs, rs, false, kvalid, tid, blockDim.x);
      load_tile(sm.Y, kL, Dh, p.y + (bh * Tp + kn0) * Dh, Dh, false, kL, tid, blockDim.x);
    }
    __syncthreads();

    float X[NTD][4], G[NTD][4];
    zero(G);
    if constexpr (kPath) {  // Qt = Q - lower(Q W^T) Y: the queries pulled back to the block start
      float A[8][4];
      zero(A);
      mma_sA<8, false, BL::NK>(A, sm.Q, r0, 0, KTD, sm.W, 0, 0, true, lane);
      mask_lower(A, q0 + r0, lane);
      load_frag_global(X, at(p.q, head0 + i0 * rs), rs, bf, r0, nvalid, lane);
      mma_rA<4, NTD, BL::KN>(X, A, -1.f, sm.Y, 0, 0, true, lane);
    }

    // ---- key blocks m < n, left to right ----
    if (n > 0) {
      const int seg = p.seg, nseg = (n + seg - 1) / seg;
      if constexpr (kPath) {
        if (nseg > 1) {  // pass 1: checkpoints X_top(s) of every segment s
          for (int m = n - 1; m >= seg - 1; --m) {
            const int s = m / seg;
            if (m == min(n, (s + 1) * seg) - 1) save_state(X, slots, s, Bq, Dh, warp, lane);
            if (m > seg - 1) {
              __syncthreads();
              load_transport<Dh>(sm, p, bh, head0, rs, m, tid);
              __syncthreads();
              transport_rows<Dh>(X, sm, p.dense, lane);
            }
          }
        }
      }
      int lo = 0;
      for (int m = 0; m < n; ++m) {
        const int64_t k0 = static_cast<int64_t>(m) * kL;
        if constexpr (kPath) {
          if (m % seg == 0) {  // recompute this segment's states X_hi .. X_lo
            lo = m;
            const int hi = min(n, lo + seg) - 1;
            if (nseg > 1) load_state(X, slots, m / seg, Bq, Dh, warp, lane);
            for (int mm = hi; mm >= lo; --mm) {
              save_state(X, slots, p.ck_slots + (mm - lo), Bq, Dh, warp, lane);
              if (mm > lo) {
                __syncthreads();
                load_transport<Dh>(sm, p, bh, head0, rs, mm, tid);
                __syncthreads();
                transport_rows<Dh>(X, sm, p.dense, lane);
              }
            }
          }
          load_state(X, slots, p.ck_slots + (m - lo), Bq, Dh, warp, lane);
        }
        __syncthreads();
        if constexpr (kPath) {
          load_tile(sm.K, kL, Dh, p.kt + (bh * Tp + k0) * Dh, Dh, false, kL, tid, blockDim.x);
          if (m > 0) load_transport<Dh>(sm, p, bh, head0, rs, m, tid);
        } else {
          load_tile(sm.K, kL, Dh, at(p.k, head0 + k0 * rs), rs, bf, kL, tid, blockDim.x);
        }
        load_tile(sm.V, kL, Dh, at(p.v, head0 + k0 * rs), rs, bf, kL, tid, blockDim.x);
        fill_colbias(sm.colb, gh, k0, p.T, gref, tid);
        __syncthreads();

        float S[8][4], dS[8][4];
        zero(S);
        zero(dS);
        if constexpr (kPath)
          mma_rA<KTD, 8, BL::NK>(S, X, 1.f, sm.K, 0, 0, f32, lane);
        else
          mma_sA<8, false, BL::NK>(S, sm.Q, r0, 0, KTD, sm.K, 0, 0, f32, lane);
        mma_sA<8, false, BL::NK>(dS, sm.dO, r0, 0, KTD, sm.V, 0, 0, f32, lane);  // dP = dO V^T
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int rr = e >> 1;
            S[nt][e] = exp2f(S[nt][e] * sl2 + rb2[rr] - sm.colb[nt * 8 + 2 * tq + (e & 1)] - lse2[rr]);
            dS[nt][e] = S[nt][e] * (dS[nt][e] - dl[rr]);
            dgr[rr] += dS[nt][e];
          }
        if (gh) {
          float cs[8][2];
          column_sums(dS, cs);
          if (g == 0)
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
              for (int c = 0; c < 2; ++c) atomicAdd(p.dg + bh * Tp + k0 + nt * 8 + 2 * tq + c, -cs[nt][c]);
        }
        store_frag(sm.P, r0, S, 1.f, lane);
        store_frag(sm.dS, r0, dS, p.scale, lane);
        if constexpr (kPath) {
          store_frag(sm.X, r0, X, 1.f, lane);
          if (m > 0) {
            store_frag(sm.G, r0, G, 1.f, lane);
            if (!p.dense) {
              float T2[8][4];
              zero(T2);
              mma_rA<KTD, 8, BL::NK>(T2, G, 1.f, sm.Y, 0, 0, true, lane);  // G Y^T
              store_frag(sm.A, r0, T2, -1.f, lane);
              zero(T2);
              mma_rA<KTD, 8, BL::NK>(T2, X, 1.f, sm.W, 0, 0, f32, lane);  // X W^T
              store_frag(sm.dA, r0, T2, 1.f, lane);
            }
          }
        }
        __syncthreads();

        // CTA-wide products over the query rows, into the accumulators.
        cta_atb_atomic<NTD>(p.dv_acc + (bh * Tp + k0) * Dh, Dh, 4, sm.P, sm.dO, kt, 1.f, f32, warp, warps, lane);
        if constexpr (kPath) {
          cta_atb_atomic<NTD>(p.dkt_acc + (bh * Tp + k0) * Dh, Dh, 4, sm.dS, sm.X, kt, 1.f, f32, warp, warps, lane);
          if (m > 0) {
            if (p.dense) {
              cta_atb_atomic<NTD>(p.dp_acc + (bh * p.nb + m) * Dh * Dh, Dh, Dh / 16, sm.X, sm.G, kt, 1.f, f32, warp,
                                  warps, lane);
            } else {  // dW -= (G Y^T)^T X,  dY -= (X W^T)^T G
              cta_atb_atomic<NTD>(p.dw_acc + (bh * Tp + k0) * Dh, Dh, 4, sm.A, sm.X, kt, 1.f, f32, warp, warps, lane);
              cta_atb_atomic<NTD>(p.dy_acc + (bh * Tp + k0) * Dh, Dh, 4, sm.dA, sm.G, kt, -1.f, f32, warp, warps,
                                  lane);
            }
            // G <- G P_m^T
            if (p.dense) {
              float Tm[NTD][4];
              zero(Tm);
              mma_rA<KTD, NTD, BL::NK>(Tm, G, 1.f, sm.C, 0, 0, true, lane);  // G C^T
#pragma unroll
              for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) G[nt][e] -= Tm[nt][e];
            } else {
              mma_sA<NTD, false, BL::KN>(G, sm.A, r0, 0, 4, sm.W, 0, 0, true, lane);  // G += (-G Y^T) W
            }
          }
        } else {
          cta_atb_atomic<NTD>(p.dk_acc + (bh * Tp + k0) * Dh, Dh, 4, sm.dS, sm.Q, kt, 1.f, f32, warp, warps, lane);
        }
        mma_sA<NTD, false, BL::KN>(G, sm.dS, r0, 0, 4, sm.K, 0, 0, f32, lane);  // G += dS_raw Kt
      }
    }

    // ---- own block ----
    __syncthreads();
    load_tile(sm.K, kL, Dh, at(p.k, head0 + kn0 * rs), rs, bf, kvalid, tid, blockDim.x);
    load_tile(sm.V, kL, Dh, at(p.v, head0 + kn0 * rs), rs, bf, kvalid, tid, blockDim.x);
    if constexpr (kPath) {
      load_tile(sm.W, kL, Dh, p.w + head0 + kn0 * rs, rs, false, kvalid, tid, blockDim.x);
      load_tile(sm.Y, kL, Dh, p.y + (bh * Tp + kn0) * Dh, Dh, false, kL, tid, blockDim.x);
      load_tile(sm.Z, kL, kL, p.z + (bh * p.nb + n) * kL * kL, kL, false, kL, tid, blockDim.x);
    }
    fill_colbias(sm.colb, gh, kn0, p.T, gref, tid);
    __syncthreads();
    {
      float S[8][4], dS[8][4], A[8][4];
      zero(S);
      zero(dS);
      mma_sA<8, false, BL::NK>(S, sm.Q, r0, 0, KTD, sm.K, 0, 0, f32, lane);
      if constexpr (kPath) {
        zero(A);
        mma_sA<8, false, BL::NK>(A, sm.Q, r0, 0, KTD, sm.W, 0, 0, true, lane);
        mask_lower(A, q0 + r0, lane);
        mma_rA<4, 8, BL::KN>(S, A, -1.f, sm.Z, 0, 0, f32, lane);
      }
      mma_sA<8, false, BL::NK>(dS, sm.dO, r0, 0, KTD, sm.V, 0, 0, f32, lane);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int rr = e >> 1, row = r0 + g + 8 * rr, col = nt * 8 + 2 * tq + (e & 1);
          const bool ok = col <= q0 + row && row < nvalid;
          S[nt][e] = ok ? exp2f(S[nt][e] * sl2 + rb2[rr] - sm.colb[col] - lse2[rr]) : 0.f;
          dS[nt][e] = S[nt][e] * (dS[nt][e] - dl[rr]);
          dgr[rr] += dS[nt][e];
        }
      if (gh) {
        float cs[8][2];
        column_sums(dS, cs);
        if (g == 0)
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) atomicAdd(p.dg + bh * Tp + kn0 + nt * 8 + 2 * tq + c, -cs[nt][c]);
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const float sum = quad_sum(dgr[rr]);
          const int row = r0 + g + 8 * rr;
          if (tq == 0 && row < nvalid) atomicAdd(p.dg + bh * Tp + i0 + row, sum);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dS[nt][e] *= p.scale;
      store_frag(sm.P, r0, S, 1.f, lane);
      store_frag(sm.dS, r0, dS, 1.f, lane);
      if constexpr (kPath) {  // G = dQt here; dA = lower(-dS_raw Z^T - dQt Y^T)
        store_frag(sm.A, r0, A, 1.f, lane);
        store_frag(sm.G, r0, G, 1.f, lane);
        float dA[8][4];
        zero(dA);
        mma_rA<4, 8, BL::NK>(dA, dS, -1.f, sm.Z, 0, 0, f32, lane);
        mma_rA<KTD, 8, BL::NK>(dA, G, -1.f, sm.Y, 0, 0, f32, lane);
        mask_lower(dA, q0 + r0, lane);
        store_frag(sm.dA, r0, dA, 1.f, lane);
        mma_rA<4, NTD, BL::KN>(G, dA, 1.f, sm.W, 0, 0, f32, lane);  // dq += dA W
      }
      mma_rA<4, NTD, BL::KN>(G, dS, 1.f, sm.K, 0, 0, f32, lane);  // dq += dS_raw K
      store_frag_global(static_cast<unsigned char*>(p.dq) + (head0 + i0 * rs) * esz, rs, bf, r0, nvalid, G, 1.f,
                        lane);
    }
    __syncthreads();
    cta_atb_atomic<NTD>(p.dv_acc + (bh * Tp + kn0) * Dh, Dh, 4, sm.P, sm.dO, kt, 1.f, f32, warp, warps, lane);
    cta_atb_atomic<NTD>(p.dk_acc + (bh * Tp + kn0) * Dh, Dh, 4, sm.dS, sm.Q, kt, 1.f, f32, warp, warps, lane);
    if constexpr (kPath) {
      cta_atb_atomic<8>(p.dz_acc + (bh * p.nb + n) * kL * kL, kL, 4, sm.A, sm.dS, kt, -1.f, f32, warp, warps, lane);
      cta_atb_atomic<NTD>(p.dy_acc + (bh * Tp + kn0) * Dh, Dh, 4, sm.A, sm.G, kt, -1.f, f32, warp, warps, lane);
      cta_atb_atomic<NTD>(p.dw_acc + (bh * Tp + kn0) * Dh, Dh, 4, sm.dA, sm.Q, kt, 1.f, f32, warp, warps, lane);
    }
  }
}

}  // namespace sb::cuda::detail
