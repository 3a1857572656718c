// attention_layout.cpp: the layouts and the launch configuration behind the CUDA attention entry
// points (attention_api.cpp; declared in attn_internal.hpp): PaTH factor and workspace layouts
// (byte offsets), the backward configuration (query block, persistent grid, checkpoint segments,
// superchunks, PaTH head groups) and its developer switches.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "kernels/attn_internal.hpp"

namespace sb::cuda {
namespace detail {
namespace {

constexpr int64_t kBlock = 64;
int64_t g_checkpoint_budget = 0;  // set_path_checkpoint_budget (0 = default)
// The PaTH backward's per-group accumulators stay within a budget (acc_budget) unless that would
// leave a launch with fewer than kMinWaves waves of the persistent grid (kernels/NOTES.md, "Backward
// head groups"): 512 MiB, or 128 MiB where one head's accumulators take more than 24 MiB (the long
// sequences: 58.5 MB per head at (2,8192,16,128), where 128 MiB holds the peak under 2x SDPA's).
// Fewer, larger groups fill the short launches (sc_bwd, factors, states) better: 256 against 128 MiB
// took 4.18 -> 3.82 ms at (64,768,2,128), 6.03 -> 5.53 at (8,2048,16,64), 7.55 -> 7.19 at
// (4,4096,16,64) for about 120 MiB more peak (version 42); after the split backward, 512 against
// 256 MiB took 4.76 -> 4.51 ms at (8,2048,16,64), 6.16 -> 5.85 at (4,4096,16,64), 2.29 -> 2.21 at
// (128,256,8,64) for 130-260 MiB more, within 1% at the Dh 128 shapes (version 46).
constexpr int64_t kAccBudgetMiB = 512, kAccBudgetLongMiB = 128;
constexpr int64_t kLongHeadAccBytes = int64_t{24} << 20;
constexpr int64_t kMinWaves = 3;
// With the wgmma inter-superchunk pass (xs_rows > 0) the floor is 1.5 waves (in half waves): its
// wgmma launches keep the GPU busier per head than the per-block kernel, and at (2,8192,16,128) two
// heads per group with the pass took 36.8 ms against 40.4 for four without it (kernels/NOTES.md
// version 34); one head per group (under one wave) took 55.8.
constexpr int64_t kMinHalfWavesInter = 3;
// With the wgmma inter-superchunk pass, superchunks of 6 blocks from 24 blocks on (kernels/NOTES.md:
// 6 measured fastest of 2-12 at T = 2048, 4096 and 8192 once the pairs between superchunks are cheap).
constexpr int64_t kInterSuperchunk = 6, kInterMinBlocks = 24;
// Below 24 blocks, with the pass, superchunks of round(sqrt(nb)) (at least 3) blocks from 9 blocks
// on: at (64,768,2,128), 12 blocks, 3 took 4.20 ms against 4.64 for the default 8 (4: 4.27, 6:
// 4.31, none: 4.71); at 8 blocks, none is best (3 and 4: 2.08 against 2.04 ms at (64,512,4,64)).
constexpr int64_t kShortScMinBlocks = 9;
// The inter pass's query ranges (inter_qchunk): where superchunk 0's query range is more than 1.5
// times one SM's share of the launch's query-block visits, ranges of about half that share, at
// least 4 blocks (kernels/NOTES.md, version 40: at (2,8192,16,128) the range is 2.0 shares and the
// split saved a third of the pass; at (4,4096,16,64), 1.02 shares, it cost 2.5% of the f+b).
constexpr int64_t kInterMinQChunk = 4;

struct DeviceInfo {
  int sms = 1, max_smem = 48 * 1024;
};

DeviceInfo device_info() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  DeviceInfo info;
  CUDA_CHECK(cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&info.max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return info;
}

// Hands out 256-aligned byte offsets one after the other (workspace and factor layouts).
struct Offsets {
  size_t end = 0;
  size_t take(size_t bytes) {
    const size_t at = end;
    end += (bytes + 255) / 256 * 256;
    return at;
  }
};

// The non-negative integer in environment variable `name`, `unset` when it is not set; anything
// else fails naming the variable, its value and `what` it should be.
int64_t env_count_or(const char* name, int64_t unset, const char* what) {
  const char* env = std::getenv(name);
  if (!env) return unset;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (end == env || *end != '\0' || v < 0) fail("{}: '{}' is not {}", name, env, what);
  return v;
}

}  // namespace

bool env_switch_or(const char* name, bool unset) {
  const int64_t v = env_count_or(name, unset ? 1 : 0, "0 or 1");
  if (v > 1) fail("{}: '{}' is not 0 or 1", name, v);
  return v == 1;
}

int64_t head_chunk_or(int64_t fallback) {
  return env_count_or("STATEBENCH_ATTN_HEAD_CHUNK", fallback, "a number of heads per CTA chunk (0 = one chunk)");
}

int inter_qchunk(int nb, int sc, int nsc, int64_t heads, int sms) {
  const int64_t set = env_count_or("STATEBENCH_PATH_INTER_QCHUNK", -1,
                                   "a number of query blocks per range of the inter pass (0 = whole ranges)");
  if (set >= 0) return static_cast<int>(std::min<int64_t>(set, nb));
  if (sc < 1 || nsc < 2) return 0;
  int64_t visits = 0;  // (range, key-block pair, head) query-block visits of one launch
  for (int b = 0; b + 1 < nsc; ++b) visits += nb - (b + 1) * sc;
  visits *= static_cast<int64_t>((sc + 1) / 2) * heads;
  const int64_t per_sm = (visits + sms - 1) / std::max(sms, 1);
  if (2 * (nb - sc) <= 3 * per_sm) return 0;  // superchunk 0's range does not set the launch's length
  return static_cast<int>(std::clamp<int64_t>((per_sm + 1) / 2, kInterMinQChunk, nb));
}

namespace {

// The accumulator budget (bytes) for heads of a bytes each; the developer switch
// STATEBENCH_PATH_ACC_BUDGET_MIB=N sets it to N MiB for A/B timing.
int64_t acc_budget(int64_t a) {
  const int64_t dflt = a > kLongHeadAccBytes ? kAccBudgetLongMiB : kAccBudgetMiB;
  const int64_t mib = env_count_or("STATEBENCH_PATH_ACC_BUDGET_MIB", dflt, "a budget in MiB (1 or more)");
  if (mib < 1) fail("STATEBENCH_PATH_ACC_BUDGET_MIB: '{}' is not a budget in MiB (1 or more)", mib);
  return mib << 20;
}

// Developer / test switch STATEBENCH_PATH_BWD_GROUP=N: N heads (b, h) per backward group; 0 or
// unset: the policy of path_bwd_group.
int64_t bwd_group_override() {
  return env_count_or("STATEBENCH_PATH_BWD_GROUP", 0,
                      "a number of heads per backward group (0 = automatic, or 1 and more)");
}

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

bool path_inter_wgmma(const AttnDims& d, DType dt, int warps) {
  if (warps != 4 || !softmax_attention_uses_wgmma(d.Dh, dt)) return false;
  const char* env = std::getenv("STATEBENCH_PATH_INTER_WGMMA");
  return !(env && std::string(env) == "0");
}

// Heads per backward group: all B H when their accumulators fit acc_budget(), else as many as fit
// but at least ceil(kMinWaves persistent / nqb) (waves of the persistent grid per launch; 1.5 waves
// with the inter pass), at most B H; then evened out over the same number of launches (63, 63, 2
// becomes 43, 43, 42).
int64_t path_bwd_group(const AttnDims& d, int64_t nb, int64_t nqb, int64_t nsc, int64_t xs_rows, int64_t persistent) {
  const int64_t BH = d.B * d.H, forced = bwd_group_override();
  if (forced > 0) return std::min(forced, BH);
  const int64_t a = path_acc_row_bytes(d, nb, nsc, xs_rows);
  const int64_t budget = acc_budget(a);
  if (a * BH <= budget) return BH;
  const int64_t half_waves = xs_rows > 0 ? kMinHalfWavesInter : 2 * kMinWaves;
  const int64_t g_min = (half_waves * persistent + 2 * nqb - 1) / (2 * nqb);
  const int64_t g = std::max<int64_t>(1, std::min(BH, std::max(g_min, budget / a)));
  const int64_t launches = (BH + g - 1) / g;
  return (BH + launches - 1) / launches;
}

int64_t stages_override() {
  const int64_t v = env_count_or("STATEBENCH_ATTN_BWD_STAGES", 0, "1 or 2 pipeline stages (0 = default)");
  if (v > 2) fail("STATEBENCH_ATTN_BWD_STAGES: '{}' is not 1 or 2 pipeline stages (0 = default)", v);
  return v;
}

int64_t fwd_stages_override() {
  const int64_t v = env_count_or("STATEBENCH_ATTN_FWD_STAGES", 0, "1 or 2 pipeline stages (0 = default)");
  if (v > 2) fail("STATEBENCH_ATTN_FWD_STAGES: '{}' is not 1 or 2 pipeline stages (0 = default)", v);
  return v;
}

ItemWeights path_item_weights(int sc, int nsc, int64_t items, int64_t grid) {
  constexpr const char* what = "0 (by block), 1 (by position in the superchunk) or 2 (cost 2 j + a)";
  int64_t v = env_count_or("STATEBENCH_PATH_ITEM_ORDER", -1, what);
  if (v > 2) fail("STATEBENCH_PATH_ITEM_ORDER: '{}' is not {}", v, what);
  if (v < 0) v = items < kCostOrderItemsPerCta * grid ? 2 : 0;
  if (v == 0) return {1, std::max(sc, 1)};
  if (v == 1) return {std::max(nsc, 1), 1};
  return {2, 1};
}

int sc_bwd_parts(int64_t Dh, bool split) {
  constexpr const char* what = "1, 2 or 4 CTAs per (head, superchunk) of sc_bwd (0 = default)";
  const int64_t v = env_count_or("STATEBENCH_PATH_SC_PARTS", 0, what);
  if (v == 0) return Dh >= 128 && !split ? 4 : (Dh >= 64 ? 2 : 1);
  if (v != 1 && v != 2 && v != 4) fail("STATEBENCH_PATH_SC_PARTS: '{}' is not {}", v, what);
  // A part holds 16 to 64 rows (the kernel's tiles: 128 rows of fp32's split tiles do not fit its
  // shared memory, and would take 128 registers a thread for the rows' state).
  return static_cast<int>(std::clamp<int64_t>(v, std::max<int64_t>(1, Dh / 64), std::max<int64_t>(1, Dh / 16)));
}

namespace {

// Developer / test switch STATEBENCH_PATH_SUPERCHUNK=N: superchunks of N blocks (0 = off); -1 when
// unset.
int64_t superchunk_override() {
  constexpr const char* what = "a superchunk size (0 = off, or 2 and more blocks)";
  const int64_t v = env_count_or("STATEBENCH_PATH_SUPERCHUNK", -1, what);
  if (v == 1) fail("STATEBENCH_PATH_SUPERCHUNK: '1' is not {}", what);
  return v;
}

// The PaTH pairs kernel's query block (warps), pipeline depth and shared memory on this device:
// the largest query block that fits, double-buffered unless one stage lets more CTAs share an SM
// (STATEBENCH_ATTN_BWD_STAGES=1 / 2 forces one / two where they fit); its persistent grid.
struct PathBwdShape {
  int warps = 4, stages = 2, smem = 0;
  int64_t nqb = 0, persistent = 0;
};
PathBwdShape path_bwd_shape(const AttnDims& d, DType dt, const DeviceInfo& dev) {
  const bool f32 = dt == DType::F32, dense = path_dense(d.Dh);
  const int64_t forced = stages_override();
  PathBwdShape s;
  for (int warps : {4, 2, 1}) {
    for (int stages : {2, 1})
      if (path_bwd_smem_bytes(d.Dh, f32, dense, warps, stages) <= dev.max_smem) {
        s.warps = warps, s.stages = stages, s.smem = path_bwd_smem_bytes(d.Dh, f32, dense, warps, stages);
        break;
      }
    if (s.smem) break;
  }
  if (!s.smem)
    fail("attention backward: needs {} bytes of shared memory, the device allows {}",
         path_bwd_smem_bytes(d.Dh, f32, dense, 1, 1), dev.max_smem);
  int occ = std::max(1, path_bwd_occupancy(d.Dh, f32, s.warps, s.smem));
  if (s.stages == 2 && forced != 2) {
    const int smem1 = path_bwd_smem_bytes(d.Dh, f32, dense, s.warps, 1);
    const int occ1 = std::max(1, path_bwd_occupancy(d.Dh, f32, s.warps, smem1));
    if (forced == 1 || occ1 > occ) s.stages = 1, s.smem = smem1, occ = occ1;
  }
  s.nqb = (d.T + 16 * s.warps - 1) / (16 * s.warps);
  s.persistent = static_cast<int64_t>(dev.sms) * occ;
  return s;
}

}  // namespace

ScPlan superchunk_plan_for(const AttnDims& d, bool wgmma, int64_t nqb, int64_t persistent) {
  const int64_t nb = (d.T + kBlock - 1) / kBlock;
  auto make = [&](int64_t sc, bool inter) {
    ScPlan s;
    if (sc <= 0 || nb <= sc) return s;
    s.sc = static_cast<int>(sc);
    s.nsc = static_cast<int>((nb + sc - 1) / sc);
    if (inter) {  // memory first: only where its states fit the accumulator budget
      const int64_t rows = sc_state_row(s.nsc - 1, nb * kBlock, sc * kBlock);
      const int64_t g = path_bwd_group(d, nb, nqb, s.nsc, rows, persistent);
      const int64_t a = path_acc_row_bytes(d, nb, s.nsc, rows);
      if (g * a <= acc_budget(a)) s.inter = true, s.xs_rows = rows;
    }
    return s;
  };
  const int64_t forced = superchunk_override();
  if (forced >= 0) return make(forced, wgmma);
  if (wgmma && nb >= kShortScMinBlocks) {  // with the pass where it fits
    const int64_t sc = nb >= kInterMinBlocks ? kInterSuperchunk
                                             : std::max<int64_t>(3, std::llround(std::sqrt(static_cast<double>(nb))));
    const ScPlan s = make(sc, true);
    if (s.inter) return s;
  }
  return make(std::max<int64_t>(8, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(nb))))), wgmma);
}

ScPlan superchunk_plan(const AttnDims& d, DType dt) {
  if (d.T <= 2 * kBlock) return superchunk_plan_for(d, false, 1, 1);  // none (nb <= 2): no device query
  const PathBwdShape shape = path_bwd_shape(d, dt, device_info());
  return superchunk_plan_for(d, path_inter_wgmma(d, dt, shape.warps), shape.nqb, shape.persistent);
}

BwdConfig bwd_config(const AttnDims& d, DType dt, bool path) {
  const DeviceInfo dev = device_info();
  const bool f32 = dt == DType::F32, one_stage = stages_override() == 1;
  BwdConfig cfg;
  if (!path) {  // key-centric: one CTA of 4 warps per (64-key block, head)
    cfg.stages = !one_stage && softmax_bwd_smem_bytes(d.Dh, f32, 2) <= dev.max_smem ? 2 : 1;
    cfg.smem = softmax_bwd_smem_bytes(d.Dh, f32, cfg.stages);
    if (cfg.smem > dev.max_smem)
      fail("attention backward: needs {} bytes of shared memory, the device allows {}", cfg.smem, dev.max_smem);
    cfg.grid = static_cast<int>(((d.T + kBlock - 1) / kBlock) * d.B * d.H);
    cfg.bh_group = d.B * d.H;
    return cfg;
  }
  const PathBwdShape shape = path_bwd_shape(d, dt, dev);
  cfg.warps = shape.warps, cfg.stages = shape.stages, cfg.smem = shape.smem;
  cfg.split_grads = f32 || env_switch_or("STATEBENCH_PATH_GRAD_SPLIT", false);
  for (int warps : {4, 2, 1})
    if (path_own_smem_bytes(d.Dh, f32, warps) <= dev.max_smem) {
      cfg.own_warps = warps, cfg.own_smem = path_own_smem_bytes(d.Dh, f32, warps);
      break;
    }
  if (!cfg.own_smem)
    fail("attention backward: the own-block kernel needs {} bytes of shared memory, the device allows {}",
         path_own_smem_bytes(d.Dh, f32, 1), dev.max_smem);
  const int64_t Bq = 16 * cfg.warps, nqb = shape.nqb, persistent = shape.persistent;
  const int64_t nb = (d.T + kBlock - 1) / kBlock, nbmax = nb - 1;
  const ScPlan plan = superchunk_plan_for(d, path_inter_wgmma(d, dt, cfg.warps), nqb, persistent);
  cfg.sc = plan.sc, cfg.nsc = plan.nsc, cfg.inter = plan.inter, cfg.xs_rows = plan.xs_rows;
  // One launch per group of bh_group heads: the grid (and the scratch) serve one group.
  cfg.bh_group = path_bwd_group(d, nb, nqb, cfg.nsc, cfg.xs_rows, persistent);
  cfg.grid = static_cast<int>(std::min(nqb * cfg.bh_group, persistent));
  if (cfg.inter) {
    const PathStatesShape st = path_states_shape(d.Dh);
    cfg.states_stages = st.stages, cfg.states_smem = st.smem;
    cfg.states_grid = std::min<int64_t>(nqb * cfg.bh_group, static_cast<int64_t>(st.occupancy) * dev.sms);
    cfg.inter_qchunk = inter_qchunk(static_cast<int>(nb), cfg.sc, cfg.nsc, cfg.bh_group, dev.sms);
  }
  if (nbmax == 0) return cfg;
  const int64_t state = Bq * d.Dh / (f32 ? 1 : 2);  // floats of one query state (bf16 in bf16 mode)
  if (cfg.sc > 0) {
    // States: the own superchunk's blocks (slots 1 .. sc-1) and one per earlier superchunk (not
    // with the wgmma pass: those states are in xs).
    cfg.seg = cfg.sc, cfg.ck_slots = 1;
    cfg.slot_floats = (1 + cfg.sc + (cfg.inter ? 0 : cfg.nsc)) * state;
    cfg.sc_parts = sc_bwd_parts(d.Dh, cfg.split_grads);
    const int64_t sc_items = cfg.bh_group * (cfg.nsc - 1) * cfg.sc_parts;
    cfg.sc_grid = static_cast<int>(std::min<int64_t>(sc_items, static_cast<int64_t>(dev.sms) * 2));
    return cfg;
  }
  // Query-state checkpoints: one segment (every state stored, one transport per block) when the
  // scratch fits the budget, else segments of ~sqrt(n) blocks (two transports per block).
  const int64_t budget = g_checkpoint_budget > 0
                             ? g_checkpoint_budget
                             : std::max<int64_t>(int64_t{64} << 20, d.B * d.H * nb * kBlock * d.Dh * 4);
  int64_t seg = nbmax, ck = 1;
  if (cfg.grid * (ck + seg) * state * 4 > budget) {
    seg = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(nbmax))));
    ck = (nbmax + seg - 1) / seg;
  }
  cfg.seg = static_cast<int>(seg);
  cfg.ck_slots = static_cast<int>(ck);
  cfg.slot_floats = (ck + seg) * state;
  return cfg;
}

FwdInterPlan path_fwd_inter_plan_for(const AttnDims& d, const ScPlan& plan) {
  FwdInterPlan f;
  if (!env_switch_or("STATEBENCH_PATH_FWD_INTER", true)) return f;
  const int64_t forced = env_count_or("STATEBENCH_PATH_FWD_GROUP", 0,
                                      "a number of heads per forward group (0 = automatic, or 1 and more)");
  if (!plan.inter) return f;
  const int64_t BH = d.B * d.H, nb = (d.T + kBlock - 1) / kBlock;
  f.xs_rows = plan.xs_rows;
  if (forced > 0) {
    f.group = std::min(forced, BH);
    return f;
  }
  const int64_t a = plan.xs_rows * d.Dh * 2;  // one head's states
  const int64_t g = std::clamp<int64_t>(acc_budget(path_acc_row_bytes(d, nb, plan.nsc, plan.xs_rows)) / a, 1, BH);
  const int64_t launches = (BH + g - 1) / g;
  f.group = (BH + launches - 1) / launches;  // evened out (as path_bwd_group)
  return f;
}

FwdInterPlan path_fwd_inter_plan(const AttnDims& d, DType dt) {
  return dt == DType::BF16 ? path_fwd_inter_plan_for(d, superchunk_plan(d, dt)) : FwdInterPlan{};
}

namespace {
// path_states_kept for a plan already at hand.
bool states_kept(const AttnDims& d, DType dt, const ScPlan& plan) {
  if (dt != DType::BF16) return false;
  const FwdInterPlan f = path_fwd_inter_plan_for(d, plan);
  return f.group > 0 && f.group == d.B * d.H;
}
}  // namespace

bool path_states_kept(const AttnDims& d, DType dt) { return states_kept(d, dt, superchunk_plan(d, dt)); }

FactorLayout factor_layout(const AttnDims& d, DType dt, bool with_minv, bool with_states) {
  const int64_t BH = d.B * d.H, nb = (d.T + kBlock - 1) / kBlock, Tp = nb * kBlock;
  const size_t plane = static_cast<size_t>(BH * Tp * d.Dh) * 2;  // bf16 [BH, Tp, Dh]
  const size_t blk = static_cast<size_t>(BH * nb * kTriFloats) * 4;  // packed strictly lower 64 x 64
  const size_t cplane = path_dense(d.Dh) ? static_cast<size_t>(BH * nb * d.Dh * d.Dh) * 2 : 0;
  FactorLayout f;
  Offsets o;
  f.kt = o.take(plane);
  f.kt_lo = o.take(dt == DType::F32 ? plane : 0);
  f.y = o.take(plane);
  f.y_lo = o.take(plane);
  f.z = o.take(blk);
  f.minv = o.take(with_minv ? blk : 0);
  f.c = o.take(cplane);
  f.c_lo = o.take(cplane);
  const ScPlan plan = superchunk_plan(d, dt);
  f.sc = plan.sc;
  if (f.sc > 0) {
    f.nsc = plan.nsc;
    const size_t scm = static_cast<size_t>(BH * f.nsc * d.Dh * d.Dh) * 2;
    f.ke = o.take(plane);
    f.ke_lo = o.take(dt == DType::F32 ? plane : 0);
    f.cs = o.take(scm);
    f.cs_lo = o.take(scm);
    if (with_states && states_kept(d, dt, plan)) {
      f.xs_rows = plan.xs_rows;
      f.xs = o.take(static_cast<size_t>(BH * f.xs_rows * d.Dh) * 2);
    }
  }
  f.total = o.end;
  return f;
}

Workspace workspace_layout(const AttnDims& d, DType dt, bool path, bool backward, bool external_factors) {
  const int64_t BH = d.B * d.H, nb = (d.T + kBlock - 1) / kBlock, Tp = nb * kBlock;
  const size_t rows = static_cast<size_t>(BH * Tp * d.Dh) * 4;
  Workspace w;
  Offsets o;
  w.gcum = o.take(static_cast<size_t>(BH * d.T) * 8);
  if (backward) w.delta = o.take(static_cast<size_t>(BH * d.T) * 4);
  if (path && !external_factors) w.factors = o.take(factor_layout(d, dt, backward).total);
  if (backward) {
    const BwdConfig cfg = bwd_config(d, dt, path);
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
    const bool kept = path && external_factors && path_states_kept(d, dt);
    w.xs = o.take(kept ? 0 : static_cast<size_t>(cfg.bh_group * cfg.xs_rows * d.Dh) * 2);
    if (path) w.dqt = o.take(static_cast<size_t>(cfg.bh_group * Tp * d.Dh) * 4);
    if (path && cfg.inter) w.item_order = o.take(static_cast<size_t>(nb) * 4);
  } else if (path && !(external_factors && path_states_kept(d, dt))) {  // else in the caller's factors
    const FwdInterPlan f = path_fwd_inter_plan(d, dt);
    w.xs = o.take(static_cast<size_t>(f.group * f.xs_rows * d.Dh) * 2);
  }
  w.total = o.end;
  return w;
}

}  // namespace detail

void set_path_checkpoint_budget(int64_t bytes) { detail::g_checkpoint_budget = bytes > 0 ? bytes : 0; }

}  // namespace sb::cuda
