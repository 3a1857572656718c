// softmax_short_warp_sm80.cu: causal softmax attention (NoPE, RoPE on chip or by the caller, FoX gate) at
// T <= 32 and Dh 16, 32 or 64 (plan.hpp softmax_short_warp), forward and backward, in fp32: a CTA of
// two warps per (b, h), each warp one 16-row half of every result, the whole head in shared memory;
// every product on tensor cores in three tf32 passes (common/short_warp_ops.cuh), the softmax and its
// backward (delta from P and dP) in fragments. bf16 calls go to softmax_short_bf16_sm80.cu.
#include "kernels/attention/common/short_warp_ops.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {
namespace {

using namespace short_warp;

struct SoftmaxShortArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;  // [B, T, H, Dh]
  const float* log_f = nullptr;                                          // [B, T, H] or nullptr
  const float2* rope_cs = nullptr;                                       // [T, Dh / 2] (cos, sin) or nullptr
  const float* lse_in = nullptr;                                         // [B, H, T] (backward)
  void *out = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;      // [B, T, H, Dh]
  float *lse = nullptr, *dlog_f = nullptr;                               // [B, H, T], [B, T, H]
  int64_t T = 1, H = 1, is = 0, gs = 0;  // elements from one (b, t) row of q, k, v / dq, dk, dv to the next
  float scale = 1.f;
};

// A head's region in floats: the gate's prefix sums (double [32]), q, k, v and (backward) dout as
// [32, Dh + 4], and one 32 x 36 slot (P, then dS). Zero-filled first (rows past T read as 0). At
// most 39 KiB (Dh 64, backward): no opt-in shared memory.
struct Layout {
  int64_t g = 0, q = 0, k = 0, v = 0, dout = 0, p = 0, fwd_floats = 0, bwd_floats = 0;
};
constexpr Layout layout(int64_t Dh) {
  Layout L;
  const int64_t x = TP * (Dh + 4);
  L.g = 0, L.q = 2 * TP, L.k = L.q + x, L.v = L.k + x, L.p = L.v + x, L.fwd_floats = L.p + TP * LT;
  L.dout = L.fwd_floats, L.bwd_floats = L.dout + x;
  return L;
}

// Zeroes the region; q, k, v (and with dout, dout) rows t < T, their loads in flight in as few
// rounds as keep the rows held at once within 32 registers a thread (one round: all before the
// zeroing); the gate's prefix sums.
template <int Dh>
__device__ void load_head(float* s, int64_t floats, const SoftmaxShortArgs& a, int64_t s0, int64_t i0, int64_t e0,
                          int T, int tid, bool dout) {
  constexpr Layout L = layout(Dh);
  constexpr int kReg = HeadRows<Dh, false>::kRegisters, kRounds = 4 * kReg <= 32 ? 1 : 2 * kReg <= 32 ? 2 : 4;
  const int64_t es = a.H * Dh;
  HeadRows<Dh, false> q, k, v, d;
  q.load(a.q, i0, a.is, T, tid);
  if constexpr (kRounds <= 2) k.load(a.k, i0, a.is, T, tid);
  if constexpr (kRounds == 1) {
    v.load(a.v, i0, a.is, T, tid);
    if (dout) d.load(a.dout, e0, es, T, tid);
  }
  for (int64_t i = 4 * tid; i < floats; i += 4 * kThreads) st4(s + i, make_float4(0.f, 0.f, 0.f, 0.f));
  __syncthreads();
  q.store(s + L.q, T, tid);
  if constexpr (kRounds == 4) k.load(a.k, i0, a.is, T, tid);
  k.store(s + L.k, T, tid);
  if constexpr (kRounds == 2) {
    v.load(a.v, i0, a.is, T, tid);
    if (dout) d.load(a.dout, e0, es, T, tid);
  }
  if constexpr (kRounds == 4) v.load(a.v, i0, a.is, T, tid);
  v.store(s + L.v, T, tid);
  if (dout) {
    if constexpr (kRounds == 4) d.load(a.dout, e0, es, T, tid);
    d.store(s + L.dout, T, tid);
  }
  gate_prefix(reinterpret_cast<double*>(s + L.g), a.log_f, s0, a.H, T, tid);
}

// q and k rotated in place where the call applies RoPE, then a barrier (rope.cu's forward: pairs m,
// m + Dh / 2 of row t at angle t theta^(-2m / Dh)). A thread's table entries are loaded first, all in
// flight together, and each serves the same pair of q and of k.
template <int Dh>
__device__ void rotate_qk(float* s, const SoftmaxShortArgs& a, int T, int tid) {
  if (!a.rope_cs) return;
  constexpr Layout L = layout(Dh);
  constexpr int half = Dh / 2, kPairs = TP * half / kThreads;  // pairs of a row a thread: 4, 8 or 16
  float2 c[kPairs];
#pragma unroll
  for (int it = 0; it < kPairs; ++it) {
    const int idx = tid + it * kThreads;
    c[it] = idx < T * half ? a.rope_cs[idx] : make_float2(1.f, 0.f);
  }
#pragma unroll
  for (int it = 0; it < kPairs; ++it) {
    const int idx = tid + it * kThreads, i = idx / half, m = idx % half;
    if (i >= T) continue;
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      float* row = s + (x == 0 ? L.q : L.k) + i * (Dh + 4);
      const float x1 = row[m], x2 = row[m + half];
      row[m] = x1 * c[it].x - x2 * c[it].y;
      row[m + half] = x2 * c[it].x + x1 * c[it].y;
    }
  }
  __syncthreads();
}

// m-tile mt of the logits S = scale Q K^T + G_i - G_j in fragments (entries above the diagonal: undefined).
template <int Dh>
__device__ void logits(Frag<TP>& S, const float* s, int lane, int mt, float scale, bool gate) {
  constexpr Layout L = layout(Dh);
  zero(S);
  mma_acc<kPasses<false>>(S, Rows{s + L.q, Dh + 4}, RowsT{s + L.k, Dh + 4}, Dh, lane, mt);
  scale_frag(S, scale);
  if (gate) add_gate_bias(S, reinterpret_cast<const double*>(s + L.g), lane, mt);
}

// Heads resident per SM by shared memory (228 KiB, 1 KiB reserved a CTA), at most 8: the launch
// bounds' floor, so that ptxas keeps the registers within that residency (at most 128).
constexpr int resident_heads(int64_t floats) {
  const int n = static_cast<int>((228 * 1024) / (floats * 4 + 1024));
  return n < 8 ? n : 8;
}

template <int Dh>
__global__ void __launch_bounds__(kThreads, resident_heads(layout(Dh).fwd_floats))
    softmax_short_warp_fwd_kernel(const SoftmaxShortArgs a) {
  extern __shared__ __align__(16) float s[];
  constexpr Layout L = layout(Dh);
  const int tid = threadIdx.x, lane = tid & 31, mt = tid >> 5;
  const int64_t bh = blockIdx.x;
  const int T = static_cast<int>(a.T);
  const auto [s0, e0, es] = head_at(bh, a.T, a.H, Dh);
  load_head<Dh>(s, L.fwd_floats, a, s0, head_row0(bh, a.T, a.H, Dh, a.is), e0, T, tid, false);
  __syncthreads();
  rotate_qk<Dh>(s, a, T, tid);
  Frag<TP> S;
  logits<Dh>(S, s, lane, mt, a.scale, a.log_f != nullptr);
  softmax_rows(S, a.lse + bh * a.T, T, lane, mt);
  store_frag<Tri::Lower>(s + L.p, S, T, lane, mt);
  __syncthreads();
  Frag<Dh> o;  // out = P V
  zero(o);
  mma_acc<kPasses<false>>(o, Zeroed<Tri::Lower>{s + L.p, LT}, Rows{s + L.v, Dh + 4}, T, lane, mt);
  store_frag_global<false>(a.out, e0, es, o, T, lane, mt);
}

// The backward from lse: P, dP = dout V^T, delta_i = sum_j P_ij dP_ij and dS = scale P (dP - delta)
// in fragments; dv = P^T dout, dq = dS K, dk = dS^T Q through the slot; the gate's dlog_f from dS.
template <int Dh>
__global__ void __launch_bounds__(kThreads, resident_heads(layout(Dh).bwd_floats))
    softmax_short_warp_bwd_kernel(const SoftmaxShortArgs a) {
  extern __shared__ __align__(16) float s[];
  constexpr Layout L = layout(Dh);
  constexpr int LX = Dh + 4, NP = kPasses<false>;
  const int tid = threadIdx.x, lane = tid & 31, mt = tid >> 5;
  const int64_t bh = blockIdx.x;
  const int T = static_cast<int>(a.T);
  const auto [s0, e0, es] = head_at(bh, a.T, a.H, Dh);
  const int64_t g0 = head_row0(bh, a.T, a.H, Dh, a.gs);  // the head's dq, dk, dv: rows g0 + t gs
  float* slot = s + L.p;
  const Rows q{s + L.q, LX}, k{s + L.k, LX}, dout{s + L.dout, LX};
  load_head<Dh>(s, L.bwd_floats, a, s0, head_row0(bh, a.T, a.H, Dh, a.is), e0, T, tid, true);
  float lse[2];
  rows_lse(lse, a.lse_in + bh * a.T, T, lane, mt);
  __syncthreads();
  rotate_qk<Dh>(s, a, T, tid);
  Frag<TP> P, dS;
  logits<Dh>(P, s, lane, mt, a.scale, a.log_f != nullptr);
  zero(dS);
  mma_acc<NP>(dS, dout, RowsT{s + L.v, LX}, Dh, lane, mt);
  softmax_rows_backward(P, dS, lse, a.scale, T, lane, mt);
  store_frag<Tri::Lower>(slot, P, T, lane, mt);
  __syncthreads();
  Frag<Dh> o;  // dv = P^T dout
  zero(o);
  mma_acc<NP>(o, Zeroed<Tri::Lower, true>{slot, LT}, dout, T, lane, mt);
  store_frag_global<false>(a.dv, g0, a.gs, o, T, lane, mt);
  __syncthreads();  // P is no longer read: dS into the slot
  store_frag<Tri::Lower>(slot, dS, T, lane, mt);
  __syncthreads();
  if (a.log_f && mt == 0) gate_grad(a.dlog_f, slot, s0, a.H, a.scale, T, lane);
  zero(o);  // dq = dS K
  mma_acc<NP>(o, Zeroed<Tri::Lower>{slot, LT}, k, T, lane, mt);
  if (a.rope_cs) rotate_back<Dh>(o, a.rope_cs, T, lane, mt);
  store_frag_global<false>(a.dq, g0, a.gs, o, T, lane, mt);
  zero(o);  // dk = dS^T Q
  mma_acc<NP>(o, Zeroed<Tri::Lower, true>{slot, LT}, q, T, lane, mt);
  if (a.rope_cs) rotate_back<Dh>(o, a.rope_cs, T, lane, mt);
  store_frag_global<false>(a.dk, g0, a.gs, o, T, lane, mt);
}

SoftmaxShortArgs short_args(const AttnDims& d, float scale) {
  if (d.T > kShortWarpT) throw_error("softmax_short_warp: T must be at most 32 (plan.hpp softmax_short_warp)");
  SoftmaxShortArgs a;
  a.T = d.T, a.H = d.H, a.scale = scale;
  a.is = d.qkv_stride(), a.gs = d.grad_stride();
  return a;
}

template <class Kernel>
void launch(Kernel kernel, int64_t floats, const SoftmaxShortArgs& a, const AttnDims& d, cudaStream_t stream) {
  kernel<<<static_cast<unsigned>(d.B * d.H), kThreads, static_cast<size_t>(floats * 4), stream>>>(a);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_short_warp_forward(void* out, float* lse, const void* q, const void* k, const void* v,
                                const float* log_f, const float* rope_cs, const AttnDims& d, float scale, bool bf16,
                                cudaStream_t stream) {
  if (bf16) return softmax_short_bf16_forward(out, lse, q, k, v, log_f, rope_cs, d, scale, stream);
  SoftmaxShortArgs a = short_args(d, scale);
  a.q = q, a.k = k, a.v = v, a.log_f = log_f, a.out = out, a.lse = lse;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  with_short_dh(d.Dh, "softmax_short_warp", [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    launch(softmax_short_warp_fwd_kernel<D>, layout(D).fwd_floats, a, d, stream);
  });
}

void softmax_short_warp_backward(void* dq, void* dk, void* dv, float* dlog_f, const void* dout, const void* q,
                                 const void* k, const void* v, const float* log_f, const float* rope_cs,
                                 const float* lse, const AttnDims& d, float scale, bool bf16, cudaStream_t stream) {
  if (bf16)
    return softmax_short_bf16_backward(dq, dk, dv, dlog_f, dout, q, k, v, log_f, rope_cs, lse, d, scale, stream);
  SoftmaxShortArgs a = short_args(d, scale);
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.log_f = log_f, a.lse_in = lse;
  a.rope_cs = reinterpret_cast<const float2*>(rope_cs);
  a.dq = dq, a.dk = dk, a.dv = dv, a.dlog_f = log_f ? dlog_f : nullptr;
  with_short_dh(d.Dh, "softmax_short_warp", [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    launch(softmax_short_warp_bwd_kernel<D>, layout(D).bwd_floats, a, d, stream);
  });
}

}  // namespace sb::cuda::detail
