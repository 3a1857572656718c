// path_rows_common.cuh: what the PaTH rows kernels (kernels/attention/path/path_rows.cu) share (internal): the lane
// layout (8 or 16 lanes per query, 4-element chunks), their argument struct, per-lane vector loads and
// stores, group reductions, where a CTA's head and queries live, and the shared-memory stages that
// stream k, v, w, beta and log f through the CTA kC positions at a time (cp.async).
#pragma once
#include <cuda_bf16.h>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/common/tiles.cuh"  // cp_async16, cp_async_commit, cp_async_wait

namespace sb::cuda::rows_detail {

using detail::cp_async16;
using detail::cp_async_commit;
using detail::cp_async_wait;

// kQL lanes per query (kE = Dh / kQL elements each, a log2 kQL-level shuffle per dot product): 8 up
// to Dh 64, 16 at Dh 128 (8 elements a lane: half the serial work a step, twice the warps to hide
// its latency). Query m of a head is lane group m of the CTA's kGroups; a warp walks from the largest
// position among its queries (neighbours in the sorted rows), each group joining at its own position.
constexpr int kGroups = 32;
static_assert(kGroups == kPathRowsMaxPerSeq, "one lane group per query");
template <int Dh>
constexpr int kQL = Dh >= 128 ? 16 : 8;
template <int Dh>
constexpr int kE = Dh / kQL<Dh>;
template <int Dh>
constexpr int kThreads = kGroups * kQL<Dh>;
constexpr int kC = 8;  // positions per shared-memory stage, and the checkpoint stride
// The backward's segment: kSeg states of kE floats per lane in registers, a whole stage up to Dh 64,
// half of one at Dh 128 (its 512 threads leave 128 registers a thread).
template <int Dh>
constexpr int kSeg = Dh <= 64 ? kC : kC / 2;

struct RowsArgs {
  const void *q, *k, *v;                  // [B, T, H, Dh] dt
  const float *w, *beta, *log_f;          // [B, T, H, Dh], [B, T, H], [B, T, H] or nullptr
  const int32_t *rows, *row_starts;       // [M], [B + 1]
  int64_t T, H;
  float scale;
  void* out_rows;                         // forward: [M, H, Dh] dt
  float* lse_rows;                        // [M, H] (forward writes, backward reads)
  const void *dout_rows, *o_rows;         // backward: [M, H, Dh] dt
  void *dq, *dk, *dv;                     // [B, T, H, Dh] dt
  float *dw, *dbeta, *dlog_f;             // [B, T, H, Dh], [B, T, H], [B, T, H] or nullptr
  // Each chain's state and gate sum at the top of every kC interval (the forward writes them where
  // a backward follows, the backward reads them): [BH, nck, kGroups, Dh], [BH, nck, kGroups].
  float *ckpt, *ckg;
};

__device__ __forceinline__ float2 bf2(uint32_t u) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
}
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Lane sl of a query group owns E = kE elements of each Dh row: for E >= 4 the 4-element chunks
// (c kQL + sl) 4 .. + 3, c < E / 4, so the group's lanes touch consecutive 16-byte (fp32) or
// 8-byte (bf16) pieces per access: coalesced in global memory and free of bank conflicts in shared
// memory; at Dh 16 (E = 2) the pair 2 sl, 2 sl + 1.
template <int Dh>
__device__ __forceinline__ int64_t chunk_at(int64_t row, int sl, int c) {
  return kE<Dh> == 2 ? row + 2 * sl : row + (c * kQL<Dh> + sl) * 4;
}

// x = this lane's elements of the row starting at element `row` of base (fp32 or bf16); 0 when !on.
template <int Dh, bool BF, int E = kE<Dh>>
__device__ __forceinline__ void ld(float (&x)[E], const void* base, int64_t row, int sl, bool on) {
  if (!on) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = 0.f;
    return;
  }
  if constexpr (E == 2) {
    const int64_t i = chunk_at<Dh>(row, sl, 0);
    const float2 f = BF ? bf2(*reinterpret_cast<const uint32_t*>(static_cast<const __nv_bfloat16*>(base) + i))
                        : *reinterpret_cast<const float2*>(static_cast<const float*>(base) + i);
    x[0] = f.x, x[1] = f.y;
  } else {
#pragma unroll
    for (int c = 0; c < E / 4; ++c) {
      const int64_t i = chunk_at<Dh>(row, sl, c);
      if constexpr (BF) {
        const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(base) + i);
        const float2 f0 = bf2(u.x), f1 = bf2(u.y);
        x[4 * c] = f0.x, x[4 * c + 1] = f0.y, x[4 * c + 2] = f1.x, x[4 * c + 3] = f1.y;
      } else {
        const float4 f = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + i);
        x[4 * c] = f.x, x[4 * c + 1] = f.y, x[4 * c + 2] = f.z, x[4 * c + 3] = f.w;
      }
    }
  }
}

// The row's elements of this lane = x (same layout as ld).
template <int Dh, bool BF, int E = kE<Dh>>
__device__ __forceinline__ void st(void* base, int64_t row, int sl, const float (&x)[E], bool on) {
  if (!on) return;
  if constexpr (E == 2) {
    const int64_t i = chunk_at<Dh>(row, sl, 0);
    if constexpr (BF)
      *reinterpret_cast<uint32_t*>(static_cast<__nv_bfloat16*>(base) + i) = pack2(x[0], x[1]);
    else
      *reinterpret_cast<float2*>(static_cast<float*>(base) + i) = make_float2(x[0], x[1]);
  } else {
#pragma unroll
    for (int c = 0; c < E / 4; ++c) {
      const int64_t i = chunk_at<Dh>(row, sl, c);
      if constexpr (BF)
        *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(base) + i) =
            make_uint2(pack2(x[4 * c], x[4 * c + 1]), pack2(x[4 * c + 2], x[4 * c + 3]));
      else
        *reinterpret_cast<float4*>(static_cast<float*>(base) + i) =
            make_float4(x[4 * c], x[4 * c + 1], x[4 * c + 2], x[4 * c + 3]);
    }
  }
}

template <bool BF>
__device__ __forceinline__ void st1(void* base, int64_t idx, float x) {
  if constexpr (BF)
    static_cast<__nv_bfloat16*>(base)[idx] = __float2bfloat16_rn(x);
  else
    static_cast<float*>(base)[idx] = x;
}

template <int E>
__device__ __forceinline__ float dot(const float (&a)[E], const float (&b)[E]) {
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e) s = fmaf(a[e], b[e], s);
  return s;
}

// Sums each of v[0..K) over the kQL lanes of a query group (every lane of the warp must call it).
template <int Dh, int K>
__device__ __forceinline__ void group_sum(float (&v)[K]) {
#pragma unroll
  for (int o = kQL<Dh> / 2; o > 0; o >>= 1)
#pragma unroll
    for (int i = 0; i < K; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
}

// The largest of x over the warp.
__device__ __forceinline__ int warp_max(int x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = max(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// The largest x of the CTA (every thread calls it once; slot is a shared int).
__device__ __forceinline__ int cta_max(int x, int* slot) {
  x = warp_max(x);
  if (threadIdx.x == 0) *slot = -1;
  __syncthreads();
  if ((threadIdx.x & 31) == 0) atomicMax(slot, x);
  __syncthreads();
  return *slot;
}

// Where a CTA's (b, h) lives: s0 the scalar offset of (b, position 0, h), positions H apart; e0
// its row's first element there, positions es = H Dh elements apart; its rows r0 .. r0 + nq.
struct Head {
  int64_t b, h, s0, e0, es;
  int r0, nq;
};
template <int Dh>
__device__ __forceinline__ Head head_of(const RowsArgs& a, int sl) {
  Head hd;
  const int64_t bh = blockIdx.x;
  hd.b = bh / a.H, hd.h = bh % a.H;
  hd.s0 = hd.b * a.T * a.H + hd.h;
  hd.e0 = hd.s0 * Dh;
  hd.es = a.H * Dh;
  hd.r0 = a.row_starts[hd.b];
  hd.nq = max(0, min(a.row_starts[hd.b + 1] - hd.r0, kGroups));
  return hd;
}

// Position of query m of this head, or -1 (none, or outside the sequence: the caller's contract).
__device__ __forceinline__ int query_pos(const RowsArgs& a, const Head& hd, int m) {
  if (m >= hd.nq) return -1;
  const int64_t t = a.rows[hd.r0 + m] - hd.b * a.T;
  return t >= 0 && t < a.T ? static_cast<int>(t) : -1;
}

// One shared-memory stage of kC positions p0 .. p0 + kC - 1 of a head: k, v (dt) there, and w
// (fp32), beta, log f at p0 + shift + i (the forward's step j needs H_{j+1}).
template <int Dh, bool BF>
struct Stage {
  static constexpr int esz = BF ? 2 : 4, kvb = kC * Dh * esz, wb = kC * Dh * 4, bytes = 2 * kvb + wb + 2 * kC * 4;
  char* p;
  __device__ const void* k() const { return p; }
  __device__ const void* v() const { return p + kvb; }
  __device__ const float* w() const { return reinterpret_cast<const float*>(p + 2 * kvb); }
  __device__ float* scal() const { return reinterpret_cast<float*>(p + 2 * kvb + wb); }  // beta [kC] | log f [kC]
};

// Issues the stage's copies (not committed) and returns this thread's scalar, for publish().
template <int Dh, bool BF>
__device__ __forceinline__ float fill(const Stage<Dh, BF>& s, const RowsArgs& a, const Head& hd, int p0, int shift) {
  using S = Stage<Dh, BF>;
  constexpr int kp = Dh * S::esz / 16, wp = Dh / 4, per = 2 * kp + wp;
  for (int idx = threadIdx.x; idx < kC * per; idx += blockDim.x) {
    const int i = idx / per, r = idx % per;
    const bool isw = r >= 2 * kp, isv = !isw && r >= kp;
    const int pos = p0 + i + (isw ? shift : 0);
    const bool ok = pos >= 0 && pos < a.T;
    const int64_t row = (hd.s0 + static_cast<int64_t>(ok ? pos : 0) * a.H) * Dh;
    const char* src;
    char* dst;
    if (isw) {
      src = reinterpret_cast<const char*>(a.w + row) + 16 * (r - 2 * kp);
      dst = s.p + 2 * S::kvb + i * Dh * 4 + 16 * (r - 2 * kp);
    } else {
      const int c = isv ? r - kp : r;
      src = static_cast<const char*>(isv ? a.v : a.k) + row * S::esz + 16 * c;
      dst = s.p + (isv ? S::kvb : 0) + i * Dh * S::esz + 16 * c;
    }
    cp_async16(dst, src, ok);
  }
  float sc = 0.f;
  if (threadIdx.x < 2 * kC) {
    const int pos = p0 + shift + static_cast<int>(threadIdx.x) % kC;
    const float* src = threadIdx.x < kC ? a.beta : a.log_f;
    if (src && pos >= 0 && pos < a.T) sc = src[hd.s0 + pos * a.H];
  }
  return sc;
}

// Completes a stage: its scalars stored, every copy landed, visible to the CTA.
__device__ __forceinline__ void publish(float* scal, float sc) {
  if (threadIdx.x < 2 * kC) scal[threadIdx.x] = sc;
  cp_async_wait<0>();
  __syncthreads();
}

// Streams the head's positions from the interval of `top` down to 0 through the two stages at
// `smem`, kC at a time (the next stage fills while the current one is read), calling body(stage, c)
// for each interval c from the top down. Every thread of the CTA calls it (it synchronises).
template <int Dh, bool BF, class Body>
__device__ __forceinline__ void stream_down(char* smem, const RowsArgs& a, const Head& hd, int top, int shift,
                                            Body&& body) {
  using S = Stage<Dh, BF>;
  const int ctop = top / kC;
  float sc = fill(S{smem}, a, hd, ctop * kC, shift);
  cp_async_commit();
  publish(S{smem}.scal(), sc);
  for (int c = ctop; c >= 0; --c) {
    const S cur{smem + ((ctop - c) & 1) * S::bytes}, nxt{smem + ((ctop - c + 1) & 1) * S::bytes};
    if (c > 0) {
      sc = fill(nxt, a, hd, (c - 1) * kC, shift);
      cp_async_commit();
    }
    body(cur, c);
    if (c > 0) publish(nxt.scal(), sc);
  }
}

}  // namespace sb::cuda::rows_detail
