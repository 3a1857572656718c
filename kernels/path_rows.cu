// path_rows.cu: PaTH attention at selected query rows (the labelled rows of a sparse-label batch),
// forward and backward. Eight lanes per query walk the chain X <- H_j X from the query's position
// down to key 0 in fp32 (O(T Dh) per query, no T x T tensor); the backward keeps checkpoints of
// each chain every kC steps, recomputes kS states in registers and walks them upward with the
// adjoint, summing the key-side gradients of the CTA's queries per segment in shared memory.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/attention_cuda.hpp"
#include "kernels/attn_internal.hpp"

namespace sb::cuda {
namespace {

// Eight lanes per query (E = Dh / 8 elements each, a 3-level shuffle per dot product), four queries
// per warp, eight warps: the 32 query groups of a CTA walk their chains side by side; a warp walks
// from the largest position among its four queries (neighbours in the sorted rows), each group
// joining at its own position.
constexpr int kQL = 8;
constexpr int kQW = 32 / kQL;
constexpr int kWarps = 8;
constexpr int kGroups = kWarps * kQW;
constexpr int kCap = static_cast<int>(kPathRowsMaxPerSeq);
constexpr int kS = 4;  // backward segment: kS states of E floats per lane in registers
constexpr int kC = 8;  // checkpoint stride (two segments)

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
  float *ckpt, *ckg;                      // [BH, cap, nck, Dh], [BH, cap, nck]
  int cap;
};

__device__ __forceinline__ float2 bf2(uint32_t u) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
}
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// x = E elements at base[idx..] (fp32 or bf16; 16-byte vectors where E allows), 0 when !on.
template <int E, bool BF>
__device__ __forceinline__ void ld(float (&x)[E], const void* base, int64_t idx, bool on) {
  if (!on) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = 0.f;
    return;
  }
  if constexpr (BF) {
    const auto* p = static_cast<const __nv_bfloat16*>(base) + idx;
    if constexpr (E >= 8) {
#pragma unroll
      for (int c = 0; c < E / 8; ++c) {
        const uint4 u = reinterpret_cast<const uint4*>(p)[c];
        const float2 f0 = bf2(u.x), f1 = bf2(u.y), f2 = bf2(u.z), f3 = bf2(u.w);
        x[8 * c] = f0.x, x[8 * c + 1] = f0.y, x[8 * c + 2] = f1.x, x[8 * c + 3] = f1.y;
        x[8 * c + 4] = f2.x, x[8 * c + 5] = f2.y, x[8 * c + 6] = f3.x, x[8 * c + 7] = f3.y;
      }
    } else if constexpr (E == 4) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      const float2 f0 = bf2(u.x), f1 = bf2(u.y);
      x[0] = f0.x, x[1] = f0.y, x[2] = f1.x, x[3] = f1.y;
    } else {
      const float2 f = bf2(*reinterpret_cast<const uint32_t*>(p));
      x[0] = f.x, x[1] = f.y;
    }
  } else {
    const float* p = static_cast<const float*>(base) + idx;
    if constexpr (E >= 4) {
#pragma unroll
      for (int c = 0; c < E / 4; ++c) {
        const float4 f = reinterpret_cast<const float4*>(p)[c];
        x[4 * c] = f.x, x[4 * c + 1] = f.y, x[4 * c + 2] = f.z, x[4 * c + 3] = f.w;
      }
    } else {
      const float2 f = *reinterpret_cast<const float2*>(p);
      x[0] = f.x, x[1] = f.y;
    }
  }
}

template <int E, bool BF>
__device__ __forceinline__ void st(void* base, int64_t idx, const float (&x)[E], bool on) {
  if (!on) return;
  if constexpr (BF) {
    auto* p = static_cast<uint32_t*>(static_cast<void*>(static_cast<__nv_bfloat16*>(base) + idx));
#pragma unroll
    for (int e = 0; e < E; e += 2) p[e / 2] = pack2(x[e], x[e + 1]);
  } else {
    float* p = static_cast<float*>(base) + idx;
#pragma unroll
    for (int e = 0; e < E; ++e) p[e] = x[e];
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

// Where a CTA's (b, h) lives: element offset of (position 0, this lane's first element), the stride
// between positions (H Dh elements; H for the per-head scalars) and the scalar offset of position 0.
struct Head {
  int64_t b, h, e0, es, s0;
  int r0, nq;
};
template <int Dh>
__device__ __forceinline__ Head head_of(const RowsArgs& a, int sl, int cap) {
  Head hd;
  const int64_t bh = blockIdx.x;
  hd.b = bh / a.H, hd.h = bh % a.H;
  hd.s0 = hd.b * a.T * a.H + hd.h;
  hd.e0 = hd.s0 * Dh + sl * (Dh / kQL);
  hd.es = a.H * Dh;
  hd.r0 = a.row_starts[hd.b];
  hd.nq = max(0, min(a.row_starts[hd.b + 1] - hd.r0, cap));
  return hd;
}

// Position of query m of this head, or -1 (none, or outside the sequence: the caller's contract).
__device__ __forceinline__ int query_pos(const RowsArgs& a, const Head& hd, int m) {
  if (m >= hd.nq) return -1;
  const int64_t t = a.rows[hd.r0 + m] - hd.b * a.T;
  return t >= 0 && t < a.T ? static_cast<int>(t) : -1;
}

template <int Dh, bool BF>
__global__ void __launch_bounds__(32 * kWarps) rows_fwd_kernel(const RowsArgs a) {
  constexpr int E = Dh / kQL;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = warp * kQW + (lane >> 3), sl = lane & 7;
  const Head hd = head_of<Dh>(a, sl, kCap);
  for (int round = 0; round * kGroups < hd.nq; ++round) {
    const int m = round * kGroups + grp, t0 = query_pos(a, hd, m);
    const int jtop = warp_max(t0);
    if (jtop < 0) continue;  // warp-uniform
    float x[E], acc[E], kv[E], vv[E], wv[E];
    ld<E, BF>(x, a.q, hd.e0 + t0 * hd.es, t0 >= 0);
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = 0.f;
    float mrun = -INFINITY, l = 0.f, gsum = 0.f;
    for (int j = jtop; j >= 0; --j) {
      const bool move = j < t0;  // X <- H_{j+1} X first
      ld<E, BF>(kv, a.k, hd.e0 + j * hd.es, true);
      ld<E, BF>(vv, a.v, hd.e0 + j * hd.es, true);
      ld<E, false>(wv, a.w, hd.e0 + (j + 1) * hd.es, move);
      float r[3] = {dot(wv, x), dot(kv, x), dot(kv, wv)};
      group_sum(r);
      if (j > t0) continue;  // this group's query starts lower
      float s = a.scale * r[1];
      if (move) {
        const float bt = a.beta[hd.s0 + (j + 1) * a.H];
        if (a.log_f) gsum += a.log_f[hd.s0 + (j + 1) * a.H];
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
    if (t0 < 0) continue;
    const float inv = 1.f / l;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] *= inv;
    const int64_t rrow = static_cast<int64_t>(hd.r0 + m) * a.H + hd.h;
    st<E, BF>(a.out_rows, rrow * Dh + sl * E, acc, true);
    if (sl == 0) a.lse_rows[rrow] = mrun + logf(l);
  }
}

// Shared memory of the backward (floats unless noted), in this order.
struct BwdSmem {
  int zs, ys, dos, gs, ps, dbs, dls, qst, ints, bytes;
};
constexpr BwdSmem bwd_smem(int Dh) {
  BwdSmem m{};
  m.zs = 0;                          // [kGroups][kS][Dh] this segment's dk terms, per query group
  m.ys = m.zs + kGroups * kS * Dh;   // [kGroups][kS][Dh] dw terms
  m.dos = m.ys + kGroups * kS * Dh;  // [kCap][Dh] dout rows (fp32)
  m.gs = m.dos + kCap * Dh;          // [kCap][Dh] each query's adjoint between segments
  m.ps = m.gs + kCap * Dh;           // [kCap][kS] probabilities of the segment's keys
  m.dbs = m.ps + kCap * kS;          // [kGroups][kS] dbeta terms
  m.dls = m.dbs + kGroups * kS;      // [kGroups][kS] dlog_f terms
  m.qst = m.dls + kGroups * kS;      // [kCap][3] lse, delta, running sum of dS
  m.ints = m.qst + 3 * kCap;         // int [kCap] positions (-1: none)
  m.bytes = 4 * (m.ints + kCap);
  return m;
}

struct Shared {
  float *zs, *ys, *dos, *gs, *ps, *dbs, *dls, *qst;
  int* qpos;
};

// One backward segment [base, base + kS) of one query (group grp, query m at t0) whose checkpoint
// interval starts at base - OFF: down from the checkpoint (transports only above the segment, the
// segment's states X^(j), a_j = w_j . X^(j) and s_j kept), then up with the adjoint g.
template <int Dh, bool BF, int OFF>
__device__ __forceinline__ void segment(const RowsArgs& a, const Head& hd, const Shared& sh, int64_t nck, int base,
                                        int grp, int sl, int m, int t0) {
  constexpr int E = Dh / kQL;
  const int cb = base - OFF;
  const bool act = t0 >= base;  // this group has work here (else it only joins the shuffles)
  const int top = min(cb + kC - 1, t0);
  float x[E], wv[E], kv[E], vv[E], dO[E], g[E], X[kS][E], sv[kS], av[kS];
  const int64_t c = static_cast<int64_t>(m) * nck + cb / kC;
  ld<E, false>(x, a.ckpt, c * Dh + sl * E, act);
  float gsum = act ? a.ckg[c] : 0.f;
#pragma unroll
  for (int jj = kC - 1; jj >= OFF; --jj) {  // down
    const int j = cb + jj;
    const bool on = act && j <= top;
    ld<E, false>(wv, a.w, hd.e0 + j * hd.es, on && j >= 1);
    ld<E, BF>(kv, a.k, hd.e0 + j * hd.es, on && jj < OFF + kS);
    float r[2] = {dot(wv, x), dot(kv, x)};
    group_sum(r);
    if (jj < OFF + kS) {
#pragma unroll
      for (int e = 0; e < E; ++e) X[jj - OFF][e] = x[e];
      av[jj - OFF] = r[0], sv[jj - OFF] = a.scale * r[1] + gsum;
    }
    if (on && jj > OFF) {  // X^(j-1) = H_j X^(j)
      const float bt = a.beta[hd.s0 + j * a.H];
#pragma unroll
      for (int e = 0; e < E; ++e) x[e] = fmaf(-bt * r[0], wv[e], x[e]);
      if (a.log_f) gsum += a.log_f[hd.s0 + j * a.H];
    }
  }
  ld<E, false>(g, sh.gs, static_cast<int64_t>(m) * Dh + sl * E, act);
  const float lse = act ? sh.qst[3 * m] : 0.f, delta = act ? sh.qst[3 * m + 1] : 0.f;
  float csum = act ? sh.qst[3 * m + 2] : 0.f;
#pragma unroll
  for (int i = 0; i < kS; ++i) {  // up: g is the adjoint of X^(j-1) on entry, of X^(j) on exit
    const int j = base + i;
    const bool on = act && j <= t0;
    ld<E, BF>(vv, a.v, hd.e0 + j * hd.es, on);
    ld<E, false>(wv, a.w, hd.e0 + j * hd.es, on && j >= 1);
    ld<E, BF>(kv, a.k, hd.e0 + j * hd.es, on);
    ld<E, false>(dO, sh.dos, static_cast<int64_t>(m) * Dh + sl * E, on);
    float r[2] = {dot(dO, vv), dot(wv, g)};
    group_sum(r);
    if (!on) continue;
    const float P = expf(sv[i] - lse), dS = P * (r[0] - delta);
    float* z = sh.zs + (grp * kS + i) * Dh + sl * E;
    float* y = sh.ys + (grp * kS + i) * Dh + sl * E;
    if (j >= 1) {  // H_j: X^(j-1) = X^(j) - beta_j w_j a_j
      const float bt = a.beta[hd.s0 + j * a.H], bb = r[1];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        y[e] -= bt * fmaf(av[i], g[e], bb * X[i][e]);
        g[e] = fmaf(-bt * bb, wv[e], g[e]);
      }
      if (sl == 0) sh.dbs[grp * kS + i] -= av[i] * bb, sh.dls[grp * kS + i] += csum;
    }
    const float sd = a.scale * dS;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      g[e] = fmaf(sd, kv[e], g[e]);
      z[e] = fmaf(sd, X[i][e], z[e]);
    }
    if (sl == 0) sh.ps[m * kS + i] = P;
    csum += dS;
    if (j == t0) st<E, BF>(a.dq, hd.e0 + j * hd.es, g, true);
  }
  if (!act) return;
  st<E, false>(sh.gs, static_cast<int64_t>(m) * Dh + sl * E, g, true);
  if (sl == 0) sh.qst[3 * m + 2] = csum;
}

template <int Dh, bool BF>
__global__ void __launch_bounds__(32 * kWarps, 1) rows_bwd_kernel(const RowsArgs a) {
  constexpr int E = Dh / kQL;
  constexpr BwdSmem L = bwd_smem(Dh);
  extern __shared__ float sm[];
  const Shared sh{sm + L.zs, sm + L.ys, sm + L.dos, sm + L.gs, sm + L.ps, sm + L.dbs, sm + L.dls, sm + L.qst,
                  reinterpret_cast<int*>(sm + L.ints)};
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = warp * kQW + (lane >> 3), sl = lane & 7;
  const Head hd = head_of<Dh>(a, sl, a.cap);
  const int64_t nseg = (a.T + kS - 1) / kS, nck = (a.T + kC - 1) / kC;
  const int64_t bh = blockIdx.x;
  RowsArgs ab = a;  // with this head's checkpoints
  ab.ckpt = a.ckpt + bh * a.cap * nck * Dh, ab.ckg = a.ckg + bh * a.cap * nck;

  // Phase 1: shared accumulators zeroed; dq zeroed (the query rows are written in phase 2); per query
  // its dout row, delta = dout . out, a zero adjoint, and the chain's state (with the gate sum) at the
  // top of each checkpoint interval.
  for (int i = threadIdx.x; i < 2 * kGroups * kS * Dh; i += blockDim.x) sh.zs[i] = 0.f;  // zs and ys
  for (int i = threadIdx.x; i < 2 * kGroups * kS; i += blockDim.x) sh.dbs[i] = 0.f;      // dbs and dls
  for (int64_t i = threadIdx.x; i < a.T * Dh; i += blockDim.x)
    st1<BF>(a.dq, (hd.s0 + (i / Dh) * a.H) * Dh + i % Dh, 0.f);
  __syncthreads();  // dq's zeros land before phase 2 writes the query rows
  for (int round = 0; round * kGroups < hd.nq; ++round) {
    const int m = round * kGroups + grp, t0 = query_pos(a, hd, m);
    const bool has = m < hd.nq;
    const int64_t rrow = static_cast<int64_t>(hd.r0 + m) * a.H + hd.h;
    float o[E], d[E];
    ld<E, BF>(o, a.o_rows, rrow * Dh + sl * E, has);
    ld<E, BF>(d, a.dout_rows, rrow * Dh + sl * E, has);
    float dl[1] = {dot(o, d)};
    group_sum(dl);
    if (has) {
      st<E, false>(sh.dos, static_cast<int64_t>(m) * Dh + sl * E, d, true);
#pragma unroll
      for (int e = 0; e < E; ++e) o[e] = 0.f;
      st<E, false>(sh.gs, static_cast<int64_t>(m) * Dh + sl * E, o, true);
      if (sl == 0) sh.qst[3 * m] = a.lse_rows[rrow], sh.qst[3 * m + 1] = dl[0], sh.qst[3 * m + 2] = 0.f, sh.qpos[m] = t0;
    }
    const int jtop = warp_max(t0);
    if (jtop < 0) continue;
    float x[E], wv[E];
    ld<E, BF>(x, a.q, hd.e0 + t0 * hd.es, t0 >= 0);
    float gsum = 0.f;
    for (int j = jtop;; --j) {
      if (j <= t0 && (j == t0 || j % kC == kC - 1)) {
        const int64_t c = static_cast<int64_t>(m) * nck + j / kC;
        st<E, false>(ab.ckpt, c * Dh + sl * E, x, true);
        if (sl == 0) ab.ckg[c] = gsum;
      }
      if (j == 0) break;
      ld<E, false>(wv, a.w, hd.e0 + j * hd.es, j <= t0);  // X^(j-1) = H_j X^(j)
      float r[1] = {dot(wv, x)};
      group_sum(r);
      if (j > t0) continue;
      const float bt = a.beta[hd.s0 + j * a.H];
#pragma unroll
      for (int e = 0; e < E; ++e) x[e] = fmaf(-bt * r[0], wv[e], x[e]);
      if (a.log_f) gsum += a.log_f[hd.s0 + j * a.H];
    }
  }
  __syncthreads();

  // Phase 2, segment by segment upward; the flush writes every row of the segment once.
  for (int64_t sg = 0; sg < nseg; ++sg) {
    const int base = static_cast<int>(sg * kS);
    for (int round = 0; round * kGroups < hd.nq; ++round) {
      const int m = round * kGroups + grp;
      if (m < hd.nq && sl == 0)  // the lane that writes them in segment()
        for (int i = 0; i < kS; ++i) sh.ps[m * kS + i] = 0.f;
      const int t0 = m < hd.nq ? sh.qpos[m] : -1;
      if (warp_max(t0) < base) continue;  // the warp's queries all end below this segment
      if (base % kC == 0)
        segment<Dh, BF, 0>(ab, hd, sh, nck, base, grp, sl, m, t0);
      else
        segment<Dh, BF, kS>(ab, hd, sh, nck, base, grp, sl, m, t0);
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < kS * Dh; idx += blockDim.x) {  // flush rows base .. base + kS - 1
      const int i = idx / Dh, d = idx % Dh;
      const int64_t j = base + i;
      float zk = 0.f, yw = 0.f, dvv = 0.f;
#pragma unroll 8
      for (int q = 0; q < kGroups; ++q) {
        const int o = (q * kS + i) * Dh + d;
        zk += sh.zs[o], yw += sh.ys[o], sh.zs[o] = 0.f, sh.ys[o] = 0.f;
      }
      for (int m = 0; m < hd.nq; ++m) dvv = fmaf(sh.ps[m * kS + i], sh.dos[m * Dh + d], dvv);
      if (j >= a.T) continue;
      const int64_t o = (hd.s0 + j * a.H) * Dh + d;
      st1<BF>(a.dk, o, zk);
      st1<BF>(a.dv, o, dvv);
      a.dw[o] = yw;
    }
    if (threadIdx.x < kS && base + threadIdx.x < a.T) {
      float db = 0.f, dl = 0.f;
      for (int q = 0; q < kGroups; ++q) {
        const int o = q * kS + threadIdx.x;
        db += sh.dbs[o], dl += sh.dls[o], sh.dbs[o] = 0.f, sh.dls[o] = 0.f;
      }
      a.dbeta[hd.s0 + (base + threadIdx.x) * a.H] = db;
      if (a.dlog_f) a.dlog_f[hd.s0 + (base + threadIdx.x) * a.H] = dl;
    }
    __syncthreads();
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
    auto* kernel = dt == DType::BF16 ? rows_fwd_kernel<D, true> : rows_fwd_kernel<D, false>;
    kernel<<<static_cast<unsigned>(d.B * d.H), 32 * kWarps, 0, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  });
}

size_t path_attention_rows_backward_workspace_bytes(const AttnDims& d, int64_t max_rows_per_seq) {
  const int64_t cap = std::clamp<int64_t>(max_rows_per_seq, 1, kPathRowsMaxPerSeq);
  return static_cast<size_t>(d.B * d.H * cap * ck_count(d) * (d.Dh + 1)) * sizeof(float);
}

void path_attention_rows_backward_cuda(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f,
                                       const void* dout_rows, const void* out_rows, const float* lse_rows,
                                       const void* q, const void* k, const void* v, const float* w,
                                       const float* beta, const float* log_f, const int32_t* rows,
                                       const int32_t* row_starts, int64_t M, int64_t max_rows_per_seq,
                                       const AttnDims& d, float scale, DType dt, void* workspace,
                                       size_t workspace_bytes, cudaStream_t stream) {
  RowsArgs a = common_args(q, k, v, w, beta, log_f, rows, row_starts, M, d, scale,
                           "PaTH rows backward: bad arguments (M >= 0, B, T, H >= 1, inputs non-null)");
  if (log_f && !dlog_f) throw_error("PaTH rows backward: dlog_f is required with a gate");
  if (max_rows_per_seq < 1 || max_rows_per_seq > kPathRowsMaxPerSeq)
    throw_error("PaTH rows backward: max_rows_per_seq must be in [1, kPathRowsMaxPerSeq]");
  if (!workspace || workspace_bytes < path_attention_rows_backward_workspace_bytes(d, max_rows_per_seq))
    throw_error("PaTH rows backward: workspace too small");
  a.dout_rows = dout_rows, a.o_rows = out_rows, a.lse_rows = const_cast<float*>(lse_rows);
  a.dq = dq, a.dk = dk, a.dv = dv, a.dw = dw, a.dbeta = dbeta, a.dlog_f = log_f ? dlog_f : nullptr;
  a.cap = static_cast<int>(max_rows_per_seq);
  a.ckpt = static_cast<float*>(workspace);
  a.ckg = a.ckpt + d.B * d.H * a.cap * ck_count(d) * d.Dh;
  detail::with_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    constexpr int smem = bwd_smem(D).bytes;
    auto* kernel = dt == DType::BF16 ? rows_bwd_kernel<D, true> : rows_bwd_kernel<D, false>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(d.B * d.H), 32 * kWarps, smem, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda
