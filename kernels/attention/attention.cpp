// attention.cpp: the public CUDA attention entry points (attention.hpp): argument checks,
// workspace sizes and the launch sequences (gate prefix sums, delta, PaTH factors, fused kernels,
// the PaTH backward per head group, factor backward, conversions), as the plan (plan.hpp) and the
// layouts (layout.cpp) say.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/attention/internal.hpp"

namespace sb::cuda {

const char* dtype_name(DType dt) { return dt == DType::BF16 ? "bf16" : "fp32"; }
size_t dtype_bytes(DType dt) { return dt == DType::BF16 ? 2 : 4; }

namespace detail {
namespace {

void check_dims(const AttnDims& d, const char* what) {
  if (d.B < 1 || d.T < 1 || d.H < 1)
    fail("{}: bad shape (B, T, H, Dh) = ({}, {}, {}, {})", what, d.B, d.T, d.H, d.Dh);
  if (d.Dh != 16 && d.Dh != 32 && d.Dh != 64 && d.Dh != 128)
    fail("{}: head dim Dh = {} not supported (16, 32, 64 or 128)", what, d.Dh);
  const int64_t nb = (d.T + kBlock - 1) / kBlock;
  if (nb * d.B * d.H >= (int64_t{1} << 31)) fail("{}: B * H * ceil(T / 64) = {} blocks is too many", what, nb * d.B * d.H);
  for (auto [ld, name] : {std::pair<int64_t, const char*>{d.qkv_ld, "qkv_ld"}, {d.grad_ld, "grad_ld"}})
    if (ld != 0 && (ld < d.H * d.Dh || ld % 8 != 0))
      fail("{}: {} = {} is not 0 or a multiple of 8 of at least H Dh = {}", what, name, ld, d.H * d.Dh);
}

// The backward kernels apply the scale to dS and divide the gate gradient by it.
void check_scale(float scale, const char* what) {
  if (!(scale > 0.f) || !std::isfinite(scale)) fail("{}: scale = {} must be positive and finite", what, scale);
}

void require(const void* p, const char* name, const char* what) {
  if (!p) fail("{}: '{}' must not be null", what, name);
}
// q, k, v, out and their gradients are read and written 16 bytes at a time (cp.async, vector loads).
void require_tensor(const void* p, const char* name, const char* what) {
  require(p, name, what);
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) fail("{}: '{}' must be 16-byte aligned", what, name);
}

// With AttentionOptions::profile, records an event after each launch and prints the device time of
// every step to stderr when the call ends (synchronises the stream; for kernel work only).
class Profiler {
 public:
  Profiler(cudaStream_t s, const char* what, bool on) : on_(on), s_(s), what_(what) {
    mark("start");
  }
  void mark(const char* name) {
    if (!on_) return;
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(e, s_));
    marks_.emplace_back(name, e);
  }
  ~Profiler() {
    if (!on_) return;
    cudaEventSynchronize(marks_.back().second);
    std::fprintf(stderr, "[attn profile] %s:", what_);
    for (size_t i = 1; i < marks_.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, marks_[i - 1].second, marks_[i].second);
      std::fprintf(stderr, " %s %.3f ms", marks_[i].first, ms);
    }
    std::fprintf(stderr, "\n");
    for (auto& m : marks_) cudaEventDestroy(m.second);
  }

 private:
  bool on_;
  cudaStream_t s_;
  const char* what_;
  std::vector<std::pair<const char*, cudaEvent_t>> marks_;
};

// A caller's workspace must be at least the size the *_workspace_bytes call reported (also where
// the plan's kernels need none of it: the contract does not depend on the plan).
void check_workspace(const void* ws, size_t have, size_t need, const char* what) {
  if (ws && have < need) fail("{}: workspace of {} bytes is smaller than the {} required", what, have, need);
}

// A workspace that is either the caller's (checked for size) or a stream-ordered allocation.
struct ScopedWorkspace {
  unsigned char* base = nullptr;
  bool owned = false;
  cudaStream_t stream = nullptr;
  ScopedWorkspace(void* ws, size_t have, size_t need, cudaStream_t s, const char* what) : stream(s) {
    if (ws) {
      check_workspace(ws, have, need, what);
      base = static_cast<unsigned char*>(ws);
    } else if (need > 0) {
      void* p = nullptr;
      CUDA_CHECK(cudaMallocAsync(&p, need, s));
      base = static_cast<unsigned char*>(p);
      owned = true;
    }
  }
  ~ScopedWorkspace() {
    if (owned) cudaFreeAsync(base, stream);
  }
  ScopedWorkspace(const ScopedWorkspace&) = delete;
  ScopedWorkspace& operator=(const ScopedWorkspace&) = delete;
  template <class T>
  T* at(size_t off) const { return reinterpret_cast<T*>(base + off); }
};

}  // namespace
}  // namespace detail

using detail::Workspace;

namespace {
// The plan's inputs of one call: its options (checked) and the device's limits.
struct Planned {
  const AttentionOptions& opt;
  detail::DeviceLimits dev;
  Planned(const AttnDims& d, DType dt, const AttentionOptions& o, const char* what)
      : opt((detail::check_dims(d, what), detail::check_options(o), o)), dev(detail::device_limits(d.Dh, dt)) {}
  Workspace workspace(const AttnDims& d, DType dt, bool path, bool backward, bool external) const {
    return detail::workspace_layout(d, dt, path, backward, external, dev, opt);
  }
  // The short kernels (two warps a head) run: they take row strides and, for softmax, RoPE's table.
  bool short_warp(bool path, const AttnDims& d) const {
    return path ? detail::path_short_warp(d, dev, opt) : detail::softmax_short_warp(d, opt);
  }
  // Row strides other than H Dh (AttnDims::qkv_ld, grad_ld) and RoPE's table only where they run.
  void check_layout(bool path, const AttnDims& d, const float* rope_cs, const char* what) const {
    const bool strided = d.qkv_stride() != d.H * d.Dh || d.grad_stride() != d.H * d.Dh;
    if (strided && !short_warp(path, d))
      fail("{}: row strides qkv_ld = {}, grad_ld = {} (not H Dh) need the short kernels (attention_takes_strides)",
           what, d.qkv_ld, d.grad_ld);
    if (rope_cs && !short_warp(path, d))
      fail("{}: RoPE inside the kernel (rope_cs) needs the short kernels (softmax_attention_takes_rope)", what);
  }
};
}  // namespace

size_t path_attention_factors_bytes(const AttnDims& d, DType dt, const AttentionOptions& opt) {
  const Planned P(d, dt, opt, "path attention factors");
  return detail::factor_layout(d, dt, true, true, P.dev, opt).total;
}
size_t path_attention_forward_workspace_bytes(const AttnDims& d, DType dt, bool external_factors,
                                              const AttentionOptions& opt) {
  return Planned(d, dt, opt, "path attention forward").workspace(d, dt, true, false, external_factors).total;
}
size_t path_attention_backward_workspace_bytes(const AttnDims& d, DType dt, bool external_factors,
                                               const AttentionOptions& opt) {
  return Planned(d, dt, opt, "path attention backward").workspace(d, dt, true, true, external_factors).total;
}
size_t softmax_attention_forward_workspace_bytes(const AttnDims& d, DType dt, const AttentionOptions& opt) {
  return Planned(d, dt, opt, "softmax attention forward").workspace(d, dt, false, false, false).total;
}
size_t softmax_attention_backward_workspace_bytes(const AttnDims& d, DType dt, const AttentionOptions& opt) {
  return Planned(d, dt, opt, "softmax attention backward").workspace(d, dt, false, true, false).total;
}

bool softmax_attention_uses_wgmma(int64_t Dh, DType dt, const AttentionOptions& opt) {
  return detail::uses_wgmma(Dh, dt, detail::device_limits(Dh, dt), opt);
}

bool softmax_attention_takes_rope(const AttnDims& d, const AttentionOptions& opt) {
  return detail::softmax_short_warp(d, opt);
}

bool attention_takes_strides(bool path, const AttnDims& d, DType dt, const AttentionOptions& opt) {
  return Planned(d, dt, opt, "attention").short_warp(path, d);
}

namespace {

// The factor kernel's outputs in a factor region laid out by factor_layout (minv where with_minv).
detail::PrepOut prep_out(unsigned char* base, const AttnDims& d, DType dt, bool with_minv, bool with_states,
                         const Planned& P) {
  const detail::FactorLayout F = detail::factor_layout(d, dt, with_minv, with_states, P.dev, P.opt);
  const bool dense = detail::path_dense(d.Dh);
  auto at = [&](size_t off) { return reinterpret_cast<uint16_t*>(base + off); };
  detail::PrepOut o;
  o.kt_hi = at(F.kt);
  o.kt_lo = dt == DType::F32 ? at(F.kt_lo) : nullptr;
  o.y_hi = at(F.y), o.y_lo = at(F.y_lo);
  o.c_hi = dense ? at(F.c) : nullptr, o.c_lo = dense ? at(F.c_lo) : nullptr;
  o.z = reinterpret_cast<float*>(base + F.z);
  o.minv = with_minv ? reinterpret_cast<float*>(base + F.minv) : nullptr;
  o.sc = F.sc, o.nsc = F.nsc;
  if (F.sc > 0) {
    o.ke_hi = at(F.ke), o.ke_lo = dt == DType::F32 ? at(F.ke_lo) : nullptr;
    o.cs_hi = at(F.cs), o.cs_lo = at(F.cs_lo);
    if (F.xs_rows > 0) o.xs = at(F.xs), o.xs_rows = F.xs_rows;
  }
  return o;
}

// The superchunk arguments shared by the forward (sc_prep) and the backward (sc_bwd).
detail::ScArgs sc_args(const detail::PrepOut& o, const float* w, const AttnDims& d) {
  detail::ScArgs sa;
  sa.kt_hi = o.kt_hi, sa.kt_lo = o.kt_lo, sa.y_hi = o.y_hi, sa.y_lo = o.y_lo, sa.w = w;
  sa.ke_hi = o.ke_hi, sa.ke_lo = o.ke_lo, sa.cs_hi = o.cs_hi, sa.cs_lo = o.cs_lo;
  sa.B = d.B, sa.T = d.T, sa.H = d.H, sa.nb = static_cast<int>((d.T + 63) / 64), sa.sc = o.sc, sa.nsc = o.nsc;
  sa.dense = detail::path_dense(d.Dh);
  return sa;
}

void forward_impl(bool path, void* out, float* lse, const void* q, const void* k, const void* v, const float* w,
                  const float* beta, const float* log_f, const AttnDims& d, float scale, DType dt, void* workspace,
                  size_t workspace_bytes, cudaStream_t stream, void* factors, const AttentionOptions& opt,
                  const float* rope_cs = nullptr) {
  const char* what = path ? "path attention forward" : "softmax attention forward";
  detail::check_dims(d, what);
  detail::check_scale(scale, what);  // before anything asks the device
  const Planned P(d, dt, opt, what);
  for (auto [p, name] : {std::pair<const void*, const char*>{out, "out"}, {q, "q"}, {k, "k"}, {v, "v"}})
    detail::require_tensor(p, name, what);
  detail::require(lse, "lse", what);
  if (path) detail::require(w, "w", what), detail::require(beta, "beta", what);
  P.check_layout(path, d, rope_cs, what);
  const bool external = factors != nullptr;  // kept for the backward: with minv
  const Workspace L = P.workspace(d, dt, path, false, external);
  if (path && detail::path_short(d, P.dev, opt)) {  // the whole sequence in one CTA per head, no scratch
    detail::check_workspace(workspace, workspace_bytes, L.total, what);
    if (detail::path_short_warp(d, P.dev, opt))
      detail::path_short_warp_forward(out, lse, q, k, v, w, beta, log_f, d, scale, dt == DType::BF16,
                                      static_cast<float*>(factors), P.dev, stream);
    else
      detail::path_short_forward(out, lse, q, k, v, w, beta, log_f, d, scale, dt == DType::BF16, stream);
    return;
  }
  if (!path && detail::softmax_short_warp(d, opt)) {  // the whole head in one CTA, no scratch
    detail::check_workspace(workspace, workspace_bytes, L.total, what);
    detail::softmax_short_warp_forward(out, lse, q, k, v, log_f, rope_cs, d, scale, dt == DType::BF16, stream);
    return;
  }
  detail::ScopedWorkspace ws(workspace, workspace_bytes, L.total, stream, what);
  const bool bf16 = dt == DType::BF16;
  const int nb = static_cast<int>((d.T + 63) / 64);
  detail::Profiler prof(stream, what, opt.profile);
  if (log_f) detail::launch_gate_prefix(ws.at<double>(L.gcum), log_f, d.B, d.T, d.H, stream), prof.mark("gate");
  detail::FwdParams p;
  p.q = q, p.k = k, p.v = v, p.w = w, p.gcum = log_f ? ws.at<double>(L.gcum) : nullptr;
  p.out = out, p.lse = lse, p.B = d.B, p.T = d.T, p.H = d.H, p.nb = nb, p.scale = scale, p.bf16 = bf16;
  p.wgmma = !path && detail::uses_wgmma(d.Dh, dt, P.dev, opt);
  if (path) {
    p.dense = detail::path_dense(d.Dh);
    const detail::PrepOut o =
        prep_out(external ? static_cast<unsigned char*>(factors) : ws.base + L.factors, d, dt, external, external, P);
    p.kt_hi = o.kt_hi, p.kt_lo = o.kt_lo, p.y_hi = o.y_hi, p.y_lo = o.y_lo, p.c_hi = o.c_hi, p.c_lo = o.c_lo;
    p.z = o.z;
    detail::launch_path_prep(o, k, w, beta, d.B, d.T, d.H, d.Dh, bf16, stream);
    prof.mark("prep");
    if (o.sc > 0) {
      detail::launch_sc_prep(sc_args(o, w, d), d.Dh, !bf16, stream), prof.mark("superchunk prep");
      p.ke_hi = o.ke_hi, p.ke_lo = o.ke_lo, p.cs_hi = o.cs_hi, p.cs_lo = o.cs_lo, p.sc = o.sc, p.nsc = o.nsc;
    }
    const detail::FwdInterPlan fi = detail::path_fwd_inter_plan(d, dt, P.dev, opt);
    if (fi.group > 0 && o.sc > 0) {  // per head group: the own superchunks and the states, then the pass
      p.inter = true, p.xs = o.xs ? o.xs : ws.at<detail::bf16_raw>(L.xs), p.xs_rows = fi.xs_rows;
      for (int64_t bh0 = 0; bh0 < d.B * d.H; bh0 += fi.group) {
        p.bh0 = bh0, p.nbh = std::min(fi.group, d.B * d.H - bh0);
        detail::launch_fwd<true>(p, d.Dh, stream);
        prof.mark("fused");
        detail::launch_path_fwd_inter(p, d.Dh, stream);
        prof.mark("inter");
      }
      return;
    }
    detail::launch_fwd<true>(p, d.Dh, stream);
  } else {
    detail::launch_fwd<false>(p, d.Dh, stream);
  }
  prof.mark("fused");
}

}  // namespace

void path_attention_forward_cuda(void* out, float* lse, const void* q, const void* k, const void* v, const float* w,
                                 const float* beta, const float* log_f, const AttnDims& d, float scale, DType dt,
                                 void* workspace, size_t workspace_bytes, cudaStream_t stream, void* factors,
                                 const AttentionOptions& opt) {
  forward_impl(true, out, lse, q, k, v, w, beta, log_f, d, scale, dt, workspace, workspace_bytes, stream, factors,
               opt);
}

void softmax_attention_forward_cuda(void* out, float* lse, const void* q, const void* k, const void* v,
                                    const float* log_f, const AttnDims& d, float scale, DType dt, void* workspace,
                                    size_t workspace_bytes, cudaStream_t stream, const AttentionOptions& opt,
                                    const float* rope_cs) {
  forward_impl(false, out, lse, q, k, v, nullptr, nullptr, log_f, d, scale, dt, workspace, workspace_bytes, stream,
               nullptr, opt, rope_cs);
}

namespace {

// A second stream of the current device for work that overlaps the caller's, with the two events
// of a fork and a join: one per host thread and device (threads must not share the events), created
// at the first (eager) call, so that a later CUDA graph capture only records and waits; never
// destroyed (the process's CUDA context owns them).
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};
SideStream& side_stream() {
  thread_local std::map<int, SideStream> by_device;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  SideStream& s = by_device[dev];
  if (!s.stream) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
  }
  return s;
}

void backward_impl(bool path, void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f, const void* dout,
                   const void* q, const void* k, const void* v, const float* w, const float* beta,
                   const float* log_f, const void* out, const float* lse, const AttnDims& d, float scale, DType dt,
                   void* workspace, size_t workspace_bytes, cudaStream_t stream, const void* factors,
                   const AttentionOptions& opt, const float* rope_cs = nullptr) {
  const char* what = path ? "path attention backward" : "softmax attention backward";
  detail::check_dims(d, what);
  detail::check_scale(scale, what);  // before anything asks the device
  const Planned P(d, dt, opt, what);
  for (auto [p, name] : {std::pair<const void*, const char*>{dq, "dq"}, {dk, "dk"}, {dv, "dv"}, {dout, "dout"},
                         {q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}})
    detail::require_tensor(p, name, what);
  detail::require(lse, "lse", what);
  if (path) {
    for (auto [p, name] : {std::pair<const void*, const char*>{dw, "dw"}, {dbeta, "dbeta"}, {w, "w"}, {beta, "beta"}})
      detail::require(p, name, what);
  }
  if (log_f) detail::require(dlog_f, "dlog_f", what);
  P.check_layout(path, d, rope_cs, what);
  const bool external = factors != nullptr;  // the forward's factors: no factor kernel here
  const Workspace L = P.workspace(d, dt, path, true, external);
  if (path && detail::path_short(d, P.dev, opt)) {  // as the forward: recomputes on chip (the warp kernels
                                                    // start from the forward's Tinv and Z, if kept)
    detail::check_workspace(workspace, workspace_bytes, L.total, what);
    if (detail::path_short_warp(d, P.dev, opt))
      detail::path_short_warp_backward(dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, lse, d, scale,
                                       dt == DType::BF16, static_cast<const float*>(factors), P.dev, stream);
    else
      detail::path_short_backward(dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, lse, d, scale,
                                  dt == DType::BF16, stream);
    return;
  }
  if (!path && detail::softmax_short_warp(d, opt)) {
    detail::check_workspace(workspace, workspace_bytes, L.total, what);
    detail::softmax_short_warp_backward(dq, dk, dv, dlog_f, dout, q, k, v, log_f, rope_cs, lse, d, scale,
                                        dt == DType::BF16, stream);
    return;
  }
  const detail::BwdConfig cfg = detail::bwd_config(d, dt, path, P.dev, opt);
  detail::ScopedWorkspace ws(workspace, workspace_bytes, L.total, stream, what);
  const bool bf16 = dt == DType::BF16, dense = path && detail::path_dense(d.Dh);
  const int nb = static_cast<int>((d.T + 63) / 64);
  const int64_t BH = d.B * d.H;
  detail::Profiler prof(stream, what, opt.profile);
  // dg and the accumulators of the first (PaTH: of every) group; later groups rezero theirs.
  CUDA_CHECK(cudaMemsetAsync(ws.base + L.acc_begin, 0, L.acc_end - L.acc_begin, stream));
  if (log_f) detail::launch_gate_prefix(ws.at<double>(L.gcum), log_f, d.B, d.T, d.H, stream);
  detail::launch_delta(ws.at<float>(L.delta), dout, out, d.B, d.T, d.H, d.Dh, bf16, stream);
  prof.mark("memset+gate+delta");
  detail::PrepOut o;
  if (path) {
    o = prep_out(external ? static_cast<unsigned char*>(const_cast<void*>(factors)) : ws.base + L.factors, d, dt, true,
                 external, P);
    if (!external) {
      detail::launch_path_prep(o, k, w, beta, d.B, d.T, d.H, d.Dh, bf16, stream), prof.mark("prep");
      if (o.sc > 0) detail::launch_sc_prep(sc_args(o, w, d), d.Dh, !bf16, stream), prof.mark("superchunk prep");
    }
  }
  detail::BwdParams p;
  p.q = q, p.k = k, p.v = v, p.dout = dout, p.w = w, p.lse = lse, p.delta = ws.at<float>(L.delta);
  p.gcum = log_f ? ws.at<double>(L.gcum) : nullptr;
  p.dq = dq, p.dk = dk, p.dv = dv;
  p.dg = log_f ? ws.at<float>(L.dg) : nullptr;
  p.B = d.B, p.T = d.T, p.H = d.H, p.nb = nb, p.warps = cfg.warps, p.stages = cfg.stages;
  p.nqb = static_cast<int>((d.T + 16 * cfg.warps - 1) / (16 * cfg.warps));
  p.seg = cfg.seg, p.ck_slots = cfg.ck_slots, p.slot_floats = cfg.slot_floats;
  p.scale = scale, p.bf16 = bf16, p.dense = dense;
  if (path) {
    p.dv_acc = ws.at<float>(L.dv), p.dk_acc = ws.at<float>(L.dk);
    p.kt_hi = o.kt_hi, p.kt_lo = o.kt_lo, p.y_hi = o.y_hi, p.y_lo = o.y_lo, p.c_hi = o.c_hi, p.c_lo = o.c_lo;
    p.z = o.z;
    p.dkt_acc = ws.at<float>(L.dkt), p.dy_acc = ws.at<float>(L.dy), p.dw_acc = ws.at<float>(L.dw);
    p.dz_acc = ws.at<float>(L.dz), p.dp_acc = dense ? ws.at<float>(L.dp) : nullptr;
    p.scratch = cfg.slot_floats > 0 ? ws.at<float>(L.scratch) : nullptr;
    p.dqt = ws.at<float>(L.dqt);
    p.tickets = ws.at<unsigned int>(L.tickets);
    detail::ScArgs sa = sc_args(o, w, d);
    if (cfg.sc > 0) {
      sa.dke_acc = ws.at<float>(L.dke), sa.dws_acc = ws.at<float>(L.dws);
      sa.dkt_acc = p.dkt_acc, sa.dp_acc = p.dp_acc, sa.dw_acc = p.dw_acc, sa.dy_acc = p.dy_acc;
      sa.scratch = ws.at<float>(L.sc_scratch), sa.parts = cfg.sc_parts;
      sa.dps = dense ? nullptr : ws.at<float>(L.sc_dps);
      p.ke_hi = sa.ke_hi, p.ke_lo = sa.ke_lo, p.cs_hi = sa.cs_hi, p.cs_lo = sa.cs_lo;
      p.dke_acc = ws.at<float>(L.dke), p.dws_acc = ws.at<float>(L.dws);
      p.sc = cfg.sc, p.nsc = cfg.nsc;
      if (cfg.inter) {
        if (o.xs && o.xs_rows != cfg.xs_rows)
          fail("{}: the kept query states have {} rows per head, the backward's plan {}", what, o.xs_rows, cfg.xs_rows);
        p.xs = o.xs ? o.xs : ws.at<detail::bf16_raw>(L.xs), p.dxs = ws.at<float>(L.dxs), p.xs_rows = cfg.xs_rows;
        p.qchunk = cfg.inter_qchunk;
        int* order = ws.at<int>(L.item_order);
        const auto weights = detail::path_item_weights(cfg.sc, cfg.nsc, p.nqb * cfg.bh_group, cfg.grid);
        detail::launch_path_item_order(order, nb, cfg.sc, cfg.nsc, weights, stream);
        p.item_order = order;
      }
    }
    detail::FactorsBwdArgs fa;
    fa.dk = dk, fa.dw = dw, fa.dbeta = dbeta, fa.dkt_acc = p.dkt_acc, fa.dy_acc = p.dy_acc, fa.dz_acc = p.dz_acc;
    fa.dp_acc = p.dp_acc, fa.dk_acc = p.dk_acc, fa.dw_acc = p.dw_acc, fa.minv = o.minv, fa.z = o.z;
    fa.y_hi = o.y_hi, fa.y_lo = o.y_lo, fa.k = k, fa.w = w, fa.beta = beta;
    // The states launch of group g + 1 runs on a side stream once group g's pairs kernel is done
    // with xs, overlapping g's latency-bound tail (sc_bwd, own blocks, factors); each states launch
    // counts its items in its own counter.
    SideStream* side = cfg.inter && !o.xs && cfg.bh_group < BH ? &side_stream() : nullptr;
    auto with_tickets = [&](const detail::BwdParams& q0, int64_t g0) {
      detail::BwdParams q1 = q0;
      q1.tickets = ws.at<unsigned int>(L.state_tickets) + g0 / cfg.bh_group;
      return q1;
    };
    // Groups of bh_group heads (plan.hpp, path_bwd_group): each runs the stages
    // that use the accumulators, from zeroed accumulators, and writes its heads' dq, dk, dv, dw, dbeta.
    for (int64_t bh0 = 0; bh0 < BH; bh0 += cfg.bh_group) {
      const int64_t nbh = std::min(cfg.bh_group, BH - bh0);
      if (bh0 > 0) {
        CUDA_CHECK(cudaMemsetAsync(ws.base + L.group_begin, 0, L.acc_end - L.group_begin, stream));
        prof.mark("memset");
      }
      p.bh0 = sa.bh0 = fa.bh0 = bh0;
      p.nbh = sa.nbh = fa.nbh = nbh;
      if (cfg.inter) {  // pairs with earlier superchunks on wgmma: states, the pass, then the rest
        if (o.xs) {  // the forward's, kept in the factors: this group's heads
          p.xs = o.xs + bh0 * cfg.xs_rows * d.Dh;
        } else if (side && bh0 > 0) {  // launched on the side stream during the previous group's tail
          CUDA_CHECK(cudaStreamWaitEvent(stream, side->join));
        } else {
          detail::launch_path_states(with_tickets(p, bh0), cfg, d.Dh, stream);
          prof.mark("states");
        }
        detail::launch_path_inter_bwd(p, d.Dh, stream);
        prof.mark("inter pairs");
        p.inter = 2;
      }
      if (nb > 1) detail::launch_bwd<true>(p, cfg, d.Dh, stream), prof.mark("fused");  // the pairs
      if (side && bh0 + nbh < BH) {  // done with xs: the next group's states, beside this group's tail
        detail::BwdParams ps = with_tickets(p, bh0 + nbh);
        ps.bh0 = bh0 + nbh, ps.nbh = std::min(cfg.bh_group, BH - ps.bh0);
        CUDA_CHECK(cudaEventRecord(side->fork, stream));
        CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->fork));
        detail::launch_path_states(ps, cfg, d.Dh, side->stream);
        CUDA_CHECK(cudaEventRecord(side->join, side->stream));
      }
      if (cfg.sc > 0) {  // the pairs kernel is done with the scratch region that holds dps
        if (sa.dps) {
          const size_t bytes = static_cast<size_t>(detail::sc_bwd_dps_floats(nbh, cfg.sc, cfg.nsc, d.Dh)) * 4;
          CUDA_CHECK(cudaMemsetAsync(sa.dps, 0, bytes, stream));
        }
        detail::launch_sc_bwd(sa, cfg.sc_grid, d.Dh, cfg.split_grads, stream), prof.mark("superchunk bwd");
        if (sa.dps) detail::launch_sc_dwdy(sa, d.Dh, stream), prof.mark("superchunk dW dY");
      }
      detail::launch_path_own_bwd(p, cfg, d.Dh, stream);
      prof.mark("own");
      detail::launch_path_factors_bwd(fa, d.B, d.T, d.H, d.Dh, bf16, stream);
      prof.mark("factors");
      detail::launch_acc_to_output(dv, p.dv_acc, d.B, d.T, d.H, d.Dh, bh0, nbh, bf16, stream);
      prof.mark("dv");
    }
  } else {
    p.dq_acc = ws.at<float>(L.dq);
    p.bh0 = 0, p.nbh = BH;
    detail::launch_bwd<false>(p, cfg, d.Dh, stream);
    prof.mark("fused");
    detail::launch_acc_to_output(dq, p.dq_acc, d.B, d.T, d.H, d.Dh, 0, BH, bf16, stream);
  }
  if (log_f) detail::launch_gate_grad(dlog_f, ws.at<float>(L.dg), d.B, d.T, d.H, stream);
  prof.mark("outputs");
}

}  // namespace

void path_attention_backward_cuda(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f,
                                  const void* dout, const void* q, const void* k, const void* v, const float* w,
                                  const float* beta, const float* log_f, const void* out, const float* lse,
                                  const AttnDims& d, float scale, DType dt, void* workspace, size_t workspace_bytes,
                                  cudaStream_t stream, const void* factors, const AttentionOptions& opt) {
  backward_impl(true, dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, out, lse, d, scale, dt, workspace,
                workspace_bytes, stream, factors, opt);
}

void softmax_attention_backward_cuda(void* dq, void* dk, void* dv, float* dlog_f, const void* dout, const void* q,
                                     const void* k, const void* v, const float* log_f, const void* out,
                                     const float* lse, const AttnDims& d, float scale, DType dt, void* workspace,
                                     size_t workspace_bytes, cudaStream_t stream, const AttentionOptions& opt,
                                     const float* rope_cs) {
  backward_impl(false, dq, dk, dv, nullptr, nullptr, dlog_f, dout, q, k, v, nullptr, nullptr, log_f, out, lse, d,
                scale, dt, workspace, workspace_bytes, stream, nullptr, opt, rope_cs);
}

}  // namespace sb::cuda
