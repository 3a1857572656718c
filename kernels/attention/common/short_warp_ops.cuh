// short_warp_ops.cuh: the building blocks of the short-sequence warp kernels (PaTH:
// path/path_short_warp_sm80.cu, softmax: softmax/softmax_short_warp_sm80.cu and, for its fragments,
// gate prefix sums and RoPE's inverse rotation, softmax_short_bf16_sm80.cu; internal): vector loads
// and stores, a head's place and its rows into shared memory, the triangles two matrices share in a
// 32 x 36 slot, the tensor-core products (tf32 mma.sync, one or three passes; k-steps outside a
// triangle skipped, one-pass operands rounded once when stored) from shared memory into fragments and
// out of them, and the causal softmax, its backward and the forget gate's bias and gradient in fragments.
#pragma once
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/attention/plan.hpp"

namespace sb::cuda::detail::short_warp {

constexpr int TP = static_cast<int>(kShortWarpT);  // lanes = padded rows
constexpr int LT = TP + 4;                         // slot row stride
constexpr unsigned kAll = 0xffffffffu;
constexpr int kThreads = 64;                       // two warps a head

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ float at4(const float4& v, int u) { return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w; }
template <int N>
__device__ __forceinline__ void zero(float (&o)[N]) {
#pragma unroll
  for (int c = 0; c < N; ++c) o[c] = 0.f;
}

// Four consecutive elements of a global fp32 or bf16 tensor as loaded (Raw: bf16 pairs kept packed
// until they are stored) and widened to fp32.
template <bool BF>
using Raw4 = std::conditional_t<BF, uint2, float4>;
template <bool BF>
__device__ __forceinline__ Raw4<BF> load_raw4(const void* p, int64_t i) {
  if constexpr (BF) return *reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(p) + i);
  else return *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
}
template <bool BF>
__device__ __forceinline__ float4 widen4(const Raw4<BF>& u) {
  if constexpr (BF) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
  } else {
    return u;
  }
}
__device__ __forceinline__ uint32_t tf32_bits(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// x rounded to tf32 (to nearest, ties away; low 13 bits cleared): the value a one-pass product reads.
__device__ __forceinline__ float round_tf32(float x) { return __uint_as_float(tf32_bits(x) & 0xffffe000u); }

// Rows t < T of a [T, Dh] head tensor (row t at e0 + t es), a thread's share held in registers
// between load() and store() into an operand with rows of Dh + 4 floats, so that a kernel can have
// every tensor's loads in flight at once (and a late operand's before the work that precedes it).
// With ROUND, store() rounds to tf32 (an fp32 operand of the one-pass kernels, which then read it as
// it is: Read::tf32).
template <int Dh, bool BF>
struct HeadRows {
  static constexpr int C4 = Dh / 4, N = 32 * C4 / kThreads;  // float4 chunks a row; chunks a thread
  static constexpr int kRegisters = N * static_cast<int>(sizeof(Raw4<BF>)) / 4;
  Raw4<BF> r[N];
  __device__ __forceinline__ void load(const void* g, int64_t e0, int64_t es, int T, int tid) {
#pragma unroll
    for (int it = 0; it < N; ++it) {
      const int idx = tid + kThreads * it, t = idx / C4, c = 4 * (idx % C4);
      if (t < T) r[it] = load_raw4<BF>(g, e0 + t * es + c);
    }
  }
  template <bool ROUND = false>
  __device__ __forceinline__ void store(float* x, int T, int tid) const {
#pragma unroll
    for (int it = 0; it < N; ++it) {
      const int idx = tid + kThreads * it, t = idx / C4, c = 4 * (idx % C4);
      if (t >= T) continue;
      float4 v = widen4<BF>(r[it]);
      if constexpr (ROUND) v = make_float4(round_tf32(v.x), round_tf32(v.y), round_tf32(v.z), round_tf32(v.w));
      st4(x + t * (Dh + 4) + c, v);
    }
  }
};

// Where head bh = b H + h lives: row t of a [B, T, H] tensor at s0 + t H, of a [B, T, H, Dh] one at
// e0 + t es.
struct HeadAt {
  int64_t s0, e0, es;
};
__device__ __forceinline__ HeadAt head_at(int64_t bh, int64_t T, int64_t H, int Dh) {
  const int64_t s0 = (bh / H) * T * H + bh % H;
  return {s0, s0 * Dh, H * Dh};
}
// Row 0 of head bh in a [B, T, ld] matrix whose rows hold the H heads' Dh columns first (row t at
// that + t ld): q, k, v and dq, dk, dv side by side in a wider matrix (AttnDims::qkv_ld, grad_ld).
__device__ __forceinline__ int64_t head_row0(int64_t bh, int64_t T, int64_t H, int Dh, int64_t ld) {
  return (bh / H) * T * ld + (bh % H) * Dh;
}

// The gate's prefix sum G_lane = sum_{s=1..lane} log f_s (double; 0 without a gate and past T) of the head
// whose position 0 is at s0 (stride H), a lane each.
__device__ __forceinline__ double gate_prefix_lane(const float* log_f, int64_t s0, int64_t H, int T, int lane) {
  double g = log_f && lane >= 1 && lane < T ? static_cast<double>(log_f[s0 + lane * H]) : 0.0;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(kAll, g, o);
    if (lane >= o) g += y;
  }
  return g;
}
// The same prefix sums into G[32], by warp 0.
__device__ __forceinline__ void gate_prefix(double* G, const float* log_f, int64_t s0, int64_t H, int T, int tid) {
  if (tid < 32) G[tid] = gate_prefix_lane(log_f, s0, H, T, tid);
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
// Tensor-core products over m16n8k8 tf32 tiles, each warp of a head its m-tile mt (rows 16 mt ..
// 16 mt + 15) of a [32, N] result, in fragments: f.v[nt][e] is entry (frag_row(mt, e),
// frag_col(nt, e)), so a lane holds rows 16 mt + g and 16 mt + g + 8 (g = lane / 4) at columns
// 8 nt + 2 t, 8 nt + 2 t + 1 (t = lane % 4): a row is spread over a quad.
template <int N>
struct Frag {
  float v[N / 8][4];
};
__device__ __forceinline__ int frag_row(int mt, int e, int lane) { return 16 * mt + (lane >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int frag_col(int nt, int e, int lane) { return 8 * nt + 2 * (lane & 3) + (e & 1); }
template <int N>
__device__ __forceinline__ void zero(Frag<N>& f) {
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) f.v[nt][e] = 0.f;
}
template <int N>
__device__ __forceinline__ void scale_frag(Frag<N>& f, float mul) {
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) f.v[nt][e] *= mul;
}

// The inverse rotation of a [32, Dh] result's rows t < T in fragments (rope.cu's backward): columns
// m and m + Dh / 2 of a row are entries nt and nt + Dh / 16 of the same lane.
template <int Dh>
__device__ void rotate_back(Frag<Dh>& f, const float2* cs, int T, int lane, int mt) {
  constexpr int half = Dh / 2, P = Dh / 16;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(mt, 2 * h, lane);
    if (i >= T) continue;
#pragma unroll
    for (int nt = 0; nt < P; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float2 a = cs[i * half + frag_col(nt, e, lane)];
        const float x1 = f.v[nt][2 * h + e], x2 = f.v[nt + P][2 * h + e];
        f.v[nt][2 * h + e] = x1 * a.x + x2 * a.y;
        f.v[nt + P][2 * h + e] = x2 * a.x - x1 * a.y;
      }
  }
}

// How a view reads its storage: entries outside its triangle masked to 0 (the slot's other part
// holds another matrix), or stored as zeros there (zeroed: no mask), or (tf32) an operand tensor
// that the one-pass kernels stored rounded to tf32 (HeadRows::store<true>, or bf16 values), which their
// products read without a conversion. Every slot and operand holds 0 at rows and columns >= T.
enum class Read { masked, zeroed, tf32 };

// Entry (r, c) of a matrix in shared memory stored by rows at p (stride ld), or with TR its
// transpose (read at (c, r)); entries outside S (in storage coordinates) read as 0, NEG negated.
// ROUNDED: a slot that the one-pass kernels store rounded to tf32 (store_frag's ROUND), which their
// products then read as it is (as Read::tf32).
template <Tri S, bool TR = false, bool NEG = false, Read R = Read::masked, bool ROUNDED = false>
struct View {
  const float* p;
  int ld;
  static constexpr bool kTf32 = R == Read::tf32 || ROUNDED, kTrans = TR;
  // Read as A(i, k) of a product: zero for k > i (kLower) or k < i (kUpper), by the triangle.
  static constexpr bool kLowerTri = S == Tri::Lower || S == Tri::StrictLower;
  static constexpr bool kUpperTri = S == Tri::Upper || S == Tri::StrictUpper;
  static constexpr bool kLower = TR ? kUpperTri : kLowerTri, kUpper = TR ? kLowerTri : kUpperTri;
  // v, the stored entry of (r, c), as read: masked outside S, negated.
  __device__ __forceinline__ float as_read(float v, int r, int c) const {
    const int sr = TR ? c : r, sc = TR ? r : c;
    if constexpr (R == Read::masked) return tri_in<S>(sr, sc) ? (NEG ? -v : v) : 0.f;
    else return NEG ? -v : v;
  }
  __device__ __forceinline__ float operator()(int r, int c) const {
    return as_read(TR ? p[c * ld + r] : p[r * ld + c], r, c);
  }
};
// A triangle stored with zeros around it; an operand tensor by rows and transposed.
template <Tri S, bool TR = false, bool NEG = false>
using Zeroed = View<S, TR, NEG, Read::zeroed>;
using Rows = View<Tri::Full, false, false, Read::tf32>;
using RowsT = View<Tri::Full, true, false, Read::tf32>;

// A product operand's traits (a View's, or none for a callable): tf32-exact, zero k-steps, and
// whether it lies in shared memory by rows of A (a View read as A without TR) or of B^T (read as B
// with TR), the orientation that ldmatrix loads.
template <class O, class = void>
struct OperandTraits {
  static constexpr bool tf32 = false, lower = false, upper = false, view = false, trans = false;
};
template <class O>
struct OperandTraits<O, std::void_t<decltype(O::kTf32)>> {
  static constexpr bool tf32 = O::kTf32, lower = O::kLower, upper = O::kUpper, view = true, trans = O::kTrans;
};

// Four 8 x 4 fp32 tiles of shared memory (ldmatrix .x4, b16 pairs): lane L gives the address of row
// L % 8 of tile L / 8 (16-byte aligned) and gets entry (lane / 4, lane % 4) of tile e in r[e].
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const float* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(row))));
}

// x as hi + lo, both tf32 (lo only for three passes); EXACT: x is tf32 already (one pass).
template <int PASSES, bool EXACT = false>
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (PASSES == 1 && EXACT) {
    hi = __float_as_uint(x);
  } else {
    hi = tf32_bits(x);
    if constexpr (PASSES == 3) lo = tf32_bits(x - __uint_as_float(hi));
  }
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Passes of the tensor-core products: three in fp32 (hi/lo split, about fp32 accuracy), one in bf16
// (tf32, 2^-11: finer than the bf16 inputs and outputs; bf16 q, k, v, dout are exact in it).
template <bool BF>
constexpr int kPasses = BF ? 1 : 3;

// f += A B over k < K for the rows of m-tile mt (A [32, K] read as a(i, k), B [K, N] as
// b(k, j); both read as 0 at k >= K, which every slot and operand is past T). PASSES 3: operands
// split into tf32 hi + lo, f += hi hi + hi lo + lo hi (about fp32 accuracy); 1: one tf32 product
// (relative error about 2^-11). The k-steps where a triangular A is zero for the tile's rows are
// skipped (exact: they would add 0).
template <int PASSES, int N, class OA, class OB>
__device__ __forceinline__ void mma_acc(Frag<N>& f, const OA& a, const OB& b, int K, int lane, int mt) {
  static_assert(PASSES == 1 || PASSES == 3, "one or three passes");
  static_assert(N % 16 == 0, "n-tiles in pairs");
  using TA = OperandTraits<OA>;
  using TB = OperandTraits<OB>;
  const int g = lane >> 2, t = lane & 3;
  const int k_begin = TA::upper ? 16 * mt : 0;
  const int k_end = TA::lower && 16 * mt + 16 < K ? 16 * mt + 16 : K;
#pragma unroll 1  // the k-steps in a loop: unrolled, the kernels outgrow the instruction cache
  for (int k0 = k_begin; k0 < k_end; k0 += 8) {
    uint32_t ah[4], al[4];  // a0..a3: (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)
    if constexpr (TA::view && !TA::trans) {
      uint32_t r[4];
      ldsm_x4(r, a.p + (16 * mt + (lane & 7) + 8 * ((lane >> 3) & 1)) * a.ld + k0 + 4 * (lane >> 4));
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = a.as_read(__uint_as_float(r[e]), 16 * mt + g + 8 * (e & 1), k0 + t + 4 * (e >> 1));
        split_tf32<PASSES, TA::tf32>(x, ah[e], al[e]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        split_tf32<PASSES, TA::tf32>(a(16 * mt + g + 8 * (e & 1), k0 + t + 4 * (e >> 1)), ah[e], al[e]);
    }
#pragma unroll
    for (int np = 0; np < N / 16; ++np) {
      uint32_t bh[2][2], bl[2][2];  // n-tiles 2 np + u: b0, b1 = (t, g), (t + 4, g)
      if constexpr (TB::view && TB::trans) {
        uint32_t r[4];
        ldsm_x4(r, b.p + (16 * np + 8 * (lane >> 4) + (lane & 7)) * b.ld + k0 + 4 * ((lane >> 3) & 1));
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float x = b.as_read(__uint_as_float(r[e]), k0 + t + 4 * (e & 1), 16 * np + 8 * (e >> 1) + g);
          split_tf32<PASSES, TB::tf32>(x, bh[e >> 1][e & 1], bl[e >> 1][e & 1]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          split_tf32<PASSES, TB::tf32>(b(k0 + t + 4 * (e & 1), 16 * np + 8 * (e >> 1) + g), bh[e >> 1][e & 1],
                                       bl[e >> 1][e & 1]);
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float(&d)[4] = f.v[2 * np + u];
        if constexpr (PASSES == 3) {
          mma_tf32(d, al, bh[u]);
          mma_tf32(d, ah, bl[u]);
        }
        mma_tf32(d, ah, bh[u]);
      }
    }
  }
}

// The entries (i, j) of m-tile mt of a [32, 32] result into a slot, at (i, j) or with TR at (j, i):
// those inside S (storage coordinates) get the value (0 at i or j >= T; ROUND: rounded to tf32), the
// rest 0 (KEEP: left alone).
template <Tri S, bool TR = false, bool KEEP = false, bool ROUND = false>
__device__ __forceinline__ void store_frag(float* slot, const Frag<TP>& f, int T, int lane, int mt) {
#pragma unroll
  for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = frag_row(mt, e, lane), j = frag_col(nt, e, lane);
      const int sr = TR ? j : i, sc = TR ? i : j;
      const float v = ROUND ? round_tf32(f.v[nt][e]) : f.v[nt][e];
      if (tri_in<S>(sr, sc)) slot[sr * LT + sc] = i < T && j < T ? v : 0.f;
      else if (!KEEP) slot[sr * LT + sc] = 0.f;
    }
}

// Rows i < T of m-tile mt of a [32, Dh] result into a [T, Dh] head tensor (row i at e0 + i es).
template <bool BF, int Dh>
__device__ __forceinline__ void store_frag_global(void* p, int64_t e0, int64_t es, const Frag<Dh>& f, int T,
                                                  int lane, int mt) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(mt, 2 * h, lane);
    if (i >= T) continue;
#pragma unroll
    for (int nt = 0; nt < Dh / 8; ++nt) {
      const int64_t at = e0 + i * es + frag_col(nt, 0, lane);
      const float x = f.v[nt][2 * h], y = f.v[nt][2 * h + 1];
      if constexpr (BF)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p) + at) = __floats2bfloat162_rn(x, y);
      else
        *reinterpret_cast<float2*>(static_cast<float*>(p) + at) = make_float2(x, y);
    }
  }
}

// Sum and maximum over a quad (the four lanes that hold a row).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kAll, x, 1);
  return x + __shfl_xor_sync(kAll, x, 2);
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kAll, x, 1));
  return fmaxf(x, __shfl_xor_sync(kAll, x, 2));
}

// Logits of m-tile mt plus the gate's bias G_i - G_j (G: prefix sums, double [32]).
__device__ __forceinline__ void add_gate_bias(Frag<TP>& S, const double* G, int lane, int mt) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const double gi = G[frag_row(mt, 2 * h, lane)];
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) S.v[nt][2 * h + u] += static_cast<float>(gi - G[frag_col(nt, u, lane)]);
  }
}

// The causal softmax of m-tile mt's rows in place: P = exp(S - lse) (0 past the diagonal and for
// rows >= T); lse of rows i < T into lse[i].
__device__ __forceinline__ void softmax_rows(Frag<TP>& S, float* lse, int T, int lane, int mt) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(mt, 2 * h, lane);
    float mx = -INFINITY, l = 0.f;
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u)
        if (frag_col(nt, u, lane) <= i) mx = fmaxf(mx, S.v[nt][2 * h + u]);
    mx = quad_max(mx);
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u)
        if (frag_col(nt, u, lane) <= i) l += expf(S.v[nt][2 * h + u] - mx);
    const float m = mx + logf(quad_sum(l));
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float& p = S.v[nt][2 * h + u];
        p = frag_col(nt, u, lane) <= i && i < T ? expf(p - m) : 0.f;
      }
    if ((lane & 3) == 0 && i < T) lse[i] = m;
  }
}

// The lse of this lane's two rows of m-tile mt (frag_row(mt, 2 h)) from the head's lse[T] (0 past T).
__device__ __forceinline__ void rows_lse(float (&lse)[2], const float* head_lse, int T, int lane, int mt) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(mt, 2 * h, lane);
    lse[h] = i < T ? head_lse[i] : 0.f;
  }
}

// The softmax backward of m-tile mt from the logits in P and dP = dout V^T in dS: P = exp(S - lse)
// (rows' lse in lse[2], as frag_row(mt, 2 h)), delta_i = sum_j P_ij dP_ij, dS = scale P (dP - delta).
__device__ __forceinline__ void softmax_rows_backward(Frag<TP>& P, Frag<TP>& dS, const float (&lse)[2], float scale,
                                                      int T, int lane, int mt) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(mt, 2 * h, lane);
    float delta = 0.f;
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float& p = P.v[nt][2 * h + u];
        p = frag_col(nt, u, lane) <= i && i < T ? expf(p - lse[h]) : 0.f;
        delta = fmaf(p, dS.v[nt][2 * h + u], delta);
      }
    delta = quad_sum(delta);
#pragma unroll
    for (int nt = 0; nt < TP / 8; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) dS.v[nt][2 * h + u] = scale * P.v[nt][2 * h + u] * (dS.v[nt][2 * h + u] - delta);
  }
}

// The gate's gradient from the scaled dS in a slot (lower), by one warp: dG_t = (sum_j dS_tj -
// sum_i dS_it) / scale (its term is unscaled); dlog_f_s = sum_{t>=s} dG_t at s0 + s H (s >= 1;
// position 0 gets 0).
__device__ __forceinline__ void gate_grad(float* dlog_f, const float* slot, int64_t s0, int64_t H, float scale, int T,
                                          int lane) {
  float x = 0.f;
  for (int n4 = 0; n4 < (T + 3) >> 2; ++n4) {
    const float4 r = ld4(slot + lane * LT + 4 * n4);
    x += (r.x + r.y) + (r.z + r.w);
  }
  for (int j = 0; j < T; ++j) x -= slot[j * LT + lane];
  x = lane < T ? x / scale : 0.f;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const float y = __shfl_down_sync(kAll, x, d);
    if (lane + d < 32) x += y;
  }
  if (lane < T) dlog_f[s0 + lane * H] = lane == 0 ? 0.f : x;
}

}  // namespace sb::cuda::detail::short_warp
