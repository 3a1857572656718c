// path_rows.cu: PaTH attention at selected query rows (the labelled rows of a sparse-label batch),
// forward and backward. A group of 8 or 16 lanes per query walks the chain X <- H_j X from the
// query's position down to key 0 in fp32 (O(T Dh) per query, no T x T tensor), one CTA per (b, h)
// holding all of its queries; k, v, w, beta and log f stream through shared memory kC positions at a
// time (cp.async, double-buffered). A training forward leaves each chain's state every kC positions (checkpoints);
// the backward recomputes a segment's kSeg states from them in registers and walks them upward with
// the adjoint, summing the key-side gradients per segment.
#include <type_traits>

#include "kernels/attention/path/path_rows_common.cuh"

namespace sb::cuda {
namespace {

using namespace rows_detail;

template <int Dh, bool BF>
__global__ void __launch_bounds__(kThreads<Dh>, 1) rows_fwd_kernel(const RowsArgs a) {
  constexpr int E = kE<Dh>;
  using S = Stage<Dh, BF>;
  extern __shared__ __align__(16) char smem[];
  __shared__ int top_slot;
  const int m = threadIdx.x / kQL<Dh>, sl = threadIdx.x % kQL<Dh>;
  const Head hd = head_of<Dh>(a, sl);
  const int t0 = query_pos(a, hd, m), jtop = warp_max(t0);
  const int top = cta_max(jtop, &top_slot);
  if (top < 0) return;  // CTA-uniform: no query in this sequence
  const int64_t nck = (a.T + kC - 1) / kC;
  float* ckpt = a.ckpt ? a.ckpt + static_cast<int64_t>(blockIdx.x) * nck * kGroups * Dh : nullptr;
  float* ckg = a.ckpt ? a.ckg + static_cast<int64_t>(blockIdx.x) * nck * kGroups : nullptr;
  float x[E], acc[E], kv[E], vv[E], wv[E];
  ld<Dh, BF>(x, a.q, hd.e0 + static_cast<int64_t>(t0) * hd.es, sl, t0 >= 0);
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = 0.f;
  float mrun = -INFINITY, l = 0.f, gsum = 0.f;
  stream_down<Dh, BF>(smem, a, hd, top, 1, [&](const S& cur, int c) {
    const int base = c * kC;
    for (int j = min(base + kC - 1, jtop); j >= base; --j) {  // warp-uniform bounds
      const int i = j - base;
      const bool move = j < t0;  // X <- H_{j+1} X first
      ld<Dh, BF>(kv, cur.k(), i * Dh, sl, true);
      ld<Dh, BF>(vv, cur.v(), i * Dh, sl, true);
      ld<Dh, false>(wv, cur.w(), i * Dh, sl, move);
      float r[3] = {dot(wv, x), dot(kv, x), dot(kv, wv)};
      group_sum<Dh>(r);
      if (j > t0) continue;  // this group's query starts lower
      float s = a.scale * r[1];
      if (move) {
        const float bt = cur.scal()[i];
        if (a.log_f) gsum += cur.scal()[kC + i];
#pragma unroll
        for (int e = 0; e < E; ++e) x[e] = fmaf(-bt * r[0], wv[e], x[e]);
        s = a.scale * (r[1] - bt * r[0] * r[2]) + gsum;  // k_j . (X - bt a w)
      }
      if (ckpt && (j == t0 || i == kC - 1)) {  // X^(j) at the interval's top (or the query)
        st<Dh, false>(ckpt, (static_cast<int64_t>(c) * kGroups + m) * Dh, sl, x, true);
        if (sl == 0) ckg[c * kGroups + m] = gsum;
      }
      const float mnew = fmaxf(mrun, s), corr = expf(mrun - mnew), p = expf(s - mnew);
      l = l * corr + p;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] = fmaf(acc[e], corr, p * vv[e]);
      mrun = mnew;
    }
  });
  if (t0 < 0) return;
  const float inv = 1.f / l;
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] *= inv;
  const int64_t rrow = static_cast<int64_t>(hd.r0 + m) * a.H + hd.h;
  st<Dh, BF>(a.out_rows, rrow * Dh, sl, acc, true);
  if (sl == 0) a.lse_rows[rrow] = mrun + logf(l);
}

// Shared memory of the backward (floats unless noted), in this order.
template <int Dh, bool BF>
struct BwdSmem {
  static constexpr int kS = kSeg<Dh>;
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
  constexpr int E = kE<Dh>, kS = kSeg<Dh>;
  const int cb = base - OFF;
  const bool act = t0 >= base;  // this query has work here (else it only joins the shuffles)
  const int top = min(cb + kC - 1, t0);
  float x[E], wv[E], kv[E], vv[E], dO[E], g[E], X[kS][E], sv[kS], av[kS];
  ld<Dh, false>(x, sh.ckx, (ck * kGroups + m) * Dh, sl, act);
  float gsum = act ? sh.ckgs[ck * kGroups + m] : 0.f;
#pragma unroll
  for (int jj = kC - 1; jj >= OFF; --jj) {  // down
    const int j = cb + jj;
    const bool on = act && j <= top;
    ld<Dh, false>(wv, s.w(), jj * Dh, sl, on && j >= 1);
    ld<Dh, BF>(kv, s.k(), jj * Dh, sl, on && jj < OFF + kS);
    float r[2] = {dot(wv, x), dot(kv, x)};
    group_sum<Dh>(r);
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
  ld<Dh, false>(g, sh.gs, m * Dh, sl, act);
  ld<Dh, false>(dO, sh.dos, m * Dh, sl, act);
  const float lse = act ? sh.qst[4 * m] : 0.f, delta = act ? sh.qst[4 * m + 1] : 0.f;
  float csum = act ? sh.qst[4 * m + 2] : 0.f;
#pragma unroll
  for (int i = 0; i < kS; ++i) {  // up: g is the adjoint of X^(j-1) on entry, of X^(j) on exit
    const int j = base + i, jj = OFF + i;
    const bool on = act && j <= t0;
    ld<Dh, BF>(vv, s.v(), jj * Dh, sl, on);
    ld<Dh, false>(wv, s.w(), jj * Dh, sl, on && j >= 1);
    ld<Dh, BF>(kv, s.k(), jj * Dh, sl, on);
    float r[2] = {dot(dO, vv), dot(wv, g)};
    group_sum<Dh>(r);
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
      if (j == t0) st<Dh, BF>(a.dq, hd.e0 + static_cast<int64_t>(j) * hd.es, sl, g, true);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) zr[e] = 0.f, yr[e] = 0.f;
    }
    st<Dh, false>(sh.zs, (m * kS + i) * Dh, sl, zr, true);
    st<Dh, false>(sh.ys, (m * kS + i) * Dh, sl, yr, true);
    if (sl == 0) sh.ps[m * kS + i] = P, sh.dbs[m * kS + i] = db, sh.dls[m * kS + i] = dl;
  }
  if (!act) return;
  st<Dh, false>(sh.gs, m * Dh, sl, g, true);
  if (sl == 0) sh.qst[4 * m + 2] = csum;
}

// Writes rows base .. base + kS - 1 of dk, dv, dw, dbeta and dlog_f: the sums of the terms of the
// queries active in the segment.
template <int Dh, bool BF>
__device__ __forceinline__ void flush(const RowsArgs& a, const Head& hd, const Shared& sh, const int* qpos,
                                      int base) {
  constexpr int kS = kSeg<Dh>;
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
__global__ void __launch_bounds__(kThreads<Dh>, 1) rows_bwd_kernel(const RowsArgs a) {
  constexpr int E = kE<Dh>;
  using L = BwdSmem<Dh, BF>;
  using S = Stage<Dh, BF>;
  extern __shared__ __align__(16) float sm[];
  __shared__ int top_slot;
  const Shared sh{sm + L::zs, sm + L::ys, sm + L::dos, sm + L::gs, sm + L::ckx,
                  sm + L::ckgs, sm + L::ps, sm + L::dbs, sm + L::dls, sm + L::qst,
                  reinterpret_cast<int*>(sm + L::qp)};
  char* sbase = reinterpret_cast<char*>(sm + L::stages);
  auto stg = [&](int i) { return S{sbase + i * S::bytes}; };
  const int m = threadIdx.x / kQL<Dh>, sl = threadIdx.x % kQL<Dh>;
  const Head hd = head_of<Dh>(a, sl);
  const int64_t nck = (a.T + kC - 1) / kC;
  float* ckpt = a.ckpt + static_cast<int64_t>(blockIdx.x) * nck * kGroups * Dh;  // this head's checkpoints
  float* ckg = a.ckg + static_cast<int64_t>(blockIdx.x) * nck * kGroups;

  // Phase 0: dq zeroed (phase 1 writes the query rows); per query its dout row, delta = dout . out,
  // a zero adjoint, lse and position.
  for (int64_t i = threadIdx.x; i < a.T * Dh; i += blockDim.x)
    st1<BF>(a.dq, (hd.s0 + (i / Dh) * a.H) * Dh + i % Dh, 0.f);
  const int t0 = query_pos(a, hd, m);
  const bool has = m < hd.nq;
  {
    const int64_t rrow = static_cast<int64_t>(hd.r0 + m) * a.H + hd.h;
    float o[E], d[E];
    ld<Dh, BF>(o, a.o_rows, rrow * Dh, sl, has);
    ld<Dh, BF>(d, a.dout_rows, rrow * Dh, sl, has);
    float dl[1] = {dot(o, d)};
    group_sum<Dh>(dl);
    st<Dh, false>(sh.dos, m * Dh, sl, d, true);  // zeros for m >= nq
#pragma unroll
    for (int e = 0; e < E; ++e) o[e] = 0.f;
    st<Dh, false>(sh.gs, m * Dh, sl, o, true);
    if (sl == 0)
      sh.qst[4 * m] = has ? a.lse_rows[rrow] : 0.f, sh.qst[4 * m + 1] = dl[0], sh.qst[4 * m + 2] = 0.f, sh.qpos[m] = t0;
  }
  const int jtop = warp_max(t0);
  const int top = cta_max(jtop, &top_slot);  // also orders phase 0 before what follows
  const int ctop = top / kC;                  // 0 when top < 0

  // Phase 1, interval by interval upward (each staged with the forward's checkpoints), kC / kSeg
  // segments each.
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
      auto part = [&](auto off) {
        constexpr int OFF = decltype(off)::value;
        const int base = ci * kC + OFF;
        if (warp_max(t0) >= base) segment<Dh, BF, OFF>(a, hd, sh, stg(cur), cur, base, sl, m, t0);
        __syncthreads();
        flush<Dh, BF>(a, hd, sh, sh.qpos, base);
        __syncthreads();
      };
      part(std::integral_constant<int, 0>{});
      if constexpr (kSeg<Dh> < kC) part(std::integral_constant<int, kSeg<Dh>>{});
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

// The checkpoints' two arrays in a workspace (path_attention_rows_workspace_bytes), or none.
void set_checkpoints(RowsArgs& a, void* workspace, const AttnDims& d) {
  a.ckpt = static_cast<float*>(workspace);
  a.ckg = workspace ? a.ckpt + d.B * d.H * kGroups * ck_count(d) * d.Dh : nullptr;
}

}  // namespace

void path_attention_rows_forward_cuda(void* out_rows, float* lse_rows, const void* q, const void* k, const void* v,
                                      const float* w, const float* beta, const float* log_f, const int32_t* rows,
                                      const int32_t* row_starts, int64_t M, const AttnDims& d, float scale, DType dt,
                                      void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  RowsArgs a = common_args(q, k, v, w, beta, log_f, rows, row_starts, M, d, scale,
                           "PaTH rows forward: bad arguments (M >= 0, B, T, H >= 1, inputs non-null)");
  if (workspace && workspace_bytes < path_attention_rows_workspace_bytes(d))
    throw_error("PaTH rows forward: workspace too small");
  if (M == 0) return;
  a.out_rows = out_rows, a.lse_rows = lse_rows;
  set_checkpoints(a, workspace, d);
  detail::with_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int smem = 2 * (dt == DType::BF16 ? Stage<D, true>::bytes : Stage<D, false>::bytes);
    auto* kernel = dt == DType::BF16 ? rows_fwd_kernel<D, true> : rows_fwd_kernel<D, false>;
    kernel<<<static_cast<unsigned>(d.B * d.H), kThreads<D>, smem, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  });
}

size_t path_attention_rows_workspace_bytes(const AttnDims& d) {
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
  if (!workspace || workspace_bytes < path_attention_rows_workspace_bytes(d))
    throw_error("PaTH rows backward: workspace too small");
  a.dout_rows = dout_rows, a.o_rows = out_rows, a.lse_rows = const_cast<float*>(lse_rows);
  a.dq = dq, a.dk = dk, a.dv = dv, a.dw = dw, a.dbeta = dbeta, a.dlog_f = log_f ? dlog_f : nullptr;
  set_checkpoints(a, workspace, d);
  detail::with_dh(d.Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    const int smem = dt == DType::BF16 ? BwdSmem<D, true>::bytes : BwdSmem<D, false>::bytes;
    auto* kernel = dt == DType::BF16 ? rows_bwd_kernel<D, true> : rows_bwd_kernel<D, false>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(d.B * d.H), kThreads<D>, smem, stream>>>(a);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda
