// path_superchunk.cu: the superchunk pieces of the PaTH backward (docs/path-backward.md,
// "Superchunks"). Superchunk b holds blocks s_b .. e_b (sc blocks); A_m = P_{e_b} ... P_{m+1}
// (A_{e_b} = I) and W_b = A_{s_b} P_{s_b}. sc_prep writes the keys pushed to their superchunk's end,
// Ke_m = Kt_m A_m^T, and Cs_b = I - W_b; sc_bwd turns the fused kernel's dKe and dW_b into dKt and
// the block-product gradients dP_m (dense: into dp; factored: into a group buffer, which sc_dwdy
// turns into dW_m -= Y_m dP_m^T, dY_m -= W_m dP_m).
#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {
namespace {

constexpr int kThreads = 128;  // 4 warps: 16 key rows each; Dh x Dh matrices by 16-row tiles

// The identity's 16-row tile rt in accumulator layout.
template <int NT>
__device__ __forceinline__ void identity_rows(float (&acc)[NT][4], int rt, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = (16 * rt + g + ((e & 2) ? 8 : 0) == nt * 8 + 2 * t + (e & 1)) ? 1.f : 0.f;
}

struct ScTiles {
  Tile Kt, W, Y, A, D, dKe;
  int bytes = 0;
};

// prep (bwd false): Kt, W, Y, A (Dh x Dh); its products make forward factors, so W, Y and A are
// split, and `split` is its fp32 flag (Kt's low plane). bwd: W, Y, dKe, Kt, and a part's rows of A_m
// and D (pr x Dh each); its products only make gradients, so every tile has a low plane where
// `split` (sc_bwd's kSplit: fp32 inputs), else one bf16 plane per operand (as every bf16 attention
// backward).
__host__ __device__ inline ScTiles sc_tiles(unsigned char* base, int Dh, bool split, bool bwd, int pr = 0) {
  Carve cv{base, 0};
  ScTiles s;
  const bool lo = split || !bwd;
  s.Kt = cv.tile(kL, Dh, split);
  s.W = cv.tile(kL, Dh, lo);
  s.Y = cv.tile(kL, Dh, lo);
  if (!bwd) {
    s.A = cv.tile(Dh, Dh, true);
  } else {
    s.dKe = cv.tile(kL, Dh, lo);
    s.A = cv.tile(pr, Dh, lo);
    s.D = cv.tile(pr, Dh, lo);
  }
  s.bytes = cv.off;
  return s;
}

// Block m's W (fp32 input, split) and Y (planes) into tiles; the caller commits and waits.
__device__ __forceinline__ void load_wy(const ScTiles& sm, const ScArgs& a, int64_t bh, int m, int Dh, int tid) {
  const int64_t b = bh / a.H, h = bh % a.H, rs = a.H * Dh, Tp = static_cast<int64_t>(a.nb) * kL;
  const int64_t k0 = static_cast<int64_t>(m) * kL;
  load_planes_tile(sm.Y, kL, Dh, a.y_hi, a.y_lo, (bh * Tp + k0) * Dh, tid);
  load_tile(sm.W, kL, Dh, a.w + (b * a.T * a.H + h) * Dh + k0 * rs, rs, false, kL, tid, blockDim.x);
}

// One CTA per (head, superchunk b < nsc - 1): Ke_m for m = e_b .. s_b, then Cs_b = I - W_b.
template <int Dh, bool kF32>
__global__ void __launch_bounds__(kThreads) sc_prep_kernel(const ScArgs a) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16, RTN = Dh / 16, RT = (RTN + 3) / 4;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const ScTiles sm = sc_tiles(smem_raw, Dh, kF32, false);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t bh = blockIdx.x / (a.nsc - 1), Tp = static_cast<int64_t>(a.nb) * kL;
  const int b = static_cast<int>(blockIdx.x % (a.nsc - 1));
  float A[RT][NTD][4];
#pragma unroll
  for (int r = 0; r < RT; ++r) identity_rows(A[r], warp + 4 * r, lane);
  for (int m = (b + 1) * a.sc - 1; m >= b * a.sc; --m) {
    const int64_t k0 = static_cast<int64_t>(m) * kL;
    __syncthreads();  // the previous block's tiles are consumed
    load_planes_tile(sm.Kt, kL, Dh, a.kt_hi, a.kt_lo, (bh * Tp + k0) * Dh, tid);
    load_wy(sm, a, bh, m, Dh, tid);
    cp_async_commit();
#pragma unroll
    for (int r = 0; r < RT; ++r)
      if (warp + 4 * r < RTN) store_frag(sm.A, 16 * (warp + 4 * r), A[r], 1.f, lane);
    cp_async_wait<0>();
    __syncthreads();
    float ke[NTD][4];
    zero(ke);
    mma_sA<NTD, false, BL::NK>(ke, sm.Kt, 16 * warp, 0, KTD, sm.A, 0, 0, true, lane);  // Kt A^T
    store_frag_planes(a.ke_hi + (bh * Tp + k0) * Dh, a.ke_lo ? a.ke_lo + (bh * Tp + k0) * Dh : nullptr, Dh,
                      16 * warp, ke, lane);
#pragma unroll
    for (int r = 0; r < RT; ++r)
      if (warp + 4 * r < RTN) transport_rows<Dh>(A[r], sm.A, sm.W, sm.Y, 0, false, lane);  // A <- A P_m
  }
  const int64_t off = (bh * a.nsc + b) * Dh * Dh;
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int rt = warp + 4 * r;
    if (rt >= RTN) continue;
    float I[NTD][4];
    identity_rows(I, rt, lane);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) I[nt][e] -= A[r][nt][e];
    store_frag_planes(a.cs_hi + off, a.cs_lo + off, Dh, 16 * rt, I, lane);
  }
}

// Persistent CTAs over (head bh of the group a.bh0 .. a.bh0 + a.nbh - 1, superchunk b < nsc - 1,
// row part; factors at the global row bh, accumulators at the local row lb = bh - a.bh0).
// Recomputes A_m (m = e_b .. s_b) into the CTA's scratch, then walks m = s_b .. e_b carrying
// D = dL/dA_{m-1} (D = dW_b at the start): dP_m = A_m^T D, dKt_m += dKe_m A_m,
// D <- D P_m^T + dKe_m^T Kt_m. The rows of A and D evolve independently (right products only), so
// each of the P CTAs of one (head, superchunk) carries Dh / P of them and adds its share of dP_m
// (a sum over those rows) and of dKt_m by atomics: dP_m into dp (dense) or a.dps (factored, where
// sc_dwdy turns it into dW_m, dY_m off this chain).
template <int Dh, bool kSplit, int P>
__global__ void __launch_bounds__(kThreads, 1) sc_bwd_kernel(const ScArgs a) {
  constexpr int NTD = Dh / 8, RTN = Dh / 16, PR = Dh / P, RTP = PR / 16;
  constexpr int RT = (RTP + 3) / 4;  // row tiles per warp
  static_assert(RTP >= 1, "a part holds at least one 16-row tile");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const ScTiles sm = sc_tiles(smem_raw, Dh, kSplit, true, PR);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t Tp = static_cast<int64_t>(a.nb) * kL, DD = static_cast<int64_t>(Dh) * Dh, slot = PR * Dh;
  const int64_t nitems = a.nbh * (a.nsc - 1) * P, nblk = static_cast<int64_t>(a.nsc - 1) * a.sc;
  float* scr = a.scratch + static_cast<int64_t>(blockIdx.x) * sc_bwd_slot_floats(a.sc, Dh, P);  // [sc][PR][Dh]
  for (int64_t item = blockIdx.x; item < nitems; item += gridDim.x) {
    const int part = static_cast<int>(item % P);
    const int64_t lb = item / P / (a.nsc - 1), bh = a.bh0 + lb, batch = bh / a.H, h = bh % a.H;
    const int b = static_cast<int>(item / P % (a.nsc - 1)), s = b * a.sc, e = s + a.sc - 1;
    const int r0 = part * PR;  // this part's rows of A and D; its row tiles r0 / 16 + warp + 4r
    const float* wsrc = a.w + (batch * a.T * a.H + h) * Dh;
    const int64_t rs = a.H * Dh;
    float X[RT][NTD][4];  // A_m, then D
#pragma unroll
    for (int r = 0; r < RT; ++r)
      if (warp + 4 * r < RTP) identity_rows(X[r], part * RTP + warp + 4 * r, lane);
    for (int m = e;; --m) {  // this part's rows of A_m into slot m - s
#pragma unroll
      for (int r = 0; r < RT; ++r)
        if (warp + 4 * r < RTP) store_frag_global(scr + (m - s) * slot, Dh, false, 16 * (warp + 4 * r), PR, X[r], 1.f, lane);
      if (m == s) break;
      __syncthreads();
      load_wy(sm, a, bh, m, Dh, tid);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
#pragma unroll
      for (int r = 0; r < RT; ++r)
        if (warp + 4 * r < RTP) transport_rows<Dh>(X[r], sm.A, sm.W, sm.Y, 0, false, lane, kSplit);
    }
    const float* dws = a.dws_acc + (lb * a.nsc + b) * DD;
#pragma unroll
    for (int r = 0; r < RT; ++r)
      if (warp + 4 * r < RTP) load_frag_global(X[r], dws, Dh, false, r0 + 16 * (warp + 4 * r), Dh, lane);
    for (int m = s; m <= e; ++m) {
      const int64_t k0 = static_cast<int64_t>(m) * kL;
      const bool tr = m < e;  // D is carried on to block m + 1: block m's transport operands
      __syncthreads();  // scratch slot m - s is written; the previous iteration's tiles are consumed
      load_planes_tile(sm.Kt, kL, Dh, a.kt_hi, a.kt_lo, (bh * Tp + k0) * Dh, tid);
      if (tr) load_planes_tile(sm.Y, kL, Dh, a.y_hi, a.y_lo, (bh * Tp + k0) * Dh, tid);
      cp_async_commit();
      const float* a_src = scr + (m - s) * slot;
      const float* dke_src = a.dke_acc + (lb * Tp + k0) * Dh;
      const float* w_src = wsrc + k0 * rs;
      constexpr int kQA = (PR * Dh / 4 + kThreads - 1) / kThreads, kQK = kL * Dh / 4 / kThreads;
      if constexpr (Dh <= 64) {  // A_m's rows, dKe_m and W_m with all their loads in flight together
        float4 fa[kQA], fk[kQK], fw[kQK];
        tile_issue(fa, tid, PR, Dh, a_src, Dh, false, PR, kThreads);
        tile_issue(fk, tid, kL, Dh, dke_src, Dh, false, kL, kThreads);
        if (tr) tile_issue(fw, tid, kL, Dh, w_src, rs, false, kL, kThreads);
        tile_finish(sm.A, fa, tid, PR, Dh, false, kThreads);
        tile_finish(sm.dKe, fk, tid, kL, Dh, false, kThreads);
        if (tr) tile_finish(sm.W, fw, tid, kL, Dh, false, kThreads);
      } else {  // (registers: two rounds)
        float4 fa[kQA], fk[kQK];
        tile_issue(fa, tid, PR, Dh, a_src, Dh, false, PR, kThreads);
        tile_issue(fk, tid, kL, Dh, dke_src, Dh, false, kL, kThreads);
        tile_finish(sm.A, fa, tid, PR, Dh, false, kThreads);
        tile_finish(sm.dKe, fk, tid, kL, Dh, false, kThreads);
        if (tr) load_tile(sm.W, kL, Dh, w_src, rs, false, kL, tid, kThreads);
      }
#pragma unroll
      for (int r = 0; r < RT; ++r)
        if (warp + 4 * r < RTP) store_frag(sm.D, 16 * (warp + 4 * r), X[r], 1.f, lane);
      cp_async_wait<0>();
      __syncthreads();
      {  // dKt_m += dKe_m A_m over this part's rows of A
        float acc[NTD][4];
        zero(acc);
        mma_sA<NTD, false, BL::KN>(acc, sm.dKe, 16 * warp, r0, RTP, sm.A, 0, 0, kSplit, lane);
        atomic_frag(a.dkt_acc + (lb * Tp + k0) * Dh, Dh, 16 * warp, acc, 1.f, lane);
      }
      float* dp = a.dense ? a.dp_acc + (lb * a.nb + m) * DD : a.dps + (lb * nblk + m) * DD;
      for (int rt = warp; rt < RTN; rt += 4) {  // dP_m += A_m^T D over this part's rows
        float acc[NTD][4];
        zero(acc);
        mma_sA<NTD, true, BL::KN>(acc, sm.A, 16 * rt, 0, RTP, sm.D, 0, 0, kSplit, lane);
        atomic_frag(dp, Dh, 16 * rt, acc, 1.f, lane);
      }
      if (!tr) continue;
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const int rt = r0 / 16 + warp + 4 * r;
        if (warp + 4 * r >= RTP) continue;
        transport_rows<Dh>(X[r], sm.A, sm.Y, sm.W, 0, false, lane, kSplit);                // D - (D Y^T) W
        mma_sA<NTD, true, BL::KN>(X[r], sm.dKe, 16 * rt, 0, kL / 16, sm.Kt, 0, 0, kSplit, lane);  // + dKe^T Kt
      }
    }
  }
}

// One CTA per (head lb of the group, block m < (nsc - 1) sc): dW_m -= Y_m dP_m^T, dY_m -= W_m dP_m
// with dP_m from a.dps (factored transports; sc_bwd has summed its parts).
template <int Dh>
__global__ void __launch_bounds__(kThreads) sc_dwdy_kernel(const ScArgs a) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Carve cv{smem_raw, 0};
  ScTiles sm;
  sm.W = cv.tile(kL, Dh, true);
  sm.Y = cv.tile(kL, Dh, true);
  sm.D = cv.tile(Dh, Dh, true);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t nblk = static_cast<int64_t>(a.nsc - 1) * a.sc, lb = blockIdx.x / nblk, bh = a.bh0 + lb;
  const int m = static_cast<int>(blockIdx.x % nblk);
  const int64_t Tp = static_cast<int64_t>(a.nb) * kL, k0 = static_cast<int64_t>(m) * kL;
  load_wy(sm, a, bh, m, Dh, tid);
  cp_async_commit();
  load_tile(sm.D, Dh, Dh, a.dps + (lb * nblk + m) * Dh * Dh, Dh, false, Dh, tid, kThreads);
  cp_async_wait<0>();
  __syncthreads();
  float acc[NTD][4];
  zero(acc);
  mma_sA<NTD, false, BL::NK>(acc, sm.Y, 16 * warp, 0, KTD, sm.D, 0, 0, true, lane);
  atomic_frag(a.dw_acc + (lb * Tp + k0) * Dh, Dh, 16 * warp, acc, -1.f, lane);
  zero(acc);
  mma_sA<NTD, false, BL::KN>(acc, sm.W, 16 * warp, 0, KTD, sm.D, 0, 0, true, lane);
  atomic_frag(a.dy_acc + (lb * Tp + k0) * Dh, Dh, 16 * warp, acc, -1.f, lane);
}

int sc_dwdy_smem_bytes(int Dh) { return 2 * tile_bytes(kL, Dh, true) + tile_bytes(Dh, Dh, true); }

template <class K>
void set_smem(K* kernel, int smem) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
}

}  // namespace

int sc_bwd_smem_bytes(int64_t Dh, bool split, int parts) {
  return sc_tiles(nullptr, static_cast<int>(Dh), split, true, static_cast<int>(Dh) / parts).bytes;
}

void launch_sc_prep(const ScArgs& a, int64_t Dh, bool f32, cudaStream_t stream) {
  if (a.nsc < 2) return;
  const int smem = sc_tiles(nullptr, static_cast<int>(Dh), f32, false).bytes;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = f32 ? sc_prep_kernel<D, true> : sc_prep_kernel<D, false>;
    set_smem(kernel, smem);
    kernel<<<static_cast<unsigned>(a.B * a.H * (a.nsc - 1)), kThreads, smem, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  });
}

void launch_sc_bwd(const ScArgs& a, int grid, int64_t Dh, bool split, cudaStream_t stream) {
  if (a.nsc < 2) return;
  check_head_group(a.bh0, a.nbh, a.B * a.H, "PaTH superchunk backward: bad group of heads");
  if (!a.dense && !a.dps) throw_error("PaTH superchunk backward: factored transports need the dP buffer");
  const int smem = sc_bwd_smem_bytes(Dh, split, a.parts);
  auto go = [&](auto* kernel) {
    set_smem(kernel, smem);
    kernel<<<grid, kThreads, smem, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  };
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    switch (a.parts) {
      case 1:
        if constexpr (D <= 64) return split ? go(sc_bwd_kernel<D, true, 1>) : go(sc_bwd_kernel<D, false, 1>);
        break;
      case 2:
        if constexpr (D >= 32) return split ? go(sc_bwd_kernel<D, true, 2>) : go(sc_bwd_kernel<D, false, 2>);
        break;
      case 4:
        if constexpr (D >= 64) return split ? go(sc_bwd_kernel<D, true, 4>) : go(sc_bwd_kernel<D, false, 4>);
        break;
      default: break;
    }
    throw_error("PaTH superchunk backward: unsupported number of parts for this head dim");
  });
}

void launch_sc_dwdy(const ScArgs& a, int64_t Dh, cudaStream_t stream) {
  if (a.nsc < 2) return;
  if (Dh != 128 || a.dense) throw_error("PaTH superchunk dW dY: only for factored transports (head dim 128)");
  const int smem = sc_dwdy_smem_bytes(128);
  set_smem(sc_dwdy_kernel<128>, smem);
  const int64_t grid = a.nbh * (a.nsc - 1) * a.sc;
  sc_dwdy_kernel<128><<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(a);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace sb::cuda::detail
