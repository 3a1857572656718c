// sba_common.cuh: what the stick-breaking attention kernels share (internal): the shared-memory
// layout, the key-block pipeline, and the row math on a warp's 16 query rows x 64 keys in the mma
// accumulator layout (kernels/attention/common/mma_sm80.cuh), in log2 units: logsigmoid of the
// scores, suffix sums along the keys (the log survival of the stick), the kept weights.
// Math: docs/attention.md; the CPU reference: src/nn/ops_sba.cpp.
#pragma once
#include <cmath>

#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/sba/sba_internal.hpp"

namespace sb::cuda::detail {

// A key whose query's stick survival after it (the product of 1 - beta over the keys between them)
// is below 2^kSbaFloor2 gets weight 0, and a query block stops walking back once every row's
// survival is below it: every weight further back is below 2^-60 of the stick (~1e-18), and so
// is their sum. The backward applies the same rule, so it is the exact gradient of what the
// forward computes.
constexpr float kSbaFloor2 = -60.f;

struct SbaSmem {
  Tile Q, dO;  // the CTA's query block (dO: backward only)
  Tile K, V;   // key block of pipeline stage 0; stage s is s * stage_bytes further on
  int stage_bytes = 0;
  Tile A, dZ;  // backward: [64 queries][64 keys] weights and scaled score gradients
  int bytes = 0;
};

__host__ __device__ inline SbaSmem sba_smem(unsigned char* base, int Dh, bool f32, bool backward, int stages) {
  Carve cv{base, 0};
  SbaSmem s;
  s.Q = cv.tile(kL, Dh, f32);
  if (backward) s.dO = cv.tile(kL, Dh, f32);
  const int start = cv.off;
  s.K = cv.tile(kL, Dh, f32);
  s.V = cv.tile(kL, Dh, f32);
  s.stage_bytes = cv.off - start;
  cv.off = start + stages * s.stage_bytes;
  if (backward) {
    s.A = cv.tile(kL, kL, f32);
    s.dZ = cv.tile(kL, kL, f32);
  }
  s.bytes = cv.off;
  return s;
}

// The CTA's work item: query block n (heaviest first: most key blocks) of head bh.
struct SbaItem {
  int64_t bh, i0, head0, rs;
  int n, nvalid;
};
__device__ __forceinline__ SbaItem sba_item(const SbaParams& p, int Dh) {
  SbaItem it;
  const int64_t BH = p.B * p.H, item = blockIdx.x;
  it.bh = item % BH;
  const int64_t b = it.bh / p.H, h = it.bh % p.H;
  it.n = p.nb - 1 - static_cast<int>(item / BH);
  it.i0 = static_cast<int64_t>(it.n) * kL;
  it.rs = p.H * Dh;
  it.head0 = (b * p.T * p.H + h) * Dh;
  it.nvalid = static_cast<int>(min64(kL, p.T - it.i0));
  return it;
}

// In place: x (16 rows x 64 columns, accumulator layout) -> per element the sum of its row's
// elements in the later columns (exclusive suffix sum along the keys); total[rr] = the row sums.
// Quad scans per n-tile (lanes 4g .. 4g+3 hold a row's 8 columns of it), n-tiles right to left.
__device__ __forceinline__ void row_suffix_sums(float (&x)[8][4], float (&total)[2], int lane) {
  const int t = lane & 3, leader = lane & ~3;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float carry = 0.f;
#pragma unroll
    for (int nt = 7; nt >= 0; --nt) {
      const float x1 = x[nt][2 * rr + 1], pair = x[nt][2 * rr] + x1;
      float incl = pair;  // this lane's and the later lanes' pairs of the n-tile
      float u = __shfl_down_sync(0xffffffffu, incl, 1);
      if (t < 3) incl += u;
      u = __shfl_down_sync(0xffffffffu, incl, 2);
      if (t < 2) incl += u;
      u = __shfl_down_sync(0xffffffffu, incl, 1);
      const float later = carry + (t < 3 ? u : 0.f);  // columns 2t + 2 .. 63
      const float tile = __shfl_sync(0xffffffffu, incl, leader);
      x[nt][2 * rr + 1] = later;
      x[nt][2 * rr] = later + x1;
      carry += tile;
    }
    total[rr] = carry;
  }
}

// Raw scores S = q . k of a warp's rows r0 + g (+8) x the 64 keys of a block -> S = log2 sigmoid(z),
// N = log2 (1 - sigmoid(z)), z = scale q . k (sl2 = scale log2 e). Masked entries (the diagonal
// block's keys at or after the query; query rows >= nvalid): S = -inf, N = 0.
__device__ __forceinline__ void sba_logs(float (&S)[8][4], float (&N)[8][4], float sl2, bool diag, int r0,
                                         int nvalid, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + g + ((e & 2) ? 8 : 0), col = nt * 8 + 2 * t + (e & 1);
      const bool ok = row < nvalid && (!diag || col < row);
      const float s2 = S[nt][e] * sl2;
      const float l2 = __log2f(1.f + fast_exp2(-fabsf(s2)));  // log2(1 + e^-|z|)
      S[nt][e] = ok ? fminf(s2, 0.f) - l2 : -INFINITY;
      N[nt][e] = ok ? -fmaxf(s2, 0.f) - l2 : 0.f;
    }
}

// The log2 survival of a row before its first key block: 0, or -inf for padded query rows (no keys,
// no remainder; they never keep a block walk going).
__device__ __forceinline__ void sba_init_survival(float (&acc2)[2], int r0, int nvalid, int lane) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) acc2[rr] = r0 + (lane >> 2) + 8 * rr < nvalid ? 0.f : -INFINITY;
}

// Whether a key is kept and its weight: survival after it L2 = acc2 + N (N: the suffix sums of the
// block's log2 (1 - beta)), A = 2^(lsp2 + L2) if L2 >= kSbaFloor2, else 0.
__device__ __forceinline__ bool sba_keep(float L2) { return L2 >= kSbaFloor2; }

// Walks key blocks n, n-1, ..., 0 through a `stages`-deep cp.async pipeline (K, V of block m into
// stage buffers), calling body(m, K tile, V tile) on each between barriers; stops after a block
// once done() holds on every thread. Leaves no copy in flight and ends with a barrier.
template <bool kBf16, int Dh, class Done, class Body>
__device__ __forceinline__ void sba_walk(const SbaParams& p, const SbaSmem& sm, const SbaItem& it, int tid, Done&& done,
                                         Body&& body) {
  auto issue = [&](int m, int st) {
    const int64_t k0 = static_cast<int64_t>(m) * kL;
    const int kvalid = static_cast<int>(min64(kL, p.T - k0)), sb = st * sm.stage_bytes;
    load_input_tile<kBf16>(shifted(sm.K, sb), kL, Dh, input_at<kBf16>(p.k, it.head0 + k0 * it.rs), it.rs, kvalid,
                           tid);
    load_input_tile<kBf16>(shifted(sm.V, sb), kL, Dh, input_at<kBf16>(p.v, it.head0 + k0 * it.rs), it.rs, kvalid,
                           tid);
    cp_async_commit();
  };
  const bool two = p.stages == 2;
  if (two) issue(it.n, 0);
  for (int m = it.n, step = 0; m >= 0; --m, ++step) {
    const int cur = two ? (step & 1) : 0;
    if (two) {
      if (m > 0) issue(m - 1, cur ^ 1);
      else cp_async_commit();
      cp_async_wait<1>();
    } else {
      issue(m, 0);
      cp_async_wait<0>();
    }
    __syncthreads();
    const int cb = cur * sm.stage_bytes;
    body(m, shifted(sm.K, cb), shifted(sm.V, cb));
    // Also the barrier before buffer `cur` is refilled (by the next-but-one issue).
    if (__syncthreads_and(done())) break;
  }
  cp_async_wait<0>();
  __syncthreads();
}

}  // namespace sb::cuda::detail
