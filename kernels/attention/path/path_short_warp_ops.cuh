// path_short_warp_ops.cuh: the lane-per-row building blocks of the warp-per-head short PaTH kernels
// (path_short_warp_sm80.cu; internal): vector loads and stores, the triangles two matrices share in
// a 32 x 36 slot, a lane's row of X Y^T over Dh (dot_rows), rank-1 updates of a lane's row over a
// contraction index (axpy), and a lane's row or column into a slot (store_row, store_col).
#pragma once
#include <cuda_bf16.h>

#include "kernels/attention/plan.hpp"

namespace sb::cuda::detail::short_warp {

constexpr int TP = static_cast<int>(kShortWarpT);  // lanes = padded rows
constexpr int LT = TP + 4;                         // slot row stride
constexpr unsigned kAll = 0xffffffffu;

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ float at4(const float4& v, int u) { return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w; }
template <int N>
__device__ __forceinline__ void zero(float (&o)[N]) {
#pragma unroll
  for (int c = 0; c < N; ++c) o[c] = 0.f;
}

// Four consecutive elements of a global fp32 or bf16 tensor (i a multiple of 4), and their store.
template <bool BF>
__device__ __forceinline__ float4 load4(const void* p, int64_t i) {
  if constexpr (BF) {
    const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(p) + i);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
  } else {
    return *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
  }
}
template <bool BF>
__device__ __forceinline__ void store4(void* p, int64_t i, float4 v) {
  if constexpr (BF) {
    const __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 u;
    u.x = *reinterpret_cast<const uint32_t*>(&a), u.y = *reinterpret_cast<const uint32_t*>(&b);
    *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p) + i) = u;
  } else {
    *reinterpret_cast<float4*>(static_cast<float*>(p) + i) = v;
  }
}

// y = x where a == b. In PTX so that a loop of these over a register array stays selects (the
// compiler may otherwise index the array by b through local memory).
__device__ __forceinline__ void select_if_eq(float& y, float x, int a, int b) {
  asm("{\n\t.reg .pred p;\n\tsetp.eq.s32 p, %2, %3;\n\tselp.f32 %0, %1, %0, p;\n\t}" : "+f"(y) : "f"(x), "r"(a), "r"(b));
}

// Which entries (r, c) of a slot a matrix occupies (two triangular matrices may share a slot).
enum class Tri { Full, Lower, StrictLower, Upper, StrictUpper };
template <Tri S>
__device__ __forceinline__ bool tri_in(int r, int c) {
  if constexpr (S == Tri::Lower) return c <= r;
  else if constexpr (S == Tri::StrictLower) return c < r;
  else if constexpr (S == Tri::Upper) return c >= r;
  else if constexpr (S == Tri::StrictUpper) return c > r;
  else return true;
}
// v = entries (r, c0 .. c0 + 3), those outside S replaced by 0.
template <Tri S>
__device__ __forceinline__ float4 mask4(float4 v, int r, int c0) {
  if constexpr (S != Tri::Full) {
    v.x = tri_in<S>(r, c0) ? v.x : 0.f, v.y = tri_in<S>(r, c0 + 1) ? v.y : 0.f;
    v.z = tri_in<S>(r, c0 + 2) ? v.z : 0.f, v.w = tri_in<S>(r, c0 + 3) ? v.w : 0.f;
  }
  return v;
}
// Coefficients k = 4 k4 .. 4 k4 + 3 of this lane's row of a slot (entries of S, negated with NEG).
template <Tri S, bool NEG = false>
__device__ __forceinline__ float4 own4(const float* slot, int k4, int lane) {
  float4 v = mask4<S>(ld4(slot + lane * LT + 4 * k4), lane, 4 * k4);
  if constexpr (NEG) v.x = -v.x, v.y = -v.y, v.z = -v.z, v.w = -v.w;
  return v;
}

// acc[r][j] = x_r,lane . y_j over Dh for j < 4 nc, r < R (x_r, y: [32, Dh + 4] operands; acc 0
// beyond): this lane's rows of X_r Y^T, each y_j chunk read once by broadcast for all R.
template <int Dh, int R>
__device__ __forceinline__ void dot_rows(float (&acc)[R][TP], const float* const (&x)[R], const float* y, int nc,
                                         int lane) {
  constexpr int L = Dh + 4;
#pragma unroll
  for (int r = 0; r < R; ++r) zero(acc[r]);
#pragma unroll 2
  for (int c = 0; c < Dh; c += 4) {
    float4 a[R];
#pragma unroll
    for (int r = 0; r < R; ++r) a[r] = ld4(x[r] + lane * L + c);
#pragma unroll
    for (int n4 = 0; n4 < TP / 4; ++n4) {
      if (n4 >= nc) break;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = 4 * n4 + u;
        const float4 b = ld4(y + j * L + c);
#pragma unroll
        for (int r = 0; r < R; ++r)
          acc[r][j] = fmaf(a[r].w, b.w, fmaf(a[r].z, b.z, fmaf(a[r].y, b.y, fmaf(a[r].x, b.x, acc[r][j]))));
      }
    }
  }
}

// acc[n] += sum_{k < T} a_k B[k][n]: the coefficients a_k from own(k4) (k = 4 k4 .. 4 k4 + 3, this
// lane's row of the left factor), B's rows (stride ldb) read by broadcast where they hold entries of
// S (the rest reads as 0), columns in chunks of 4 below nch. Rows past T up to 4 k4 + 3 are read
// with coefficient 0 (they hold zeros or finite leftovers: every region is zeroed at the start).
template <int N, Tri S, class Own>
__device__ __forceinline__ void axpy(float (&acc)[N], Own own, const float* B, int ldb, int T, int nch) {
  constexpr bool upper = S == Tri::Upper || S == Tri::StrictUpper, lower = S == Tri::Lower || S == Tri::StrictLower;
  const int nk4 = (T + 3) >> 2;
#pragma unroll 1
  for (int k4 = 0; k4 < nk4; ++k4) {
    float4 a = own(k4);
    const int k = 4 * k4;
    a.y = k + 1 < T ? a.y : 0.f, a.z = k + 2 < T ? a.z : 0.f, a.w = k + 3 < T ? a.w : 0.f;
    const float* b = B + k * ldb;
#pragma unroll
    for (int n4 = 0; n4 < N / 4; ++n4) {
      if (n4 >= nch) break;
      if ((upper && n4 < k4) || (lower && n4 > k4)) continue;  // no entry of S in rows k .. k + 3
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = ld4(b + u * ldb + 4 * n4);
      if (S != Tri::Full && n4 == k4) {
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = mask4<S>(v[u], k + u, 4 * n4);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const float au = at4(a, u);
        acc[4 * n4] = fmaf(au, v[u].x, acc[4 * n4]), acc[4 * n4 + 1] = fmaf(au, v[u].y, acc[4 * n4 + 1]);
        acc[4 * n4 + 2] = fmaf(au, v[u].z, acc[4 * n4 + 2]), acc[4 * n4 + 3] = fmaf(au, v[u].w, acc[4 * n4 + 3]);
      }
    }
  }
}

// This lane's row of a slot: entries of S get v (0 at rows or columns >= T), the rest 0 (KEEP: the
// rest keeps its value, another matrix's). Chunks below nc.
template <Tri S, bool KEEP = false>
__device__ __forceinline__ void store_row(float* slot, const float (&v)[TP], int nc, int T, int lane) {
  float* row = slot + lane * LT;
#pragma unroll
  for (int n4 = 0; n4 < TP / 4; ++n4) {
    if (n4 >= nc) break;
    float4 o = KEEP ? ld4(row + 4 * n4) : make_float4(0.f, 0.f, 0.f, 0.f);
    float e[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = 4 * n4 + u;
      if (tri_in<S>(lane, j)) e[u] = lane < T && j < T ? v[j] : 0.f;
    }
    st4(row + 4 * n4, make_float4(e[0], e[1], e[2], e[3]));
  }
}
// This lane's column of a slot, rows below 4 nc: entries (j, lane) of S get v[j] (0 at rows or
// columns >= T); the rest is left alone.
template <Tri S>
__device__ __forceinline__ void store_col(float* slot, const float (&v)[TP], int nc, int T, int lane) {
#pragma unroll
  for (int j = 0; j < TP; ++j) {
    if ((j >> 2) >= nc) break;
    if (tri_in<S>(j, lane)) slot[j * LT + lane] = lane < T && j < T ? v[j] : 0.f;
  }
}

// Row `lane` (< T) of a [T, Dh] head tensor (o times mul) into global memory.
template <int Dh, bool BF>
__device__ __forceinline__ void store_grow(void* p, int64_t row, const float (&o)[Dh], float mul) {
#pragma unroll
  for (int c = 0; c < Dh; c += 4)
    store4<BF>(p, row + c, make_float4(mul * o[c], mul * o[c + 1], mul * o[c + 2], mul * o[c + 3]));
}

}  // namespace sb::cuda::detail::short_warp
