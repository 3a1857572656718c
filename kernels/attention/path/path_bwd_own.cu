// path_bwd_own.cu: the own-block part of the PaTH attention backward (internal): one CTA per
// (query block of 16 * warps rows, head of the group) takes dL/dQt from the pairs kernel
// (kernels/attention/path/path_bwd_pairs_sm80.cuh, p.dqt; zero in the first block), forms the block's probabilities
// S = lower(Q K^T) - A Z with A = lower(Q W^T), writes dq = dQt + dA W + dS K, and adds the own
// block's terms of dV, dY, dW (and the gate's) to the group's accumulators by atomics; dK and dZ are
// its alone (stored when its query blocks are whole blocks).
#include <algorithm>

#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"
#include "kernels/attention/path/path_bwd_parts.cuh"

namespace sb::cuda::detail {

namespace {

// At Dh <= 32 the dL/dQt tile G is written after dq, over the dead inputs, so that the kernel fits
// three CTAs per SM (71 KB at Dh 32); above, it is written first (no registers held across dq).
constexpr bool late_g(int Dh) { return Dh <= 32; }

// Q, dO, P, dS, A (and G) and the column biases; the block's K, V, W (split), Y, Z, which are dead
// once dq is formed, with dA (and G) overlaid on them.
struct OwnSmem {
  Tile Q, dO, P, dS, A, G;
  Tile K, V, W, Y, Z;
  Tile dA;
  float* colb = nullptr;  // [64]
  int bytes = 0;
};

__host__ __device__ inline OwnSmem own_smem(unsigned char* base, int Dh, bool f32, int Bq) {
  Carve cv{base, 0};
  OwnSmem s;
  s.Q = cv.tile(Bq, Dh, f32);
  s.dO = cv.tile(Bq, Dh, f32);
  s.P = cv.tile(Bq, kL, f32);
  s.dS = cv.tile(Bq, kL, f32);
  s.A = cv.tile(Bq, kL, f32);
  if (!late_g(Dh)) s.G = cv.tile(Bq, Dh, f32);
  s.colb = cv.floats(kL);
  const int start = cv.off;
  s.K = cv.tile(kL, Dh, f32);
  s.V = cv.tile(kL, Dh, f32);
  s.W = cv.tile(kL, Dh, true);  // in the split pull-back product Q W^T
  s.Y = cv.tile(kL, Dh, f32);
  s.Z = cv.tile(kL, kL, f32);
  const int in_end = cv.off;
  cv.off = start;
  s.dA = cv.tile(Bq, kL, f32);
  if (late_g(Dh)) s.G = cv.tile(Bq, Dh, f32);
  s.bytes = std::max(in_end, cv.off);
  return s;
}

// dst (64 x 8NT) = mul * A^T B over the query rows, stored: with 4-warp query blocks the CTA is
// the only writer of its key block's rows of the own-only accumulators (dK, dZ), which are then
// not zeroed beforehand (kernels/attention/plan.cpp, take_own_accumulators).
template <int NT>
__device__ __forceinline__ void cta_atb_store(float* dst, int64_t ld, const Tile& A, const Tile& B, int kt, float mul,
                                              bool split, int warp, int warps, int lane) {
  for (int mt = warp; mt < 4; mt += warps) {
    float acc[NT][4];
    zero(acc);
    mma_sA<NT, true, BL::KN>(acc, A, 16 * mt, 0, kt, B, 0, 0, split, lane);
    store_frag_global(dst, ld, false, 16 * mt, kL, acc, mul, lane);
  }
}

template <int Dh, bool kF32>
__global__ void __launch_bounds__(128, late_g(Dh) ? 3 : 2) path_own_bwd_kernel(const BwdParams p) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  constexpr bool f32 = kF32;  // split every product (fp32 inputs)
  constexpr bool bf = !kF32;  // element type of q, k, v, dout, dq
  constexpr size_t esz = bf ? 2 : 4;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int warps = p.warps, Bq = 16 * warps, kt = warps;
  const OwnSmem sm = own_smem(smem_raw, Dh, f32, Bq);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3, r0 = 16 * warp;
  const int64_t Tp = static_cast<int64_t>(p.nb) * kL, rs = p.H * Dh;
  const float sl2 = p.scale * kLog2e;
  // Consecutive CTAs take consecutive query blocks of one head.
  const int64_t lb = blockIdx.x / p.nqb, bh = p.bh0 + lb, b = bh / p.H, h = bh % p.H;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x % p.nqb) * Bq, head0 = (b * p.T * p.H + h) * Dh;
  const int n = static_cast<int>(i0 / kL), q0 = static_cast<int>(i0 % kL);
  const int64_t kn0 = static_cast<int64_t>(n) * kL;
  const int nvalid = static_cast<int>(min64(Bq, p.T - i0));
  const int kvalid = static_cast<int>(min64(kL, p.T - kn0));
  const double* gh = p.gcum ? p.gcum + bh * p.T : nullptr;
  const double gref = gh ? gh[kn0] : 0.0;

  load_input_tile<bf>(sm.Q, Bq, Dh, input_at<bf>(p.q, head0 + i0 * rs), rs, nvalid, tid);
  load_input_tile<bf>(sm.dO, Bq, Dh, input_at<bf>(p.dout, head0 + i0 * rs), rs, nvalid, tid);
  load_input_tile<bf>(sm.K, kL, Dh, input_at<bf>(p.k, head0 + kn0 * rs), rs, kvalid, tid);
  load_input_tile<bf>(sm.V, kL, Dh, input_at<bf>(p.v, head0 + kn0 * rs), rs, kvalid, tid);
  load_planes_tile(sm.Y, kL, Dh, p.y_hi, p.y_lo, (bh * Tp + kn0) * Dh, tid);
  cp_async_commit();
  load_w_tile<Dh, false>(sm.W, p.w + head0 + kn0 * rs, rs, kvalid, tid);
  load_tri_tile(sm.Z, p.z + (bh * p.nb + n) * kTriFloats, 0.f, nullptr, tid, blockDim.x);
  fill_colbias(sm.colb, gh, kn0, p.T, gref, tid);
  float lse2[2], dl[2], rb2[2], dgr[2] = {0.f, 0.f};
  load_row_stats(lse2, dl, rb2, p, bh, i0, r0, g, gh, gref);
  float G[NTD][4];  // dL/dQt: the pairs' share (no key block before the first block)
  if (n > 0)
    load_frag_global(G, p.dqt + (lb * Tp + i0) * Dh, Dh, false, r0, nvalid, lane);
  else
    zero(G);
  cp_async_wait<0>();
  __syncthreads();

  float S[8][4], dS[8][4], A[8][4], dA[8][4];
  zero(S);
  zero(dS);
  mma_sA<8, false, BL::NK>(S, sm.Q, r0, 0, KTD, sm.K, 0, 0, f32, lane);
  zero(A);
  mma_sA<8, false, BL::NK>(A, sm.Q, r0, 0, KTD, sm.W, 0, 0, true, lane);
  mask_lower(A, q0 + r0, lane);
  mma_rA<4, 8, BL::KN>(S, A, -1.f, sm.Z, 0, 0, f32, lane);
  mma_sA<8, false, BL::NK>(dS, sm.dO, r0, 0, KTD, sm.V, 0, 0, f32, lane);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int rr = e >> 1, row = r0 + g + 8 * rr, col = nt * 8 + 2 * tq + (e & 1);
      const bool ok = col <= q0 + row && row < nvalid;
      S[nt][e] = ok ? fast_exp2(S[nt][e] * sl2 + rb2[rr] - sm.colb[col] - lse2[rr]) : 0.f;
      dS[nt][e] = S[nt][e] * (dS[nt][e] - dl[rr]);
      dgr[rr] += dS[nt][e];
    }
  if (gh) {
    add_column_sums(p.dg + bh * Tp + kn0, dS, -1.f, kL, lane);
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
    for (int e = 0; e < 4; ++e) dS[nt][e] *= p.scale;  // dS_raw (unscaled queries)
  store_frag(sm.P, r0, S, 1.f, lane);
  store_frag(sm.dS, r0, dS, 1.f, lane);
  store_frag(sm.A, r0, A, 1.f, lane);
  if constexpr (!late_g(Dh)) store_frag(sm.G, r0, G, 1.f, lane);
  // dA = lower(-dS_raw Z^T - dQt Y^T); dq = dQt + dA W + dS_raw K
  zero(dA);
  mma_rA<4, 8, BL::NK>(dA, dS, -1.f, sm.Z, 0, 0, f32, lane);
  mma_rA<KTD, 8, BL::NK>(dA, G, -1.f, sm.Y, 0, 0, f32, lane);
  mask_lower(dA, q0 + r0, lane);
  auto write_dq = [&](float (&dq)[NTD][4]) {  // dq holds dQt on entry
    mma_rA<4, NTD, BL::KN>(dq, dA, 1.f, sm.W, 0, 0, f32, lane);
    mma_rA<4, NTD, BL::KN>(dq, dS, 1.f, sm.K, 0, 0, f32, lane);
    store_frag_global(static_cast<unsigned char*>(p.dq) + (head0 + i0 * rs) * esz, rs, bf, r0, nvalid, dq, 1.f,
                      lane);
  };
  if constexpr (late_g(Dh)) {  // G is still to be stored
    float dq[NTD][4];
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dq[nt][e] = G[nt][e];
    write_dq(dq);
  } else {
    write_dq(G);
  }
  __syncthreads();  // every warp is done with K, V, W, Y, Z: dA (and G) go over them
  store_frag(sm.dA, r0, dA, 1.f, lane);
  if constexpr (late_g(Dh)) store_frag(sm.G, r0, G, 1.f, lane);
  __syncthreads();
  cta_atb_atomic<NTD>(p.dv_acc + (lb * Tp + kn0) * Dh, Dh, 4, sm.P, sm.dO, kt, 1.f, f32, warp, warps, lane);
  float* dk = p.dk_acc + (lb * Tp + kn0) * Dh;
  float* dz = p.dz_acc + (lb * p.nb + n) * kL * kL;
  if (Bq == kL) {
    cta_atb_store<NTD>(dk, Dh, sm.dS, sm.Q, kt, 1.f, f32, warp, warps, lane);
    cta_atb_store<8>(dz, kL, sm.A, sm.dS, kt, -1.f, f32, warp, warps, lane);
  } else {
    cta_atb_atomic<NTD>(dk, Dh, 4, sm.dS, sm.Q, kt, 1.f, f32, warp, warps, lane);
    cta_atb_atomic<8>(dz, kL, 4, sm.A, sm.dS, kt, -1.f, f32, warp, warps, lane);
  }
  cta_atb_atomic<NTD>(p.dy_acc + (lb * Tp + kn0) * Dh, Dh, 4, sm.A, sm.G, kt, -1.f, f32, warp, warps, lane);
  cta_atb_atomic<NTD>(p.dw_acc + (lb * Tp + kn0) * Dh, Dh, 4, sm.dA, sm.Q, kt, 1.f, f32, warp, warps, lane);
}

template <int Dh>
auto own_kernel(bool f32) {
  return f32 ? path_own_bwd_kernel<Dh, true> : path_own_bwd_kernel<Dh, false>;
}

}  // namespace

int path_own_smem_bytes(int64_t Dh, bool f32, int warps) {
  return own_smem(nullptr, static_cast<int>(Dh), f32, 16 * warps).bytes;
}

void launch_path_own_bwd(const BwdParams& p0, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream) {
  check_head_group(p0.bh0, p0.nbh, p0.B * p0.H, "PaTH attention backward: bad group of heads");
  BwdParams p = p0;
  p.warps = cfg.own_warps;
  p.nqb = static_cast<int>((p.T + 16 * p.warps - 1) / (16 * p.warps));
  const int64_t grid = static_cast<int64_t>(p.nqb) * p.nbh;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = own_kernel<D>(!p.bf16);
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg.own_smem));
    kernel<<<static_cast<unsigned>(grid), 32 * p.warps, cfg.own_smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
