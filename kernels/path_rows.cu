// path_rows.cu: PaTH attention at selected query rows (the labelled rows of a sparse-label batch),
// forward and backward. Eight lanes per query walk the chain X <- H_j X from the query's position
// down to key 0 in fp32 (O(T Dh) per query, no T x T tensor), one CTA per (b, h) holding all of its
// queries; k, v, w, beta and log f stream through shared memory kC positions at a time (cp.async,
// double-buffered). The backward keeps each chain's state every kC positions, recomputes kS states
// in registers and walks them upward with the adjoint, summing the key-side gradients per segment.
#include <cuda_bf16.h>

#include "kernels/attention_cuda.hpp"
#include "kernels/attn_common.cuh"  // cp_async16, cp_async_commit, cp_async_wait

namespace sb::cuda {
namespace {

using detail::cp_async16;
using detail::cp_async_commit;
using detail::cp_async_wait;

// Eight lanes per query (E = Dh / 8 elements each, a 3-level shuffle per dot product), four queries
// per warp, eight warps: query m of a head is lane group m. A warp walks from the largest position
// among its four queries (neighbours in the sorted rows), each group joining at its own position.
constexpr int kQL = 8;
constexpr int kQW = 32 / kQL;
constexpr int kWarps = 8;
constexpr int kGroups = kWarps * kQW;
static_assert(kGroups == kPathRowsMaxPerSeq, "one lane group per query");
constexpr int kS = 4;  // backward segment: kS states of E floats per lane in registers
constexpr int kC = 8;  // positions per shared-memory stage, and the checkpoint stride (two segments)

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
  float *ckpt, *ckg;                      // [BH, nck, kGroups, Dh], [BH, nck, kGroups]
};

__device__ __forceinline__ float2 bf2(uint32_t u) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
}
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Lane sl of a query group owns E elements of each Dh row: for E >= 4 the 4-element chunks
// (c kQL + sl) 4 .. + 3, c < E / 4, so the group's 8 lanes touch 8 consecutive 16-byte (fp32) or
// 8-byte (bf16) pieces per access: coalesced in global memory and free of bank conflicts in shared
// memory; at Dh 16 (E = 2) the pair 2 sl, 2 sl + 1.
template <int E>
__device__ __forceinline__ int64_t chunk_at(int64_t row, int sl, int c) {
  return E == 2 ? row + 2 * sl : row + (c * kQL + sl) * 4;
}

// x = this lane's elements of the row starting at element `row` of base (fp32 or bf16); 0 when !on.
template <int E, bool BF>
__device__ __forceinline__ void ld(float (&x)[E], const void* base, int64_t row, int sl, bool on) {
  if (!on) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = 0.f;
    return;
  }
  if constexpr (E == 2) {
    const int64_t i = chunk_at<E>(row, sl, 0);
    const float2 f = BF ? bf2(*reinterpret_cast<const uint32_t*>(static_cast<const __nv_bfloat16*>(base) + i))
                        : *reinterpret_cast<const float2*>(static_cast<const float*>(base) + i);
    x[0] = f.x, x[1] = f.y;
  } else {
#pragma unroll
    for (int c = 0; c < E / 4; ++c) {
      const int64_t i = chunk_at<E>(row, sl, c);
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
template <int E, bool BF>
__device__ __forceinline__ void st(void* base, int64_t row, int sl, const float (&x)[E], bool on) {
  if (!on) return;
  if constexpr (E == 2) {
    const int64_t i = chunk_at<E>(row, sl, 0);
    if constexpr (BF)
      *reinterpret_cast<uint32_t*>(static_cast<__nv_bfloat16*>(base) + i) = pack2(x[0], x[1]);
    else
      *reinterpret_cast<float2*>(static_cast<float*>(base) + i) = make_float2(x[0], x[1]);
  } else {
#pragma unroll
    for (int c = 0; c < E / 4; ++c) {
      const int64_t i = chunk_at<E>(row, sl, c);
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

// Sums each of v[0..K) over the 8 lanes of a query group (every lane of the warp must call it).
template <int K>
__device__ __forceinline__ void group_sum(float (&v)[K]) {
#pragma unroll
  for (int o = kQL / 2; o > 0; o >>= 1)
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

template <int Dh, bool BF>
__global__ void __launch_bounds__(32 * kWarps) rows_fwd_kernel(const RowsArgs a) {
  constexpr int E = Dh / kQL;
  using S = Stage<Dh, BF>;
  extern __shared__ __align__(16) char smem[];
  __shared__ int top_slot;
  auto stg = [&](int i) { return S{smem + i * S::bytes}; };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, m = warp * kQW + (lane >> 3), sl = lane & 7;
  const Head hd = head_of<Dh>(a, sl);
  const int t0 = query_pos(a, hd, m), jtop = warp_max(t0);
  const int top = cta_max(jtop, &top_slot);
  if (top < 0) return;  // CTA-uniform: no query in this sequence
  float x[E], acc[E], kv[E], vv[E], wv[E];
  ld<E, BF>(x, a.q, hd.e0 + static_cast<int64_t>(t0) * hd.es, sl, t0 >= 0);
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.f;
  float mrun = -INFINITY, l = 0.f, gsum = 0.f;
  const int ctop = top / kC;
  float sc = fill(stg(0), a, hd, ctop * kC, 1);
  cp_async_commit();
  publish(stg(0).scal(), sc);
  for (int c = ctop; c >= 0; --c) {
    const S cur = stg((ctop - c) & 1);
    const S nxt = stg((ctop - c + 1) & 1);
    const int base = c * kC;
    if (c > 0) {
      sc = fill(nxt, a, hd, base - kC, 1);
      cp_async_commit();
    }
    for (int j = min(base + kC - 1, jtop); j >= base; --j) {  // warp-uniform bounds
      const int i = j - base;
      const bool move = j < t0;  // X <- H_{j+1} X first
      ld<E, BF>(kv, cur.k(), i * Dh, sl, true);
      ld<E, BF>(vv, cur.v(), i * Dh, sl, true);
      ld<E, false>(wv, cur.w(), i * Dh, sl, move);
      float r[3] = {dot(wv, x), dot(kv, x), dot(kv, wv)};
      group_sum(r);
      if (j > t0) continue;  // this group's query starts lower
      float s = a.scale * r[1];
      if (move) {
        const float bt = cur.scal()[i];
        if (a.log_f) gsum += cur.scal()[kC + i];
#pragma unroll
        for (int e = 0; e < E; ++e) x[e] = fmaf(-bt * r[0], wv[e], x[e]);
        s = a.scale * (r[1] - bt * r[0] * r[2]) + gsum;  // k_j . (X - bt a w)
      }
      const float mnew = fmaxf(mrun, s), corr = expf(mrun - mnew), p = expf(s - mnew);
      l = l * corr + p;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] = fmaf(acc[e], corr, p * vv[e]);
      mrun = mnew;
    }
    if (c > 0) publish(nxt.scal(), sc);
  }
  if (t0 < 0) return;
  const float inv = 1.f / l;
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] *= inv;
  const int64_t rrow = static_cast<int64_t>(hd.r0 + m) * a.H + hd.h;
  st<E, BF>(a.out_rows, rrow * Dh, sl, acc, true);
  if (sl == 0) a.lse_rows[rrow] = mrun + logf(l);
}

// Shared memory of the backward (floats unless noted), in this order.
template <int Dh, bool BF>
struct BwdSmem {
  static constexpr int zs = 0;                         // [kGroups][kS][Dh] this segment's dk terms, per query
  static constexpr int ys = zs + kGroups * kS * Dh;    // [kGroups][kS][Dh] dw terms
  static constexpr int dos = ys + kGroups * kS * Dh;   // [kGroups][Dh] dout rows (fp32)
  static constexpr int gs = dos + kGroups * Dh;        // [kGroups][Dh] each query's adjoint between segments
  static constexpr int ckx = gs + kGroups * Dh;        // [2][kGroups][Dh] staged checkpoints of an interval
  static constexpr int ckgs = ckx + 2 * kGroups * Dh;  // [2][kGroups] their gate sums
  static constexpr int ps = ckgs + 2 * kGroups;        // [kGroups][kS] probabilities of the segment's keys
  static constexpr int dbs = ps + kGroups * kS;        // [kGroups][kS] dbeta terms
  static constexpr int dls = dbs + kGroups * kS;       // [kGroups][kS] dlog_f terms
  static constexpr int qst = dls + kGroups * kS;       // [kGroups][4] lse, delta, running sum of dS
  static constexpr int qp = qst + 4 * kGroups;         // int [kGroups] positions (-1: none)
  static constexpr int stages = qp + kGroups;          // 2 x Stage<Dh, BF>
  static constexpr int bytes = 4 * stages + 2 * Stage<Dh, BF>::bytes;
  static_assert(bytes <= 227 * 1024, "PaTH rows backward: shared memory");
};

// Pointers into the backward's shared memory.
struct Shared {
  float *zs, *ys, *dos, *gs, *ckx, *ckgs, *ps, *dbs, *dls, *qst;
  int* qpos;
};

// One backward segment [base, base + kS) of query m (position t0) from the staged interval s that
// starts at base - OFF (its checkpoint at slot ck): down from the checkpoint (transports only above
// the segment; the segment's states X^(j), a_j = w_j . X^(j) and s_j kept), then up with the adjoint g.
template <int Dh, bool BF, int OFF>
__device__ __forceinline__ void segment(const RowsArgs& a, const Head& hd, const Shared& sh, const Stage<Dh, BF>& s,
                                        int ck, int base, int sl, int m, int t0) {
  constexpr int E = Dh / kQL;
  const int cb = base - OFF;
  const bool act = t0 >= base;  // this query has work here (else it only joins the shuffles)
  const int top = min(cb + kC - 1, t0);
  float x[E], wv[E], kv[E], vv[E], dO[E], g[E], X[kS][E], sv[kS], av[kS];
  ld<E, false>(x, sh.ckx, (ck * kGroups + m) * Dh, sl, act);
  float gsum = act ? sh.ckgs[ck * kGroups + m] : 0.f;
#pragma unroll
  for (int jj = kC - 1; jj >= OFF; --jj) {  // down
    const int j = cb + jj;
    const bool on = act && j <= top;
    ld<E, false>(wv, s.w(), jj * Dh, sl, on && j >= 1);
    ld<E, BF>(kv, s.k(), jj * Dh, sl, on && jj < OFF + kS);
    float r[2] = {dot(wv, x), dot(kv, x)};
    group_sum(r);
    if (jj < OFF + kS) {
#pragma unroll
      for (int e = 0; e < E; ++e) X[jj - OFF][e] = x[e];
      av[jj - OFF] = r[0], sv[jj - OFF] = a.scale * r[1] + gsum;
    }
    if (on && jj > OFF) {  // X^(j-1) = H_j X^(j)
      const float bt = s.scal()[jj];
#pragma unroll
      for (int e = 0; e < E; ++e) x[e] = fmaf(-bt * r[0], wv[e], x[e]);
      if (a.log_f) gsum += s.scal()[kC + jj];
    }
  }
  ld<E, false>(g, sh.gs, m * Dh, sl, act);
  ld<E, false>(dO, sh.dos, m * Dh, sl, act);
  const float lse = act ? sh.qst[4 * m] : 0.f, delta = act ? sh.qst[4 * m + 1] : 0.f;
  float csum = act ? sh.qst[4 * m + 2] : 0.f;
#pragma unroll
  for (int i = 0; i < kS; ++i) {  // up: g is the adjoint of X^(j-1) on entry, of X^(j) on exit
    const int j = base + i, jj = OFF + i;
    const bool on = act && j <= t0;
    ld<E, BF>(vv, s.v(), jj * Dh, sl, on);
    ld<E, false>(wv, s.w(), jj * Dh, sl, on && j >= 1);
    ld<E, BF>(kv, s.k(), jj * Dh, sl, on);
    float r[2] = {dot(dO, vv), dot(wv, g)};
    group_sum(r);
    if (!act) continue;
    // This query's terms of row j (0 past its position), written, not added: the flush reads the
    // slots of the queries active in the segment only.
    float zr[E], yr[E], db = 0.f, dl = 0.f, P = 0.f;
    if (on) {
      P = expf(sv[i] - lse);
      const float dS = P * (r[0] - delta), sd = a.scale * dS;
      const float bt = j >= 1 ? s.scal()[jj] : 0.f, bb = r[1];  // H_j: X^(j-1) = X^(j) - beta_j w_j a_j
#pragma unroll
      for (int e = 0; e < E; ++e) {
        yr[e] = -bt * fmaf(av[i], g[e], bb * X[i][e]);
        g[e] = fmaf(sd, kv[e], fmaf(-bt * bb, wv[e], g[e]));
        zr[e] = sd * X[i][e];
      }
      db = j >= 1 ? -av[i] * bb : 0.f, dl = j >= 1 ? csum : 0.f;
      csum += dS;
      if (j == t0) st<E, BF>(a.dq, hd.e0 + static_cast<int64_t>(j) * hd.es, sl, g, true);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) zr[e] = 0.f, yr[e] = 0.f;
    }
    st<E, false>(sh.zs, (m * kS + i) * Dh, sl, zr, true);
    st<E, false>(sh.ys, (m * kS + i) * Dh, sl, yr, true);
    if (sl == 0) sh.ps[m * kS + i] = P, sh.dbs[m * kS + i] = db, sh.dls[m * kS + i] = dl;
  }
  if (!act) return;
  st<E, false>(sh.gs, m * Dh, sl, g, true);
  if (sl == 0) sh.qst[4 * m + 2] = csum;
}

// Writes rows base .. base + kS - 1 of dk, dv, dw, dbeta and dlog_f: the sums of the terms of the
// queries active in the segment.
template <int Dh, bool BF>
__device__ __forceinline__ void flush(const RowsArgs& a, const Head& hd, const Shared& sh, const int* qpos,
                                      int base) {
  for (int idx = threadIdx.x; idx < kS * Dh; idx += blockDim.x) {
    const int i = idx / Dh, d = idx % Dh, j = base + i;
    if (j >= a.T) continue;
    float zk = 0.f, yw = 0.f, dvv = 0.f;
    for (int q = 0; q < hd.nq; ++q) {
      if (qpos[q] < base) continue;  // ended below this segment: no slot written (same for every thread)
      const int o = (q * kS + i) * Dh + d;
      zk += sh.zs[o], yw += sh.ys[o], dvv = fmaf(sh.ps[q * kS + i], sh.dos[q * Dh + d], dvv);
    }
    const int64_t o = (hd.s0 + static_cast<int64_t>(j) * a.H) * Dh + d;
    st1<BF>(a.dk, o, zk);
    st1<BF>(a.dv, o, dvv);
    a.dw[o] = yw;
  }
  if (threadIdx.x < kS && base + static_cast<int>(threadIdx.x) < a.T) {
    float db = 0.f, dl = 0.f;
    for (int q = 0; q < hd.nq; ++q)
      if (qpos[q] >= base) db += sh.dbs[q * kS + threadIdx.x], dl += sh.dls[q * kS + threadIdx.x];
    a.dbeta[hd.s0 + (base + threadIdx.x) * a.H] = db;
    if (a.dlog_f) a.dlog_f[hd.s0 + (base + threadIdx.x) * a.H] = dl;
  }
}

template <int Dh, bool BF>
__global__ void __launch_bounds__(32 * kWarps, 1) rows_bwd_kernel(const RowsArgs a) {
  constexpr int E = Dh / kQL;
  using L = BwdSmem<Dh, BF>;
  using S = Stage<Dh, BF>;
  extern __shared__ __align__(16) float sm[];
  __shared__ int top_slot;
  const Shared sh{sm + L::zs, sm + L::ys, sm + L::dos, sm + L::gs, sm + L::ckx,
                  sm + L::ckgs, sm + L::ps, sm + L::dbs, sm + L::dls, sm + L::qst,
                  reinterpret_cast<int*>(sm + L::qp)};
  char* sbase = reinterpret_cast<char*>(sm + L::stages);
  auto stg = [&](int i) { return S{sbase + i * S::bytes}; };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, m = warp * kQW + (lane >> 3), sl = lane & 7;
  const Head hd = head_of<Dh>(a, sl);
  const int64_t nck = (a.T + kC - 1) / kC;
  float* ckpt = a.ckpt + static_cast<int64_t>(blockIdx.x) * nck * kGroups * Dh;  // this head's checkpoints
  float* ckg = a.ckg + static_cast<int64_t>(blockIdx.x) * nck * kGroups;

  // Phase 0: dq zeroed (phase 2 writes the query rows); per query its dout row, delta = dout . out,
  // a zero adjoint, lse and position.
  for (int64_t i = threadIdx.x; i < a.T * Dh; i += blockDim.x) st1<BF>(a.dq, (hd.s0 + (i / Dh) * a.H) * Dh + i % Dh, 0.f);
  const int t0 = query_pos(a, hd, m);
  const bool has = m < hd.nq;
  {
    const int64_t rrow = static_cast<int64_t>(hd.r0 + m) * a.H + hd.h;
    float o[E], d[E];
    ld<E, BF>(o, a.o_rows, rrow * Dh, sl, has);
    ld<E, BF>(d, a.dout_rows, rrow * Dh, sl, has);
    float dl[1] = {dot(o, d)};
    group_sum(dl);
    st<E, false>(sh.dos, m * Dh, sl, d, true);  // zeros for m >= nq
#pragma unroll
    for (int e = 0; e < E; ++e) o[e] = 0.f;
    st<E, false>(sh.gs, m * Dh, sl, o, true);
    if (sl == 0)
      sh.qst[4 * m] = has ? a.lse_rows[rrow] : 0.f, sh.qst[4 * m + 1] = dl[0], sh.qst[4 * m + 2] = 0.f, sh.qpos[m] = t0;
  }
  const int jtop = warp_max(t0);
  const int top = cta_max(jtop, &top_slot);  // also orders phase 0 before what follows
  const int ctop = top / kC;                  // 0 when top < 0

  if (top >= 0) {  // Phase 1: each chain downward, its state (and gate sum) at the top of every interval
    float x[E], wv[E];
    ld<E, BF>(x, a.q, hd.e0 + static_cast<int64_t>(t0) * hd.es, sl, t0 >= 0);
    float gsum = 0.f;
    float sc = fill(stg(0), a, hd, ctop * kC, 0);
    cp_async_commit();
    publish(stg(0).scal(), sc);
    for (int c = ctop; c >= 0; --c) {
      const S cur = stg((ctop - c) & 1);
      const S nxt = stg((ctop - c + 1) & 1);
      const int base = c * kC;
      if (c > 0) {
        sc = fill(nxt, a, hd, base - kC, 0);
        cp_async_commit();
      }
      for (int j = min(base + kC - 1, jtop); j >= base; --j) {
        const int i = j - base;
        if (j <= t0 && (j == t0 || i == kC - 1)) {
          st<E, false>(ckpt, (static_cast<int64_t>(c) * kGroups + m) * Dh, sl, x, true);
          if (sl == 0) ckg[c * kGroups + m] = gsum;
        }
        if (j == 0) break;
        ld<E, false>(wv, cur.w(), i * Dh, sl, j <= t0);  // X^(j-1) = H_j X^(j)
        float r[1] = {dot(wv, x)};
        group_sum(r);
        if (j > t0) continue;
        const float bt = cur.scal()[i];
#pragma unroll
        for (int e = 0; e < E; ++e) x[e] = fmaf(-bt * r[0], wv[e], x[e]);
        if (a.log_f) gsum += cur.scal()[kC + i];
      }
      if (c > 0) publish(nxt.scal(), sc);
    }
    __syncthreads();  // the checkpoints (global) before phase 2 stages them
  }

  // Phase 2, interval by interval upward (each staged with its checkpoints), two segments each.
  auto stage_interval = [&](int slot, int ci) {
    const float s = fill(stg(slot), a, hd, ci * kC, 0);
    for (int idx = threadIdx.x; idx < kGroups * Dh / 4 + kGroups / 4; idx += blockDim.x) {
      if (idx < kGroups * Dh / 4)
        cp_async16(sh.ckx + slot * kGroups * Dh + 4 * idx, ckpt + static_cast<int64_t>(ci) * kGroups * Dh + 4 * idx);
      else
        cp_async16(sh.ckgs + slot * kGroups + 4 * (idx - kGroups * Dh / 4),
                   ckg + static_cast<int64_t>(ci) * kGroups + 4 * (idx - kGroups * Dh / 4));
    }
    cp_async_commit();
    return s;
  };
  if (top >= 0) {
    publish(stg(0).scal(), stage_interval(0, 0));
    for (int ci = 0; ci <= ctop; ++ci) {
      const int cur = ci & 1;
      float sc = 0.f;
      if (ci < ctop) sc = stage_interval(cur ^ 1, ci + 1);
      for (int half = 0; half < 2; ++half) {
        const int base = ci * kC + half * kS;
        if (warp_max(t0) >= base) {
          if (half == 0)
            segment<Dh, BF, 0>(a, hd, sh, stg(cur), cur, base, sl, m, t0);
          else
            segment<Dh, BF, kS>(a, hd, sh, stg(cur), cur, base, sl, m, t0);
        }
        __syncthreads();
        flush<Dh, BF>(a, hd, sh, sh.qpos, base);
        __syncthreads();
      }
      if (ci < ctop) publish(stg(cur ^ 1).scal(), sc);
    }
  }
  // Rows above every query get no gradient.
  const int64_t first = top >= 0 ? static_cast<int64_t>(ctop + 1) * kC : 0;
  for (int64_t i = first * Dh + threadIdx.x; i < a.T * Dh; i += blockDim.x) {
    const int64_t o = (hd.s0 + (i / Dh) * a.H) * Dh + i % Dh;
    st1<BF>(a.dk, o, 0.f);
    st1<BF>(a.dv, o, 0.f);
    a.dw[o] = 0.f;
  }
  for (int64_t j = first + threadIdx.x; j < a.T; j += blockDim.x) {
    a.dbeta[hd.s0 + j * a.H] = 0.f;
    if (a.dlog_f) a.dlog_f[hd.s0 + j * a.H] = 0.f;
  }
}

RowsArgs common_args(const void* q, const void* k, const void* v, const float* w, const float* beta,
                     const float* log_f, const int32_t* rows, const int32_t* row_starts, int64_t M,
                     const AttnDims& d, float scale, const char* what) {
  if (M < 0 || d.B < 1 || d.T < 1 || d.H < 1 || !q || !k || !v || !w || !beta || !row_starts || (M > 0 && !rows))
    throw_error(what);
  RowsArgs a{};
  a.q = q, a.k = k, a.v = v, a.w = w, a.beta = beta, a.log_f = log_f, a.rows = rows, a.row_starts = row_starts;
  a.T = d.T, a.H = d.H, a.scale = scale;
  return a;
}

int64_t ck_count(const AttnDims& d) { return (d.T + kC - 1) / kC; }

}  // namespace

void path_attention_rows_forward_cuda(void* out_rows, float* lse_rows, const void* q, const void* k, const void* v,
                                      const float* w, const float* beta, const float* log_f, const int32_t* rows,
                                      const int32_t* row_starts, int64_t M, const AttnDims& d, float scale, DType dt,
                                      cudaStream_t stream) {
  RowsArgs a = common_args(q, k, v, w, beta, log_f, rows, row_starts, M, d, scale,
                           "PaTH rows forward: bad arguments (M >= 0, B, T, H >= 1, inputs non-null)");
  if (M == 0) return;
  a.out_rows = out_rows, a.lse_rows = lse_rows;
  detail::with_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int smem = 2 * (dt == DType::BF16 ? Stage<D, true>::bytes : Stage<D, false>::bytes);
    auto* kernel = dt == DType::BF16 ? rows_fwd_kernel<D, true> : rows_fwd_kernel<D, false>;
    kernel<<<static_cast<unsigned>(d.B * d.H), 32 * kWarps, smem, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  });
}

size_t path_attention_rows_backward_workspace_bytes(const AttnDims& d) {
  return static_cast<size_t>(d.B * d.H * kGroups * ck_count(d) * (d.Dh + 1)) * sizeof(float);
}

void path_attention_rows_backward_cuda(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f,
                                       const void* dout_rows, const void* out_rows, const float* lse_rows,
                                       const void* q, const void* k, const void* v, const float* w,
                                       const float* beta, const float* log_f, const int32_t* rows,
                                       const int32_t* row_starts, int64_t M, const AttnDims& d, float scale,
                                       DType dt, void* workspace,
                                       size_t workspace_bytes, cudaStream_t stream) {
  RowsArgs a = common_args(q, k, v, w, beta, log_f, rows, row_starts, M, d, scale,
                           "PaTH rows backward: bad arguments (M >= 0, B, T, H >= 1, inputs non-null)");
  if (log_f && !dlog_f) throw_error("PaTH rows backward: dlog_f is required with a gate");
  if (!workspace || workspace_bytes < path_attention_rows_backward_workspace_bytes(d))
    throw_error("PaTH rows backward: workspace too small");
  a.dout_rows = dout_rows, a.o_rows = out_rows, a.lse_rows = const_cast<float*>(lse_rows);
  a.dq = dq, a.dk = dk, a.dv = dv, a.dw = dw, a.dbeta = dbeta, a.dlog_f = log_f ? dlog_f : nullptr;
  a.ckpt = static_cast<float*>(workspace);
  a.ckg = a.ckpt + d.B * d.H * kGroups * ck_count(d) * d.Dh;
  detail::with_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int smem = dt == DType::BF16 ? BwdSmem<D, true>::bytes : BwdSmem<D, false>::bytes;
    auto* kernel = dt == DType::BF16 ? rows_bwd_kernel<D, true> : rows_bwd_kernel<D, false>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(d.B * d.H), 32 * kWarps, smem, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda
