// path_factors.cu: the per-block UT factors of PaTH (formulas of src/nn/path_internal.hpp) and
// their backward (src/nn/path_backward.cpp factors_backward), on tensor cores. One CTA of 8 warps
// per (64-row block, head): warp w owns rows [16 (w % 4), +16) and half the columns of every
// product; every product splits both operands into bf16 hi + lo
// (fp32-level accuracy, ~1e-5). The 64 x 64 unit-lower inverse Minv = (I + strictLower(D W W^T))^{-1}
// is blocked on CUDA cores; Tinv = Minv D.
#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {
namespace {

constexpr int kThreads = 256;  // both factor kernels: 8 warps

// How both factor kernels split a 64-row product over their 8 warps: rows [r0, r0 + 16), columns
// [c64, c64 + 32) of the 64-wide products and [cD, cD + 8 NTH) of the Dh-wide ones; at Dh = 16
// (one pair of n-tiles) warps 0-3 do all Dh columns and own is false for warps 4-7.
template <int Dh>
struct WarpPart {
  static constexpr int NTD = Dh / 8, NTH = NTD >= 4 ? NTD / 2 : NTD;
  int r0, c64, cD;
  bool own;  // this warp computes Dh-wide outputs
  __device__ explicit WarpPart(int warp)
      : r0(16 * (warp & 3)), c64(32 * (warp >> 2)), cD(NTD >= 4 ? (warp >> 2) * 8 * NTH : 0),
        own(NTD >= 4 || warp < 4) {}
};
constexpr int kLd = kL + 1;  // padded stride of 64 x 64 fp32 matrices

// Minv = M^{-1}, M = I + L, L = strictLower(diag(bt) gram), by 16 x 16 blocks X_IJ (I >= J):
// round 0 inverts the diagonal blocks D_I = X_II (one thread per column, forward substitution in
// registers) while the other threads zero the blocks above the diagonal; round d = 1, 2, 3 then
// forms the blocks d below it, X_IJ = -D_I sum_{P=J}^{I-1} L_IP X_PJ (I = J + d), every loop of
// fixed length. Mi, tmp, gram: [64][kLd] fp32. Ends with a barrier.
template <int d>
__device__ __forceinline__ void inverse_round(float* Mi, float* tmp, const float* gram, const float* bt, int tid) {
  constexpr int kPer = (4 - d) * 256 / kThreads;  // 16 x 16 blocks (4 - d of them) per thread
#pragma unroll
  for (int u = 0; u < kPer; ++u) {  // tmp_IJ = L_IP X_PJ over P = J .. I-1
    const int e = tid + u * kThreads, J = e >> 8, row = 16 * (J + d) + ((e >> 4) & 15), col = 16 * J + (e & 15);
    const float* g = gram + row * kLd + 16 * J;
    const float* x = Mi + 16 * J * kLd + col;
    float acc = 0.f;
#pragma unroll
    for (int p = 0; p < 16 * d; ++p) acc += g[p] * x[p * kLd];
    tmp[row * kLd + col] = bt[row] * acc;
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kPer; ++u) {  // X_IJ = -D_I tmp_IJ
    const int e = tid + u * kThreads, J = e >> 8, I = J + d, row = 16 * I + ((e >> 4) & 15), col = 16 * J + (e & 15);
    const float* dI = Mi + row * kLd + 16 * I;
    const float* t = tmp + 16 * I * kLd + col;
    float acc = 0.f;
#pragma unroll
    for (int p = 0; p < 16; ++p) acc += dI[p] * t[p * kLd];  // D_I is lower: the rest are zeros
    Mi[row * kLd + col] = -acc;
  }
  __syncthreads();
}

__device__ void unit_lower_inverse(float* Mi, float* tmp, const float* gram, const float* bt, int tid) {
  if (tid < kL) {  // column tid of D_I, I = tid / 16
    const int b0 = tid & ~15, j = tid & 15;
    float x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float acc = 0.f;
#pragma unroll
      for (int p = 0; p < i; ++p) acc += gram[(b0 + i) * kLd + b0 + p] * x[p];
      x[i] = i < j ? 0.f : (i == j ? 1.f : -bt[b0 + i] * acc);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) Mi[(b0 + i) * kLd + tid] = x[i];
  } else {
    for (int e = tid - kL; e < kL * kL; e += kThreads - kL) {
      const int r = e / kL, c = e % kL;
      if ((c >> 4) > (r >> 4)) Mi[r * kLd + c] = 0.f;
    }
  }
  __syncthreads();
  inverse_round<1>(Mi, tmp, gram, bt, tid);
  inverse_round<2>(Mi, tmp, gram, bt, tid);
  inverse_round<3>(Mi, tmp, gram, bt, tid);
}

// Fills a 64 x 64 tile (split planes) with src[r][c] * (scale ? scale[c] : 1); src fp32, row stride ld.
__device__ __forceinline__ void tile_from_f32(const Tile& T, const float* src, int ld, const float* scale, int tid) {
  for (int e = tid; e < kL * kL / 2; e += kThreads) {
    const int r = 2 * e / kL, c = 2 * e % kL;
    float x = src[r * ld + c], y = src[r * ld + c + 1];
    if (scale) x *= scale[c], y *= scale[c + 1];
    uint32_t h, l;
    split_pack(x, y, h, l);
    *reinterpret_cast<uint32_t*>(T.hi + r * T.ld + c) = h;
    *reinterpret_cast<uint32_t*>(T.lo + r * T.ld + c) = l;
  }
}

// acc -> fp32 [*][ld] matrix rows m0.. (shared or global).
template <int NT>
__device__ __forceinline__ void store_frag_f32(float* dst, int64_t ld, int m0, const float (&acc)[NT][4], int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[(m0 + g + ((e & 2) ? 8 : 0)) * ld + nt * 8 + 2 * t + (e & 1)] = acc[nt][e];
}

// Keeps entries with col < row (strictly lower) of a warp's 16-row tile at rows m0.., columns c0...
template <int NT>
__device__ __forceinline__ void mask_strict_lower(float (&acc)[NT][4], int m0, int c0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (c0 + nt * 8 + 2 * t + (e & 1) >= m0 + g + ((e & 2) ? 8 : 0)) acc[nt][e] = 0.f;
}

template <int NT>
__device__ __forceinline__ void sub(float (&a)[NT][4], const float (&b)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) a[i][e] -= b[i][e];
}

// The tile's columns from c0 on (fragment stores at a column offset).
__device__ __forceinline__ Tile from_col(const Tile& t, int c0) {
  Tile s = t;
  s.hi += c0;
  if (s.lo) s.lo += c0;
  return s;
}

struct PrepSmem {
  Tile W, Ti, K, Y, Zt, Cm;
  float *gram = nullptr, *Mi = nullptr, *tmp = nullptr, *bt = nullptr;
  int bytes = 0;
};
// Regions are reused across the phases (74 KB at Dh = 64 in bf16: 3 CTAs per SM):
//   tmp (the inverse's scratch) | Ti;   gram | K | Y | Zt;   Minv | Cm.
__host__ __device__ inline PrepSmem prep_smem(unsigned char* base, int Dh, bool f32) {
  Carve cv{base, 0};
  PrepSmem s;
  s.W = cv.tile(kL, Dh, true);
  int start = cv.off, end = start;
  auto overlay = [&](auto make) {  // places make() at `start`, extends the region's end
    cv.off = start;
    make();
    end = cv.off > end ? cv.off : end;
  };
  overlay([&] { s.tmp = cv.floats(kL * kLd); });
  overlay([&] { s.Ti = cv.tile(kL, kL, true); });
  start = cv.off = end;
  overlay([&] { s.gram = cv.floats(kL * kLd); });
  overlay([&] { s.K = cv.tile(kL, Dh, f32); });
  overlay([&] { s.Y = cv.tile(kL, Dh, true); });
  overlay([&] { s.Zt = cv.tile(kL, kL, true); });
  start = cv.off = end;
  overlay([&] { s.Mi = cv.floats(kL * kLd); });
  overlay([&] { s.Cm = cv.tile(kL, kL, true); });
  cv.off = end;
  s.bt = cv.floats(kL);
  s.bytes = cv.off;
  return s;
}

// Per-block factors: gram = W W^T, Minv, Tinv = Minv D, Cm = strictLower(W K^T), Y = Tinv W,
// C = W^T Y (dense), Z = Tinv Cm, Kt = K - Z^T W. Writes kt / y / c planes, z and minv. Warps split
// the products as WarpPart says.
template <int Dh>
__global__ void __launch_bounds__(kThreads, Dh <= 64 ? 3 : 2) prep_tc_kernel(PrepOut o, const void* k, const float* w,
                                                           const float* beta, int64_t T, int64_t H, int nb,
                                                           bool is_bf16, bool dense) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16, NTH = WarpPart<Dh>::NTH;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const bool f32 = !is_bf16;
  const PrepSmem sm = prep_smem(smem_raw, Dh, f32);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const WarpPart<Dh> wp(warp);
  const int r0 = wp.r0, c64 = wp.c64, cD = wp.cD;
  const bool ownD = wp.own;
  const int m = static_cast<int>(blockIdx.x % nb);
  const int64_t bh = blockIdx.x / nb, b = bh / H, h = bh % H, k0 = static_cast<int64_t>(m) * kL;
  const int64_t Tp = static_cast<int64_t>(nb) * kL, rowbase = (bh * Tp + k0) * Dh, tri = (bh * nb + m) * kTriFloats;
  const int64_t rs = H * Dh, g0 = ((b * T + k0) * H + h) * Dh;  // row k0 of (b, h)
  const int valid = static_cast<int>(min64(kL, T - k0));
  const size_t esz = is_bf16 ? 2 : 4;
  const void* kb = static_cast<const unsigned char*>(k) + g0 * esz;
  load_tile(sm.W, kL, Dh, w + g0, rs, false, valid, tid, kThreads);
  if (tid < kL) sm.bt[tid] = tid < valid ? beta[(b * T + k0 + tid) * H + h] : 0.f;
  __syncthreads();
  {
    float acc[4][4];
    zero(acc);
    mma_sA<4, false, BL::NK>(acc, sm.W, r0, 0, KTD, sm.W, 0, c64, true, lane);  // W W^T
    store_frag_f32(sm.gram + c64, kLd, r0, acc, lane);
  }
  __syncthreads();
  unit_lower_inverse(sm.Mi, sm.tmp, sm.gram, sm.bt, tid);  // ends with a barrier
  if (o.minv)  // packed strictly lower part (the diagonal is 1), a quad per store
    for (int e = tid; e < kL * kL / 4; e += kThreads) {
      const int r = e >> 4, c = (e & 15) * 4;
      if (c < r) {
        const float* src = sm.Mi + r * kLd + c;
        *reinterpret_cast<float4*>(o.minv + tri + tri_row(r) + c) =
            make_float4(src[0], c + 1 < r ? src[1] : 0.f, c + 2 < r ? src[2] : 0.f, c + 3 < r ? src[3] : 0.f);
      }
    }
  tile_from_f32(sm.Ti, sm.Mi, kLd, sm.bt, tid);  // Tinv = Minv D (tmp is done)
  load_tile(sm.K, kL, Dh, kb, rs, is_bf16, valid, tid, kThreads);  // gram is done
  __syncthreads();
  {
    float acc[4][4];
    zero(acc);
    mma_sA<4, false, BL::NK>(acc, sm.W, r0, 0, KTD, sm.K, 0, c64, true, lane);  // W K^T (Minv is done)
    mask_strict_lower(acc, r0, c64, lane);
    store_frag(from_col(sm.Cm, c64), r0, acc, 1.f, lane);
  }
  __syncthreads();  // Cm complete, K no longer read
  if (ownD) {
    float acc[NTH][4];
    zero(acc);
    mma_sA<NTH, false, BL::KN>(acc, sm.Ti, r0, 0, 4, sm.W, 0, cD, true, lane);  // Y = Tinv W
    if (dense) store_frag(from_col(sm.Y, cD), r0, acc, 1.f, lane);
    store_frag_planes(o.y_hi + rowbase + cD, o.y_lo + rowbase + cD, Dh, r0, acc, lane);
  }
  float z[4][4];
  zero(z);
  mma_sA<4, false, BL::KN>(z, sm.Ti, r0, 0, 4, sm.Cm, 0, c64, true, lane);  // Z = Tinv Cm
  store_tri_frag(o.z + tri, r0, c64, z, lane);  // Z is strictly lower
  __syncthreads();  // Y complete
  if (dense) {  // C = W^T Y: (16-row tile, column half) per warp
    const int64_t cb = (bh * nb + m) * Dh * Dh;
    constexpr int kHalves = NTD >= 4 ? 2 : 1;
    for (int job = warp; job < (Dh / 16) * kHalves; job += kThreads / 32) {
      const int mt = job / kHalves, c0 = (job % kHalves) * 8 * NTH;
      float acc[NTH][4];
      zero(acc);
      mma_sA<NTH, true, BL::KN>(acc, sm.W, 16 * mt, 0, 4, sm.Y, 0, c0, true, lane);
      store_frag_planes(o.c_hi + cb + c0, o.c_lo + cb + c0, Dh, 16 * mt, acc, lane);
    }
    __syncthreads();  // Y no longer read: Zt takes its place
  }
  store_frag(from_col(sm.Zt, c64), r0, z, 1.f, lane);
  __syncthreads();
  if (ownD) {
    float acc[NTH][4], kr[NTH][4];
    zero(acc);
    mma_sA<NTH, true, BL::KN>(acc, sm.Zt, r0, 0, 4, sm.W, 0, cD, true, lane);  // Z^T W
    load_frag_global(kr, static_cast<const unsigned char*>(kb) + cD * esz, rs, is_bf16, r0, valid, lane);
    sub(kr, acc);  // Kt = K - Z^T W
    store_frag_planes(o.kt_hi + rowbase + cD, o.kt_lo ? o.kt_lo + rowbase + cD : nullptr, Dh, r0, kr, lane);
  }
}

struct FactorsSmem {
  Tile W, K, dY, dKt, X1, dC, Z, R, dZ, Mi, Cm, Ti, Yd, dP;
  float *gram = nullptr, *bt = nullptr, *dbp = nullptr;
  int bytes = 0;
};
// Regions are reused across phases: dKt | (X1, dC -> dGram);  Z | R;  dZ | Minv;  Cm | gram (fp32).
__host__ __device__ inline FactorsSmem factors_smem(unsigned char* base, int Dh, bool f32, bool dense) {
  Carve cv{base, 0};
  FactorsSmem s;
  s.W = cv.tile(kL, Dh, true);
  s.K = cv.tile(kL, Dh, f32);
  s.dY = cv.tile(kL, Dh, true);
  int start = cv.off;
  s.dKt = cv.tile(kL, Dh, true);
  int end = cv.off;
  cv.off = start;
  s.X1 = cv.tile(kL, kL, true);
  s.dC = cv.tile(kL, kL, true);
  cv.off = cv.off > end ? cv.off : end;
  s.Z = cv.tile(kL, kL, true);
  s.R = s.Z;
  s.dZ = cv.tile(kL, kL, true);
  s.Mi = s.dZ;
  s.Cm = cv.tile(kL, kL, true);
  s.gram = reinterpret_cast<float*>(s.Cm.hi);  // [64][kLd] fp32 fits in the 64 x 72 x 2-plane tile
  s.Ti = cv.tile(kL, kL, true);
  if (dense) {
    s.Yd = cv.tile(kL, Dh, true);
    s.dP = cv.tile(Dh, Dh, true);
  }
  s.bt = cv.floats(kL);
  s.dbp = cv.floats(2 * kL);
  s.bytes = cv.off;
  return s;
}

// One CTA of 8 warps per (64-row block, head of the group a.bh0 .. a.bh0 + a.nbh - 1): the factors
// (y, z, minv) at the global row bh (rowbase, tri), the accumulators at the local row lb (arow,
// ablk). Warps split the products as WarpPart says.
template <int Dh>
__global__ void __launch_bounds__(kThreads) factors_tc_kernel(FactorsBwdArgs a, int64_t T, int64_t H, int nb,
                                                              bool is_bf16, bool dense) {
  constexpr int KTD = Dh / 16, NTH = WarpPart<Dh>::NTH;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const bool f32 = !is_bf16;
  const FactorsSmem sm = factors_smem(smem_raw, Dh, f32, dense);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const WarpPart<Dh> wp(warp);
  const int r0 = wp.r0, c64 = wp.c64, cD = wp.cD, half = warp >> 2;
  const bool ownD = wp.own;
  const int m = static_cast<int>(blockIdx.x % nb);
  const int64_t lb = blockIdx.x / nb, bh = a.bh0 + lb, b = bh / H, h = bh % H, k0 = static_cast<int64_t>(m) * kL;
  const int64_t Tp = static_cast<int64_t>(nb) * kL, rowbase = (bh * Tp + k0) * Dh, tri = (bh * nb + m) * kTriFloats;
  const int64_t arow = (lb * Tp + k0) * Dh, ablk = (lb * nb + m) * kL * kL;
  const int64_t rs = H * Dh, g0 = ((b * T + k0) * H + h) * Dh;
  const int valid = static_cast<int>(min64(kL, T - k0));
  const size_t esz = is_bf16 ? 2 : 4;
  const void* kb = static_cast<const unsigned char*>(a.k) + g0 * esz;
  // Every input tile's global loads are issued before any is converted and stored: one latency
  // instead of one per tile (two rounds at Dh = 128, for registers). kQ quads per thread cover a
  // 64 x Dh tile, kQT a 64 x 64 triangle, kQP the dense Dh x Dh dP.
  constexpr int kQ = (kL * Dh / 4 + kThreads - 1) / kThreads, kQT = kL * kL / 4 / kThreads;
  constexpr int kQP = (Dh * Dh / 4 + kThreads - 1) / kThreads;
  const float* dp_src = a.dp_acc + (lb * nb + m) * Dh * Dh;
  float4 fW[kQ], fK[kQ], fdKt[kQ];
  tile_issue(fW, tid, kL, Dh, a.w + g0, rs, false, valid, kThreads);
  tile_issue(fK, tid, kL, Dh, kb, rs, is_bf16, valid, kThreads);
  tile_issue(fdKt, tid, kL, Dh, a.dkt_acc + arow, Dh, false, kL, kThreads);
  auto finish_first = [&] {
    tile_finish(sm.W, fW, tid, kL, Dh, false, kThreads);
    tile_finish(sm.K, fK, tid, kL, Dh, is_bf16, kThreads);
    tile_finish(sm.dKt, fdKt, tid, kL, Dh, false, kThreads);
  };
  if constexpr (Dh >= 128) finish_first();
  constexpr bool kDenseOk = path_dense(Dh);  // the dense branch is compiled only where it can run
  float4 fZ[kQT], fTi[kQT], fD[kDenseOk && kQP > kQ ? kQP : kQ];
  tri_issue(fZ, tid, a.z + tri, kThreads);
  tri_issue(fTi, tid, a.minv + tri, kThreads);  // Ti = Minv D from the forward factors (D below)
  if (kDenseOk && dense) {
    copy_tile_async(sm.Yd, kL, Dh, reinterpret_cast<const bf16*>(a.y_hi) + rowbase,
                    reinterpret_cast<const bf16*>(a.y_lo) + rowbase, Dh, kL, tid, kThreads);
    tile_issue(fD, tid, Dh, Dh, dp_src, Dh, false, Dh, kThreads);
  } else {
    tile_issue(fD, tid, kL, Dh, a.dy_acc + arow, Dh, false, kL, kThreads);
  }
  cp_async_commit();
  if (tid < kL) sm.bt[tid] = tid < valid ? a.beta[(b * T + k0 + tid) * H + h] : 0.f;
  if constexpr (Dh < 128) finish_first();
  tri_finish(sm.Z, fZ, tid, 0.f, nullptr, kThreads);
  if (kDenseOk && dense)
    tile_finish(sm.dP, fD, tid, Dh, Dh, false, kThreads);
  else
    tile_finish(sm.dY, fD, tid, kL, Dh, false, kThreads);
  cp_async_wait<0>();
  __syncthreads();
  tri_finish(sm.Ti, fTi, tid, 1.f, sm.bt, kThreads);
  // dW (columns cD..) from its accumulator; dK = dk_acc + dKt (Kt = K - Z^T W).
  float dW[NTH][4], tmp[NTH][4], dK[NTH][4];
  if (ownD) {
    load_frag_global(dW, a.dw_acc + arow + cD, Dh, false, r0, kL, lane);
    load_frag_global(dK, a.dk_acc + arow + cD, Dh, false, r0, kL, lane);
    load_frag_global(tmp, a.dkt_acc + arow + cD, Dh, false, r0, kL, lane);
#pragma unroll
    for (int i = 0; i < NTH; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) dK[i][e] += tmp[i][e];
  }
  // Phase 1: dense block-product gradient (dW -= Y dP^T, dY -= W dP); dZ -= W dKt^T; dW -= Z dKt;
  // Cm = strictLower(W K^T).
  if (dense && ownD) {
    zero(tmp);
    mma_sA<NTH, false, BL::NK>(tmp, sm.Yd, r0, 0, KTD, sm.dP, 0, cD, true, lane);
    sub(dW, tmp);
    float dy[NTH][4];
    load_frag_global(dy, a.dy_acc + arow + cD, Dh, false, r0, kL, lane);
    zero(tmp);
    mma_sA<NTH, false, BL::KN>(tmp, sm.W, r0, 0, KTD, sm.dP, 0, cD, true, lane);
    sub(dy, tmp);
    store_frag(from_col(sm.dY, cD), r0, dy, 1.f, lane);
  }
  {
    float acc[4][4], dz[4][4];
    load_frag_global(dz, a.dz_acc + ablk + c64, kL, false, r0, kL, lane);
    zero(acc);
    mma_sA<4, false, BL::NK>(acc, sm.W, r0, 0, KTD, sm.dKt, 0, c64, true, lane);
    sub(dz, acc);
    store_frag(from_col(sm.dZ, c64), r0, dz, 1.f, lane);
    if (ownD) {
      zero(tmp);
      mma_sA<NTH, false, BL::KN>(tmp, sm.Z, r0, 0, 4, sm.dKt, 0, cD, true, lane);
      sub(dW, tmp);
    }
    zero(acc);
    mma_sA<4, false, BL::NK>(acc, sm.W, r0, 0, KTD, sm.K, 0, c64, true, lane);
    mask_strict_lower(acc, r0, c64, lane);
    store_frag(from_col(sm.Cm, c64), r0, acc, 1.f, lane);
  }
  __syncthreads();
  // Phase 2: dTinv = dZ Cm^T + dY W^T (X1); dC = strictLower(Tinv^T dZ).
  {
    float acc[4][4];
    zero(acc);
    mma_sA<4, false, BL::NK>(acc, sm.dZ, r0, 0, 4, sm.Cm, 0, c64, true, lane);
    mma_sA<4, false, BL::NK>(acc, sm.dY, r0, 0, KTD, sm.W, 0, c64, true, lane);
    store_frag(from_col(sm.X1, c64), r0, acc, 1.f, lane);
    zero(acc);
    mma_sA<4, true, BL::KN>(acc, sm.Ti, r0, 0, 4, sm.dZ, 0, c64, true, lane);
    mask_strict_lower(acc, r0, c64, lane);
    store_frag(from_col(sm.dC, c64), r0, acc, 1.f, lane);
  }
  __syncthreads();
  // Phase 3: dW += dC K + Tinv^T dY; dK += dC^T W, written; gram = W W^T (fp32); Minv (split).
  if (ownD) {
    mma_sA<NTH, false, BL::KN>(dW, sm.dC, r0, 0, 4, sm.K, 0, cD, true, lane);
    mma_sA<NTH, true, BL::KN>(dW, sm.Ti, r0, 0, 4, sm.dY, 0, cD, true, lane);
    mma_sA<NTH, true, BL::KN>(dK, sm.dC, r0, 0, 4, sm.W, 0, cD, true, lane);
    store_frag_global(static_cast<unsigned char*>(a.dk) + (g0 + cD) * esz, rs, is_bf16, r0, valid, dK, 1.f, lane);
  }
  {
    float acc[4][4];
    zero(acc);
    mma_sA<4, false, BL::NK>(acc, sm.W, r0, 0, KTD, sm.W, 0, c64, true, lane);
    store_frag_f32(sm.gram + c64, kLd, r0, acc, lane);
  }
  load_tri_tile(sm.Mi, a.minv + tri, 1.f, nullptr, tid, kThreads);
  __syncthreads();
  // Phase 4: R = Minv^T dTinv (into Z's place); E = strictLower(-R Tinv^T);
  // dbeta_r = R_rr + sum_{p<r} E_rp gram_rp (two column halves, summed through dbp);
  // dGram = D E (into dC's place).
  float R[4][4];
  zero(R);
  mma_sA<4, true, BL::KN>(R, sm.Mi, r0, 0, 4, sm.X1, 0, c64, true, lane);
  store_frag(from_col(sm.R, c64), r0, R, 1.f, lane);
  __syncthreads();
  {
    float E[4][4];
    zero(E);
    mma_sA<4, false, BL::NK>(E, sm.R, r0, 0, 4, sm.Ti, 0, c64, true, lane);
    mask_strict_lower(E, r0, c64, lane);
    float part[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = r0 + g + ((e & 2) ? 8 : 0), col = c64 + nt * 8 + 2 * tq + (e & 1);
        E[nt][e] = -E[nt][e];
        part[e >> 1] += E[nt][e] * sm.gram[row * kLd + col] + (col == row ? R[nt][e] : 0.f);
        E[nt][e] *= sm.bt[row];
      }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const float s = quad_sum(part[rr]);
      if (tq == 0) sm.dbp[half * kL + r0 + g + 8 * rr] = s;
    }
    store_frag(from_col(sm.dC, c64), r0, E, 1.f, lane);
  }
  __syncthreads();
  if (tid < valid) a.dbeta[(b * T + k0 + tid) * H + h] = sm.dbp[tid] + sm.dbp[kL + tid];
  // Phase 5: dW += (dGram + dGram^T) W; write dw.
  if (ownD) {
    mma_sA<NTH, false, BL::KN>(dW, sm.dC, r0, 0, 4, sm.W, 0, cD, true, lane);
    mma_sA<NTH, true, BL::KN>(dW, sm.dC, r0, 0, 4, sm.W, 0, cD, true, lane);
    store_frag_global(a.dw + g0 + cD, rs, false, r0, valid, dW, 1.f, lane);
  }
}

}  // namespace

void launch_path_prep(const PrepOut& o, const void* k, const float* w, const float* beta, int64_t B, int64_t T,
                      int64_t H, int64_t Dh, bool bf16, cudaStream_t s) {
  const int nb = static_cast<int>((T + kL - 1) / kL);
  const int smem = prep_smem(nullptr, static_cast<int>(Dh), !bf16).bytes;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    CUDA_CHECK(cudaFuncSetAttribute(prep_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    prep_tc_kernel<D><<<static_cast<unsigned>(nb * B * H), kThreads, smem, s>>>(o, k, w, beta, T, H, nb, bf16,
                                                                                  path_dense(D));
    SB_CUDA_CHECK_LAUNCH();
  });
}

void launch_path_factors_bwd(const FactorsBwdArgs& a, int64_t B, int64_t T, int64_t H, int64_t Dh, bool bf16,
                             cudaStream_t s) {
  check_head_group(a.bh0, a.nbh, B * H, "PaTH factor backward: bad group of heads");
  const int nb = static_cast<int>((T + kL - 1) / kL);
  const bool dense = path_dense(Dh);
  const int smem = factors_smem(nullptr, static_cast<int>(Dh), !bf16, dense).bytes;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    CUDA_CHECK(cudaFuncSetAttribute(factors_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    factors_tc_kernel<D><<<static_cast<unsigned>(nb * a.nbh), kThreads, smem, s>>>(a, T, H, nb, bf16, dense);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
