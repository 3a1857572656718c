// softmax_short_bf16_sm80.cu: causal softmax attention in bf16 (NoPE, RoPE on chip or by the caller, FoX gate) at
// T <= 32 and Dh 16, 32 or 64 (plan.hpp softmax_short_warp), forward and backward: a warp per (b, h), four heads a
// CTA and no barrier between warps. A head's rows go into its warp's shared memory by cp.async (rows past T zero;
// RoPE applied there); every product runs on bf16 mma.sync m16n8k16 with fp32 accumulation; the probabilities and dS
// stay in registers as the next product's A operand (rounded to bf16, as the blockwise kernels round them) and pass
// through shared memory where a product reads them transposed. fp32 runs softmax_short_warp_sm80.cu's kernels.
#include <cuda_bf16.h>

#include "kernels/attention/common/bf16_warp_ops.cuh"
#include "kernels/attention/common/short_warp_ops.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {
namespace {

using namespace short_warp;
using namespace warp_bf16;

constexpr int kWarpHeads = 4, kWarpCta = 32 * kWarpHeads;  // heads (warps) a CTA, its threads

struct Bf16ShortArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;  // bf16 [B, T, H, Dh] (q, k, v: rows is apart)
  const float* log_f = nullptr;                                          // [B, T, H] or nullptr
  const float2* rope_cs = nullptr;                                       // [T, Dh / 2] (cos, sin) or nullptr
  const float* lse_in = nullptr;                                         // [B, H, T] (backward)
  void *out = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;      // bf16 (dq, dk, dv: rows gs apart)
  float *lse = nullptr, *dlog_f = nullptr;                               // [B, H, T], [B, T, H]
  int64_t BH = 0, T = 1, H = 1, is = 0, gs = 0;
  float scale = 1.f;
};

// A warp's region in bf16 elements: q, k, v and (backward) dout as [32, Dh] tiles (swz), and the backward's P, then
// dS, as a [32, 32] tile (swz): over v (no longer read by then) where it fits, else after dout.
struct WarpTiles {
  int q, k, v, dout, ps, fwd, bwd;
};
constexpr WarpTiles warp_tiles(int Dh) {
  WarpTiles L{};
  const int x = TP * Dh;
  L.q = 0, L.k = x, L.v = 2 * x, L.dout = 3 * x, L.fwd = 3 * x;
  L.ps = Dh >= TP ? L.v : 4 * x;
  L.bwd = Dh >= TP ? 4 * x : 4 * x + TP * TP;
  return L;
}
constexpr int64_t cta_bytes(int elements) { return int64_t{2} * kWarpHeads * elements; }
// CTAs resident per SM by shared memory (228 KiB, 1 KiB reserved a CTA), at most `cap`: the launch bounds' floor.
constexpr int resident_ctas(int elements, int cap) {
  const int n = static_cast<int>((228 * 1024) / (cta_bytes(elements) + 1024));
  return n < cap ? n : cap;
}

// RoPE (rope.cu's forward) on a staged tile's rows t < T in place: pairs m, m + Dh / 2 of row t rotated by the table's
// (cos, sin), rounded to bf16 once; then a warp barrier.
template <int Dh>
__device__ void rotate_tile(uint16_t* tile, const float2* cs, int T, int lane) {
  constexpr int half = Dh / 2;
  for (int idx = lane; idx < T * half / 2; idx += 32) {  // (row, column pair m, m + 1 of the first half)
    const int t = idx / (half / 2), m = 2 * (idx % (half / 2));
    uint32_t* a = reinterpret_cast<uint32_t*>(tile + swz<Dh>(t, m));
    uint32_t* b = reinterpret_cast<uint32_t*>(tile + swz<Dh>(t, m + half));
    const float2 x1 = unpack_bf16(*a), x2 = unpack_bf16(*b), c0 = cs[t * half + m], c1 = cs[t * half + m + 1];
    *a = pack_bf16(x1.x * c0.x - x2.x * c0.y, x1.y * c1.x - x2.y * c1.y);
    *b = pack_bf16(x2.x * c0.x + x1.x * c0.y, x2.y * c1.x + x1.y * c1.y);
  }
  __syncwarp();
}

// A warp's head: its lane, T, its (b, h) (past a.BH for a CTA's spare warps: valid false), its region of
// `elements` bf16 and its place in the [B, T, H(, Dh)] tensors.
template <int Dh>
struct WarpHead {
  int lane, T;
  int64_t bh;
  uint16_t* w;
  HeadAt at;
  bool valid;
  __device__ __forceinline__ WarpHead(const Bf16ShortArgs& a, float* s, int elements)
      : lane(threadIdx.x & 31), T(static_cast<int>(a.T)),
        bh(static_cast<int64_t>(blockIdx.x) * kWarpHeads + (threadIdx.x >> 5)),
        w(reinterpret_cast<uint16_t*>(s) + (threadIdx.x >> 5) * elements), at(head_at(bh, a.T, a.H, Dh)),
        valid(bh < a.BH) {}
};

// Copies the warp's head (q, k, v and, with dout, dout) into its tiles, runs `meanwhile` while the copies are in
// flight, waits for them and applies RoPE to q and k where the call has a table; returns the lane's gate prefix sum.
template <int Dh, class F>
__device__ __forceinline__ double stage_head(uint16_t* w, const Bf16ShortArgs& a, int64_t bh, bool dout, int T,
                                             int lane, F&& meanwhile) {
  constexpr WarpTiles L = warp_tiles(Dh);
  const auto [s0, e0, es] = head_at(bh, a.T, a.H, Dh);
  const int64_t i0 = head_row0(bh, a.T, a.H, Dh, a.is);
  stage_rows<Dh>(w + L.q, static_cast<const uint16_t*>(a.q) + i0, a.is, T, lane);
  stage_rows<Dh>(w + L.k, static_cast<const uint16_t*>(a.k) + i0, a.is, T, lane);
  stage_rows<Dh>(w + L.v, static_cast<const uint16_t*>(a.v) + i0, a.is, T, lane);
  if (dout) stage_rows<Dh>(w + L.dout, static_cast<const uint16_t*>(a.dout) + e0, es, T, lane);
  const double G = gate_prefix_lane(a.log_f, s0, a.H, T, lane);
  meanwhile();
  staged();
  if (a.rope_cs) {
    rotate_tile<Dh>(w + L.q, a.rope_cs, T, lane);
    rotate_tile<Dh>(w + L.k, a.rope_cs, T, lane);
  }
  return G;
}

// s = X_mt Y^T for the 16 rows of m-tile MT and the key columns j < 16 (MT + 1) (those further right lie above the
// diagonal): X (q or dout) and Y (k or v) tiles by rows, both [32, Dh].
template <int Dh, int MT>
__device__ __forceinline__ void row_products(Frag<TP>& s, const uint16_t* x, const uint16_t* y, int lane) {
  zero(s);
#pragma unroll
  for (int kk = 0; kk < Dh / 16; ++kk) {
    uint32_t a[4];
    frag_a<Dh>(a, x, 16 * MT, 16 * kk, lane);
#pragma unroll
    for (int np = 0; np <= MT; ++np) {
      uint32_t b[4];
      frag_b_nk<Dh>(b, y, 16 * np, 16 * kk, lane);
      mma_bf16(s.v[2 * np], a, b[0], b[1]);
      mma_bf16(s.v[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// The logits scale s + G_i - G_j of entry (nt, e) of m-tile MT, or whether it is masked (above the diagonal, past T).
template <int MT>
__device__ __forceinline__ bool live(int nt, int e, int T, int lane) {
  const int i = frag_row(MT, e, lane), j = frag_col(nt, e, lane);
  return j <= i && i < T;
}
// The gate's prefix sums a lane reads: G_j of its columns frag_col(nt, u) (gj[nt][u]); with G_i of a row, the bias
// G_i - G_j (0 without a gate).
struct GateCols {
  double g[4][2];
  __device__ __forceinline__ GateCols(double G, bool gate, int lane) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) g[nt][u] = gate ? __shfl_sync(kAll, G, frag_col(nt, u, lane)) : 0.0;
  }
};

// P of m-tile MT (entries (nt, e), in registers) as the A operand of key step kj: keys 16 kj .. 16 kj + 15.
__device__ __forceinline__ void a_from_frag(uint32_t (&a)[4], const Frag<TP>& p, int kj) {
  a[0] = pack_bf16(p.v[2 * kj][0], p.v[2 * kj][1]);
  a[1] = pack_bf16(p.v[2 * kj][2], p.v[2 * kj][3]);
  a[2] = pack_bf16(p.v[2 * kj + 1][0], p.v[2 * kj + 1][1]);
  a[3] = pack_bf16(p.v[2 * kj + 1][2], p.v[2 * kj + 1][3]);
}

// o += A B over the keys 16 kj.. for the A fragments a[kj] (kj <= MT) and B = Y's rows (v or k) by rows: [32, Dh].
template <int Dh, int MT>
__device__ __forceinline__ void key_products(Frag<Dh>& o, const uint32_t (&a)[2][4], const uint16_t* y,
                                             int lane) {
#pragma unroll
  for (int kj = 0; kj <= MT; ++kj)
#pragma unroll
    for (int np = 0; np < Dh / 16; ++np) {
      uint32_t b[4];
      frag_b_kn<Dh>(b, y, 16 * kj, 16 * np, lane);
      mma_bf16(o.v[2 * np], a[kj], b[0], b[1]);
      mma_bf16(o.v[2 * np + 1], a[kj], b[2], b[3]);
    }
}

// Rows i < T of m-tile MT of a [32, Dh] result into a bf16 head tensor (row i at p + i ld), times mul[h] for the
// lane's rows frag_row(MT, 2 h); with cs, rotated back first (rotate_back).
template <int Dh, int MT>
__device__ __forceinline__ void store_rows(void* p, int64_t ld, Frag<Dh>& o, const float (&mul)[2], const float2* cs,
                                           int T, int lane) {
  if (cs) rotate_back<Dh>(o, cs, T, lane, MT);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(MT, 2 * h, lane);
    if (i >= T) continue;
#pragma unroll
    for (int nt = 0; nt < Dh / 8; ++nt)
      *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p) + i * ld + frag_col(nt, 0, lane)) =
          pack_bf16(o.v[nt][2 * h] * mul[h], o.v[nt][2 * h + 1] * mul[h]);
  }
}

// The forward of m-tile MT: S, the row maxima and sums in fp32, P = exp(S - max) rounded to bf16 for P V, out = P V
// / sum, lse = max + log(sum).
template <int Dh, int MT>
__device__ __forceinline__ void forward_rows(const Bf16ShortArgs& a, const uint16_t* w, double G, const GateCols& gc,
                                             int64_t bh, int64_t e0, int64_t es, int T, int lane) {
  constexpr WarpTiles L = warp_tiles(Dh);
  Frag<TP> s;
  row_products<Dh, MT>(s, w + L.q, w + L.k, lane);
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = frag_row(MT, 2 * h, lane);
    const double gi = a.log_f ? __shfl_sync(kAll, G, i) : 0.0;
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 2 * MT + 2; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float& x = s.v[nt][2 * h + u];
        x = a.scale * x;
        if (a.log_f) x += static_cast<float>(gi - gc.g[nt][u]);
        if (live<MT>(nt, 2 * h + u, T, lane)) mx = fmaxf(mx, x);
      }
    mx = quad_max(mx);
    if (mx == -INFINITY) mx = 0.f;  // a row past T
    float l = 0.f;
#pragma unroll
    for (int nt = 0; nt < 2 * MT + 2; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float& x = s.v[nt][2 * h + u];
        x = live<MT>(nt, 2 * h + u, T, lane) ? expf(x - mx) : 0.f;
        l += x;
      }
    l = quad_sum(l);
    inv[h] = l > 0.f ? 1.f / l : 0.f;
    if ((lane & 3) == 0 && i < T) a.lse[bh * a.T + i] = mx + logf(l);
  }
  uint32_t pa[2][4];
#pragma unroll
  for (int kj = 0; kj <= MT; ++kj) a_from_frag(pa[kj], s, kj);
  Frag<Dh> o;
  zero(o);
  key_products<Dh, MT>(o, pa, w + L.v, lane);
  store_rows<Dh, MT>(static_cast<uint16_t*>(a.out) + e0, es, o, inv, nullptr, T, lane);
}

template <int Dh>
__global__ void __launch_bounds__(kWarpCta, resident_ctas(warp_tiles(Dh).fwd, 8))
    softmax_short_bf16_fwd_kernel(const Bf16ShortArgs a) {
  extern __shared__ __align__(16) float s[];
  const WarpHead<Dh> h(a, s, warp_tiles(Dh).fwd);
  if (!h.valid) return;
  const double G = stage_head<Dh>(h.w, a, h.bh, false, h.T, h.lane, [] {});
  const GateCols gc(G, a.log_f != nullptr, h.lane);
  forward_rows<Dh, 0>(a, h.w, G, gc, h.bh, h.at.e0, h.at.es, h.T, h.lane);
  if (h.T > 16) forward_rows<Dh, 1>(a, h.w, G, gc, h.bh, h.at.e0, h.at.es, h.T, h.lane);
}

// The backward's first part for m-tile MT: P = exp(S - lse) and dP = dout V^T in fp32, delta_i = sum_j P_ij dP_ij,
// dS = scale P (dP - delta); both kept as bf16 A fragments (pa, da: key steps kj <= MT), dq = dS K stored; the gate's
// row sums of dS (rs) and its column sums over the lane's rows (cs) accumulated in fp32.
template <int Dh, int MT>
__device__ __forceinline__ void backward_rows(const Bf16ShortArgs& a, const uint16_t* w, double G, const GateCols& gc,
                                              const float (&lse)[2], int64_t g0, int T, int lane, uint32_t (&pa)[2][4],
                                              uint32_t (&da)[2][4], float (&rs)[2], float (&cs)[4][2]) {
  constexpr WarpTiles L = warp_tiles(Dh);
  Frag<TP> p, d;
  row_products<Dh, MT>(p, w + L.q, w + L.k, lane);
  row_products<Dh, MT>(d, w + L.dout, w + L.v, lane);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const double gi = a.log_f ? __shfl_sync(kAll, G, frag_row(MT, 2 * h, lane)) : 0.0;
    float delta = 0.f;
#pragma unroll
    for (int nt = 0; nt < 2 * MT + 2; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float& x = p.v[nt][2 * h + u];
        float z = a.scale * x;
        if (a.log_f) z += static_cast<float>(gi - gc.g[nt][u]);
        x = live<MT>(nt, 2 * h + u, T, lane) ? expf(z - lse[h]) : 0.f;
        delta = fmaf(x, d.v[nt][2 * h + u], delta);
      }
    delta = quad_sum(delta);
    float r = 0.f;
#pragma unroll
    for (int nt = 0; nt < 2 * MT + 2; ++nt)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float& x = d.v[nt][2 * h + u];
        x = a.scale * p.v[nt][2 * h + u] * (x - delta);
        r += x;
        cs[nt][u] += x;
      }
    rs[h] = quad_sum(r);
  }
#pragma unroll
  for (int kj = 0; kj <= MT; ++kj) a_from_frag(pa[kj], p, kj), a_from_frag(da[kj], d, kj);
  Frag<Dh> o;
  zero(o);
  key_products<Dh, MT>(o, da, w + L.k, lane);  // dq = dS K
  const float one[2] = {1.f, 1.f};
  store_rows<Dh, MT>(static_cast<uint16_t*>(a.dq) + g0, a.gs, o, one, a.rope_cs, T, lane);
}

// A [32, 32] bf16 tile (P or dS) from the A fragments of both m-tiles (m-tile 0's keys 16.. are never read).
__device__ __forceinline__ void tile_from_frags(uint16_t* t, const uint32_t (&a0)[2][4], const uint32_t (&a1)[2][4],
                                                int lane) {
  const int g = lane >> 2, c = 2 * (lane & 3);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int kj = 0; kj <= mt; ++kj) {
      const uint32_t(&a)[4] = mt == 0 ? a0[kj] : a1[kj];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        *reinterpret_cast<uint32_t*>(t + swz<TP>(16 * mt + g + 8 * (e & 1), 16 * kj + c + 8 * (e >> 1))) = a[e];
    }
}

// out rows j < T of m-tile jt: X^T Y over the rows i >= 16 jt (X: the [32, 32] tile, lower; Y by rows, [32, Dh]).
template <int Dh, int JT>
__device__ __forceinline__ void column_products(void* out, int64_t ld, const uint16_t* x, const uint16_t* y,
                                                const float2* cs, int T, int lane) {
  Frag<Dh> o;
  zero(o);
#pragma unroll
  for (int ki = JT; ki < 2; ++ki) {
    uint32_t af[4];
    frag_a_t<TP>(af, x, 16 * JT, 16 * ki, lane);
#pragma unroll
    for (int np = 0; np < Dh / 16; ++np) {
      uint32_t b[4];
      frag_b_kn<Dh>(b, y, 16 * ki, 16 * np, lane);
      mma_bf16(o.v[2 * np], af, b[0], b[1]);
      mma_bf16(o.v[2 * np + 1], af, b[2], b[3]);
    }
  }
  const float one[2] = {1.f, 1.f};
  store_rows<Dh, JT>(out, ld, o, one, cs, T, lane);
}

// The gate's gradient from dS's row sums (rs[mt][h], each quad's rows) and column sums (cs[nt][u], summed over the
// lane's rows): dG_t = (sum_j dS_tj - sum_i dS_it) / scale at lane t, dlog_f_s = sum_{t>=s} dG_t (position 0: 0).
__device__ __forceinline__ void gate_grad_lanes(float* dlog_f, int64_t s0, int64_t H, float scale, int T,
                                                const float (&rs)[2][2], float (&cs)[4][2], int lane) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) cs[nt][u] += __shfl_xor_sync(kAll, cs[nt][u], o);
  float row = 0.f, col = 0.f;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float x = __shfl_sync(kAll, rs[mt][h], 4 * (lane & 7));
      if (mt == lane >> 4 && h == ((lane >> 3) & 1)) row = x;
    }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const float x = __shfl_sync(kAll, cs[nt][u], (lane & 7) >> 1);
      if (nt == lane >> 3 && u == (lane & 1)) col = x;
    }
  float x = lane < T ? (row - col) / scale : 0.f;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const float y = __shfl_down_sync(kAll, x, d);
    if (lane + d < 32) x += y;
  }
  if (lane < T) dlog_f[s0 + lane * H] = lane == 0 ? 0.f : x;
}

template <int Dh>
__global__ void __launch_bounds__(kWarpCta, resident_ctas(warp_tiles(Dh).bwd, 4))
    softmax_short_bf16_bwd_kernel(const Bf16ShortArgs a) {
  extern __shared__ __align__(16) float s[];
  constexpr WarpTiles L = warp_tiles(Dh);
  const WarpHead<Dh> h(a, s, L.bwd);
  if (!h.valid) return;
  const int lane = h.lane, T = h.T;
  const int64_t bh = h.bh;
  uint16_t* w = h.w;
  const int64_t g0 = head_row0(bh, a.T, a.H, Dh, a.gs);
  float lse[2][2];  // the lane's rows frag_row(mt, 2 h)
  const double G = stage_head<Dh>(w, a, bh, true, T, lane, [&] {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = frag_row(mt, 2 * h, lane);
        lse[mt][h] = i < T ? a.lse_in[bh * a.T + i] : 0.f;
      }
  });
  const GateCols gc(G, a.log_f != nullptr, lane);
  uint32_t pa0[2][4], da0[2][4], pa1[2][4], da1[2][4];  // m-tile 0's and 1's P and dS as A fragments
  float rs[2][2] = {}, cs[4][2] = {};
  backward_rows<Dh, 0>(a, w, G, gc, lse[0], g0, T, lane, pa0, da0, rs[0], cs);
  const bool two = T > 16;
  if (two) {
    backward_rows<Dh, 1>(a, w, G, gc, lse[1], g0, T, lane, pa1, da1, rs[1], cs);
  } else {
#pragma unroll
    for (int kj = 0; kj < 2; ++kj)
#pragma unroll
      for (int e = 0; e < 4; ++e) pa1[kj][e] = da1[kj][e] = 0u;
  }
  uint16_t* ps = w + L.ps;
  __syncwarp();  // v is no longer read: P over it
  tile_from_frags(ps, pa0, pa1, lane);
  __syncwarp();
  column_products<Dh, 0>(static_cast<uint16_t*>(a.dv) + g0, a.gs, ps, w + L.dout, nullptr, T, lane);  // dv = P^T dout
  if (two) column_products<Dh, 1>(static_cast<uint16_t*>(a.dv) + g0, a.gs, ps, w + L.dout, nullptr, T, lane);
  __syncwarp();  // P is no longer read: dS over it
  tile_from_frags(ps, da0, da1, lane);
  __syncwarp();
  column_products<Dh, 0>(static_cast<uint16_t*>(a.dk) + g0, a.gs, ps, w + L.q, a.rope_cs, T, lane);  // dk = dS^T Q
  if (two) column_products<Dh, 1>(static_cast<uint16_t*>(a.dk) + g0, a.gs, ps, w + L.q, a.rope_cs, T, lane);
  if (a.log_f) gate_grad_lanes(a.dlog_f, h.at.s0, a.H, a.scale, T, rs, cs, lane);
}

Bf16ShortArgs bf16_short_args(const AttnDims& d, float scale) {
  if (d.T > kShortWarpT) throw_error("softmax_short_bf16: T must be at most 32 (plan.hpp softmax_short_warp)");
  Bf16ShortArgs a;
  a.BH = d.B * d.H, a.T = d.T, a.H = d.H, a.scale = scale;
  a.is = d.qkv_stride(), a.gs = d.grad_stride();
  return a;
}

template <class Kernel>
void launch_bf16(Kernel kernel, int elements, const Bf16ShortArgs& a, cudaStream_t stream) {
  const int64_t bytes = cta_bytes(elements);
  if (bytes > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int64_t ctas = (a.BH + kWarpHeads - 1) / kWarpHeads;
  kernel<<<static_cast<unsigned>(ctas), kWarpCta, static_cast<size_t>(bytes), stream>>>(a);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_short_bf16_forward(void* out, float* lse, const void* q, const void* k, const void* v, const float* log_f,
                                const float* rope_cs, const AttnDims& d, float scale, cudaStream_t stream) {
  Bf16ShortArgs a = bf16_short_args(d, scale);
  a.q = q, a.k = k, a.v = v, a.log_f = log_f, a.out = out, a.lse = lse;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  with_short_dh(d.Dh, "softmax_short_bf16", [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    launch_bf16(softmax_short_bf16_fwd_kernel<D>, warp_tiles(D).fwd, a, stream);
  });
}

void softmax_short_bf16_backward(void* dq, void* dk, void* dv, float* dlog_f, const void* dout, const void* q,
                                 const void* k, const void* v, const float* log_f, const float* rope_cs,
                                 const float* lse, const AttnDims& d, float scale, cudaStream_t stream) {
  Bf16ShortArgs a = bf16_short_args(d, scale);
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.log_f = log_f, a.lse_in = lse;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  a.dq = dq, a.dk = dk, a.dv = dv, a.dlog_f = log_f ? dlog_f : nullptr;
  with_short_dh(d.Dh, "softmax_short_bf16", [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    launch_bf16(softmax_short_bf16_bwd_kernel<D>, warp_tiles(D).bwd, a, stream);
  });
}

}  // namespace sb::cuda::detail
