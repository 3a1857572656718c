// layout.cpp: the byte layouts that follow from an attention plan (plan.hpp): the PaTH factors'
// region, the workspace of a forward or backward call and the backward's accumulators per head.
// Every region starts 256-byte aligned.
#include <algorithm>

#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {
namespace {

// Hands out 256-aligned byte offsets one after the other (workspace and factor layouts).
struct Offsets {
  size_t end = 0;
  size_t take(size_t bytes) {
    const size_t at = end;
    end += (bytes + 255) / 256 * 256;
    return at;
  }
};

// The PaTH backward's accumulators for g heads, taken from o, in two sets (fp32 each).
// The own block's dK and dZ terms ([g, Tp, Dh], [g, nb, 64, 64]): only the own-block kernel writes
// them, whole blocks at a time when its query blocks are whole blocks (no zeroing needed then).
void take_own_accumulators(Workspace& w, Offsets& o, const AttnDims& d, int64_t nb, int64_t g) {
  w.dk = o.take(static_cast<size_t>(g * nb * kBlock * d.Dh) * 4);
  w.dz = o.take(static_cast<size_t>(g * nb * kBlock * kBlock) * 4);
}

// The others, added to by several kernels (zeroed before each group): dv, dkt, dy, dw ([g, Tp, Dh]),
// dense dp ([g, nb, Dh, Dh]), with superchunks dke ([g, Tp, Dh]) and dws ([g, nsc, Dh, Dh]), and for
// the wgmma inter pass dxs ([g, xs_rows, Dh]).
void take_path_accumulators(Workspace& w, Offsets& o, const AttnDims& d, int64_t nb, int64_t nsc, int64_t g,
                            int64_t xs_rows) {
  const size_t rows = static_cast<size_t>(g * nb * kBlock * d.Dh) * 4, mats = static_cast<size_t>(g * d.Dh * d.Dh) * 4;
  w.dv = o.take(rows);
  w.dkt = o.take(rows);
  w.dy = o.take(rows);
  w.dw = o.take(rows);
  w.dp = o.take(path_dense(d.Dh) ? static_cast<size_t>(nb) * mats : 0);
  if (nsc > 0) w.dke = o.take(rows), w.dws = o.take(static_cast<size_t>(nsc) * mats);
  w.dxs = o.take(static_cast<size_t>(g * xs_rows * d.Dh) * 4);
}

}  // namespace

// Bytes of those accumulators for one head (b, h), with the inter pass's bf16 states.
int64_t path_acc_row_bytes(const AttnDims& d, int64_t nb, int64_t nsc, int64_t xs_rows) {
  Workspace w;
  Offsets o;
  take_own_accumulators(w, o, d, nb, 1);
  take_path_accumulators(w, o, d, nb, nsc, 1, xs_rows);
  return static_cast<int64_t>(o.end) + xs_rows * d.Dh * 2;
}

FactorLayout factor_layout(const AttnDims& d, DType dt, bool with_minv, bool with_states, const DeviceLimits& dev,
                           const AttentionOptions& opt) {
  const int64_t BH = d.B * d.H, nb = (d.T + kBlock - 1) / kBlock, Tp = nb * kBlock;
  FactorLayout f;
  Offsets o;
  if (path_short_warp(d, dev, opt)) {  // each head's Tinv^T and Z (path_short_warp_sm80.cu) and nothing else
    o.take(static_cast<size_t>(BH * kShortWarpT * kShortWarpT) * 4);
    f.total = o.end;
    return f;
  }
  const size_t plane = static_cast<size_t>(BH * Tp * d.Dh) * 2;  // bf16 [BH, Tp, Dh]
  const size_t blk = static_cast<size_t>(BH * nb * kTriFloats) * 4;  // packed strictly lower 64 x 64
  const size_t cplane = path_dense(d.Dh) ? static_cast<size_t>(BH * nb * d.Dh * d.Dh) * 2 : 0;
  f.kt = o.take(plane);
  f.kt_lo = o.take(dt == DType::F32 ? plane : 0);
  f.y = o.take(plane);
  f.y_lo = o.take(plane);
  f.z = o.take(blk);
  f.minv = o.take(with_minv ? blk : 0);
  f.c = o.take(cplane);
  f.c_lo = o.take(cplane);
  const ScPlan plan = superchunk_plan(d, dt, dev, opt);
  f.sc = plan.sc;
  if (f.sc > 0) {
    f.nsc = plan.nsc;
    const size_t scm = static_cast<size_t>(BH * f.nsc * d.Dh * d.Dh) * 2;
    f.ke = o.take(plane);
    f.ke_lo = o.take(dt == DType::F32 ? plane : 0);
    f.cs = o.take(scm);
    f.cs_lo = o.take(scm);
    if (with_states && path_states_kept(d, dt, dev, opt)) {
      f.xs_rows = plan.xs_rows;
      f.xs = o.take(static_cast<size_t>(BH * f.xs_rows * d.Dh) * 2);
    }
  }
  f.total = o.end;
  return f;
}

Workspace workspace_layout(const AttnDims& d, DType dt, bool path, bool backward, bool external_factors,
                           const DeviceLimits& dev, const AttentionOptions& opt) {
  const int64_t BH = d.B * d.H, nb = (d.T + kBlock - 1) / kBlock, Tp = nb * kBlock;
  const size_t rows = static_cast<size_t>(BH * Tp * d.Dh) * 4;
  Workspace w;
  Offsets o;
  w.gcum = o.take(static_cast<size_t>(BH * d.T) * 8);
  if (backward) w.delta = o.take(static_cast<size_t>(BH * d.T) * 4);
  if (path && !external_factors) w.factors = o.take(factor_layout(d, dt, backward, false, dev, opt).total);
  if (backward) {
    const BwdConfig cfg = bwd_config(d, dt, path, dev, opt);
    const bool own_whole = path && cfg.own_warps * 16 == kBlock;  // path_own_bwd.cu stores dK, dZ
    if (own_whole) take_own_accumulators(w, o, d, nb, cfg.bh_group);
    w.acc_begin = o.end;
    w.dg = o.take(static_cast<size_t>(BH * Tp) * 4);  // all heads (zeroed once)
    // The states launches' counters, one per group (zeroed once: a group's launch may run while the
    // group before it still uses its zeroed region).
    if (path && cfg.inter) w.state_tickets = o.take(static_cast<size_t>((BH + cfg.bh_group - 1) / cfg.bh_group) * 4);
    w.group_begin = o.end;
    if (path) {  // one group of heads
      if (!own_whole) take_own_accumulators(w, o, d, nb, cfg.bh_group);
      take_path_accumulators(w, o, d, nb, cfg.nsc, cfg.bh_group, cfg.xs_rows);
      w.tickets = o.take(sizeof(unsigned int));  // the pairs launch's BwdParams::tickets
    } else {
      w.dq = o.take(rows);  // dk, dv are written by the key-centric kernel
    }
    w.acc_end = o.end;
    // sc_bwd (and sc_dwdy) run after the fused kernel of their group on the same stream: one
    // region serves both, the sc_bwd grid's slots and then the group's dP_m (factored).
    size_t sc_slots = 0, sc_dps = 0;
    if (cfg.sc > 0) {
      sc_slots = static_cast<size_t>(cfg.sc_grid * sc_bwd_slot_floats(cfg.sc, d.Dh, cfg.sc_parts)) * 4;
      sc_dps = static_cast<size_t>(sc_bwd_dps_floats(cfg.bh_group, cfg.sc, cfg.nsc, d.Dh)) * 4;
    }
    const size_t pair_slots = static_cast<size_t>(cfg.grid) * static_cast<size_t>(cfg.slot_floats) * 4;
    w.scratch = o.take(std::max(sc_slots + sc_dps, pair_slots));
    if (cfg.sc > 0) w.sc_scratch = w.scratch, w.sc_dps = w.scratch + sc_slots;
    // The backward's own states, unless the forward kept them in the caller's factors.
    const bool kept = path && external_factors && path_states_kept(d, dt, dev, opt);
    w.xs = o.take(kept ? 0 : static_cast<size_t>(cfg.bh_group * cfg.xs_rows * d.Dh) * 2);
    if (path) w.dqt = o.take(static_cast<size_t>(cfg.bh_group * Tp * d.Dh) * 4);
    if (path && cfg.inter) w.item_order = o.take(static_cast<size_t>(nb) * 4);
  } else if (path && !(external_factors && path_states_kept(d, dt, dev, opt))) {  // else in the caller's factors
    const FwdInterPlan f = path_fwd_inter_plan(d, dt, dev, opt);
    w.xs = o.take(static_cast<size_t>(f.group * f.xs_rows * d.Dh) * 2);
  }
  w.total = o.end;
  return w;
}

}  // namespace sb::cuda::detail
