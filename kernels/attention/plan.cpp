// plan.cpp: the launch plan of a CUDA attention call (plan.hpp): the device's limits, the options'
// checks, superchunks, PaTH head groups, the backward's configuration, the forward's inter-superchunk
// groups. Every choice here was measured on an H100 (kernels/DESIGN.md gives the figures); the byte
// layouts that follow from a plan are layout.cpp's.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.hpp"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {
namespace {

// The PaTH backward's per-group accumulators stay within a budget unless that would leave a launch
// with fewer than kMinWaves waves of the persistent grid: 512 MiB, or 128 MiB where one head's
// accumulators take more than 24 MiB (the long sequences: 58.5 MB per head at (2,8192,16,128), where
// 128 MiB keeps the peak under 2x SDPA's). Fewer, larger groups fill the short launches (sc_bwd,
// factors, states) better: 512 against 256 MiB took 4.76 -> 4.51 ms at (8,2048,16,64), 6.16 -> 5.85
// at (4,4096,16,64) for 130-260 MiB more peak.
constexpr int64_t kAccBudgetMiB = 512, kAccBudgetLongMiB = 128;
constexpr int64_t kLongHeadAccBytes = int64_t{24} << 20;
constexpr int64_t kMinWaves = 3;
// With the wgmma inter-superchunk pass (xs_rows > 0) the floor is 1.5 waves (in half waves): its
// launches keep the GPU busier per head than the per-block kernel (at (2,8192,16,128) two heads per
// group with the pass took 36.8 ms against 40.4 for four without it; one head, under one wave, 55.8).
constexpr int64_t kMinHalfWavesInter = 3;
// With the pass, superchunks of 6 blocks from 24 blocks on (6 measured fastest of 2-12 at T = 2048,
// 4096 and 8192 once the pairs between superchunks are cheap).
constexpr int64_t kInterSuperchunk = 6, kInterMinBlocks = 24;
// Below 24 blocks, with the pass, superchunks of round(sqrt(nb)) (at least 3) blocks from 9 blocks
// on: at (64,768,2,128), 12 blocks, 3 took 4.20 ms against 4.64 for 8 (4: 4.27, 6: 4.31, none:
// 4.71); at 8 blocks none is best (3 and 4: 2.08 against 2.04 ms at (64,512,4,64)).
constexpr int64_t kShortScMinBlocks = 9;
// The inter pass's query ranges: where superchunk 0's range is more than 1.5 times one SM's share of
// the launch's query-block visits, ranges of about half that share, at least 4 blocks (at
// (2,8192,16,128) the range is 2.0 shares and the split saved a third of the pass; at
// (4,4096,16,64), 1.02 shares, splitting cost 2.5% of the f+b).
constexpr int64_t kInterMinQChunk = 4;

int64_t acc_budget(int64_t head_bytes) {
  return (head_bytes > kLongHeadAccBytes ? kAccBudgetLongMiB : kAccBudgetMiB) << 20;
}

DeviceLimits query_device_limits(int64_t Dh, DType dt) {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  DeviceLimits L;
  CUDA_CHECK(cudaDeviceGetAttribute(&L.sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&L.max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
#if defined(STATEBENCH_SM90A)
  L.sm90 = major == 9 && minor == 0;
#endif
  const bool f32 = dt == DType::F32;
  const int warps[3] = {4, 2, 1}, stages[2] = {2, 1};
  for (int w = 0; w < 3; ++w)
    for (int s = 0; s < 2; ++s) {
      const int smem = path_bwd_smem_bytes(Dh, f32, path_dense(Dh), warps[w], stages[s]);
      if (smem <= L.max_smem) L.path_bwd_occupancy[w][s] = std::max(1, path_bwd_occupancy(Dh, f32, warps[w], smem));
    }
  if (L.sm90 && dt == DType::BF16 && (Dh == 64 || Dh == 128)) L.path_states = path_states_shape(Dh);
  return L;
}

// The PaTH pairs kernel's query block (warps), pipeline depth and shared memory: the largest query
// block that fits, double-buffered unless one stage lets more CTAs share an SM; its persistent grid.
struct PathBwdShape {
  int warps = 4, stages = 2, smem = 0;
  int64_t nqb = 0, persistent = 0;
};
PathBwdShape path_bwd_shape(const AttnDims& d, DType dt, const DeviceLimits& dev) {
  const bool f32 = dt == DType::F32, dense = path_dense(d.Dh);
  const int warps[3] = {4, 2, 1};
  int w = 0;
  while (w < 3 && dev.path_bwd_occupancy[w][0] == 0 && dev.path_bwd_occupancy[w][1] == 0) ++w;
  if (w == 3)
    fail("attention backward: needs {} bytes of shared memory, the device allows {}",
         path_bwd_smem_bytes(d.Dh, f32, dense, 1, 1), dev.max_smem);
  PathBwdShape s;
  s.warps = warps[w];
  const int occ2 = dev.path_bwd_occupancy[w][0], occ1 = dev.path_bwd_occupancy[w][1];
  s.stages = occ2 > 0 && occ2 >= occ1 ? 2 : 1;
  s.smem = path_bwd_smem_bytes(d.Dh, f32, dense, s.warps, s.stages);
  s.nqb = (d.T + 16 * s.warps - 1) / (16 * s.warps);
  s.persistent = static_cast<int64_t>(dev.sms) * (s.stages == 2 ? occ2 : occ1);
  return s;
}

bool path_inter_wgmma(const AttnDims& d, DType dt, int warps, const DeviceLimits& dev, const AttentionOptions& opt) {
  return warps == 4 && uses_wgmma(d.Dh, dt, dev, opt);
}

}  // namespace

DeviceLimits device_limits(int64_t Dh, DType dt) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int64_t, DType>, DeviceLimits> cache;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(dev, Dh, dt);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, query_device_limits(Dh, dt)).first;
  return it->second;
}

void check_options(const AttentionOptions& opt) {
  if (opt.path_superchunk < -1 || opt.path_superchunk == 1)
    fail("attention options: path_superchunk = {} is not a superchunk size (-1 = automatic, 0 = none, 2 or more blocks)",
         opt.path_superchunk);
  if (opt.path_bwd_group < 0) fail("attention options: path_bwd_group = {} must be >= 0", opt.path_bwd_group);
  if (opt.path_fwd_group < 0) fail("attention options: path_fwd_group = {} must be >= 0", opt.path_fwd_group);
  if (opt.path_checkpoint_budget < 0)
    fail("attention options: path_checkpoint_budget = {} must be >= 0", opt.path_checkpoint_budget);
}

bool path_short(const AttnDims& d, const DeviceLimits& dev, const AttentionOptions& opt) {
  return opt.path_short && d.T <= kBlock &&
         (path_short_layout(d.T, d.Dh).bwd_floats * 4 <= dev.max_smem || path_short_warp(d, dev, opt));
}

bool softmax_short_warp(const AttnDims& d, const AttentionOptions& opt) {
  return opt.softmax_short && d.T <= kShortWarpT && (d.Dh == 16 || d.Dh == 32 || d.Dh == 64);
}

bool path_short_warp(const AttnDims& d, const DeviceLimits& dev, const AttentionOptions& opt) {
  return opt.path_short && opt.path_short_warp && d.T <= kShortWarpT && d.Dh <= 64 &&
         path_short_warp_layout(d.Dh).bwd_floats * 4 <= dev.max_smem;
}

bool uses_wgmma(int64_t Dh, DType dt, const DeviceLimits& dev, const AttentionOptions& opt) {
  return opt.sm90 && dev.sm90 && dt == DType::BF16 && (Dh == 64 || Dh == 128);
}

int inter_qchunk(int nb, int sc, int nsc, int64_t heads, int sms) {
  if (sc < 1 || nsc < 2) return 0;
  int64_t visits = 0;  // (range, key-block pair, head) query-block visits of one launch
  for (int b = 0; b + 1 < nsc; ++b) visits += nb - (b + 1) * sc;
  visits *= static_cast<int64_t>((sc + 1) / 2) * heads;
  const int64_t per_sm = (visits + sms - 1) / std::max(sms, 1);
  if (2 * (nb - sc) <= 3 * per_sm) return 0;  // superchunk 0's range does not set the launch's length
  return static_cast<int>(std::clamp<int64_t>((per_sm + 1) / 2, kInterMinQChunk, nb));
}

int64_t path_bwd_group(const AttnDims& d, int64_t nb, int64_t nqb, int64_t nsc, int64_t xs_rows, int64_t persistent,
                       const AttentionOptions& opt) {
  const int64_t BH = d.B * d.H;
  if (opt.path_bwd_group > 0) return std::min(opt.path_bwd_group, BH);
  const int64_t a = path_acc_row_bytes(d, nb, nsc, xs_rows);
  const int64_t budget = acc_budget(a);
  if (a * BH <= budget) return BH;
  const int64_t half_waves = xs_rows > 0 ? kMinHalfWavesInter : 2 * kMinWaves;
  const int64_t g_min = (half_waves * persistent + 2 * nqb - 1) / (2 * nqb);
  const int64_t g = std::max<int64_t>(1, std::min(BH, std::max(g_min, budget / a)));
  const int64_t launches = (BH + g - 1) / g;
  return (BH + launches - 1) / launches;
}

ItemWeights path_item_weights(int sc, int nsc, int64_t items, int64_t grid) {
  if (items < kCostOrderItemsPerCta * grid) return {2, 1};
  return {1, std::max(sc, 1)};
}

int sc_bwd_parts(int64_t Dh, bool split) { return Dh >= 128 && !split ? 4 : (Dh >= 64 ? 2 : 1); }

ScPlan superchunk_plan_for(const AttnDims& d, bool wgmma, int64_t nqb, int64_t persistent,
                           const AttentionOptions& opt) {
  const int64_t nb = (d.T + kBlock - 1) / kBlock;
  auto make = [&](int64_t sc, bool inter) {
    ScPlan s;
    if (sc <= 0 || nb <= sc) return s;
    s.sc = static_cast<int>(sc);
    s.nsc = static_cast<int>((nb + sc - 1) / sc);
    if (inter) {  // memory first: only where its states fit the accumulator budget
      const int64_t rows = sc_state_row(s.nsc - 1, nb * kBlock, sc * kBlock);
      const int64_t g = path_bwd_group(d, nb, nqb, s.nsc, rows, persistent, opt);
      const int64_t a = path_acc_row_bytes(d, nb, s.nsc, rows);
      if (g * a <= acc_budget(a)) s.inter = true, s.xs_rows = rows;
    }
    return s;
  };
  if (opt.path_superchunk >= 0) return make(opt.path_superchunk, wgmma);
  if (wgmma && nb >= kShortScMinBlocks) {  // with the pass where it fits
    const int64_t sc = nb >= kInterMinBlocks ? kInterSuperchunk
                                             : std::max<int64_t>(3, std::llround(std::sqrt(static_cast<double>(nb))));
    const ScPlan s = make(sc, true);
    if (s.inter) return s;
  }
  return make(std::max<int64_t>(8, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(nb))))), wgmma);
}

ScPlan superchunk_plan(const AttnDims& d, DType dt, const DeviceLimits& dev, const AttentionOptions& opt) {
  if (d.T <= 2 * kBlock) return {};  // nb <= 2: no superchunks
  const PathBwdShape shape = path_bwd_shape(d, dt, dev);
  return superchunk_plan_for(d, path_inter_wgmma(d, dt, shape.warps, dev, opt), shape.nqb, shape.persistent, opt);
}

BwdConfig bwd_config(const AttnDims& d, DType dt, bool path, const DeviceLimits& dev, const AttentionOptions& opt) {
  const bool f32 = dt == DType::F32;
  BwdConfig cfg;
  if (!path) {  // key-centric: one CTA of 4 warps per (64-key block, head)
    cfg.wgmma = uses_wgmma(d.Dh, dt, dev, opt);
    cfg.stages = softmax_bwd_smem_bytes(d.Dh, f32, 2) <= dev.max_smem ? 2 : 1;
    cfg.smem = softmax_bwd_smem_bytes(d.Dh, f32, cfg.stages);
    if (cfg.smem > dev.max_smem)
      fail("attention backward: needs {} bytes of shared memory, the device allows {}", cfg.smem, dev.max_smem);
    cfg.grid = static_cast<int>(((d.T + kBlock - 1) / kBlock) * d.B * d.H);
    cfg.bh_group = d.B * d.H;
    return cfg;
  }
  const PathBwdShape shape = path_bwd_shape(d, dt, dev);
  cfg.warps = shape.warps, cfg.stages = shape.stages, cfg.smem = shape.smem;
  cfg.split_grads = f32;
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
  const ScPlan plan = superchunk_plan(d, dt, dev, opt);
  cfg.sc = plan.sc, cfg.nsc = plan.nsc, cfg.inter = plan.inter, cfg.xs_rows = plan.xs_rows;
  // One launch per group of bh_group heads: the grid (and the scratch) serve one group.
  cfg.bh_group = path_bwd_group(d, nb, nqb, cfg.nsc, cfg.xs_rows, persistent, opt);
  cfg.grid = static_cast<int>(std::min(nqb * cfg.bh_group, persistent));
  if (cfg.inter) {
    const PathStatesShape& st = dev.path_states;
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
  const int64_t budget = opt.path_checkpoint_budget > 0
                             ? opt.path_checkpoint_budget
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

FwdInterPlan path_fwd_inter_plan_for(const AttnDims& d, const ScPlan& plan, const AttentionOptions& opt) {
  FwdInterPlan f;
  if (!plan.inter) return f;
  const int64_t BH = d.B * d.H, nb = (d.T + kBlock - 1) / kBlock;
  f.xs_rows = plan.xs_rows;
  if (opt.path_fwd_group > 0) {
    f.group = std::min(opt.path_fwd_group, BH);
    return f;
  }
  const int64_t a = plan.xs_rows * d.Dh * 2;  // one head's states
  const int64_t g = std::clamp<int64_t>(acc_budget(path_acc_row_bytes(d, nb, plan.nsc, plan.xs_rows)) / a, 1, BH);
  const int64_t launches = (BH + g - 1) / g;
  f.group = (BH + launches - 1) / launches;  // evened out (as path_bwd_group)
  return f;
}

FwdInterPlan path_fwd_inter_plan(const AttnDims& d, DType dt, const DeviceLimits& dev, const AttentionOptions& opt) {
  return dt == DType::BF16 ? path_fwd_inter_plan_for(d, superchunk_plan(d, dt, dev, opt), opt) : FwdInterPlan{};
}

bool path_states_kept(const AttnDims& d, DType dt, const DeviceLimits& dev, const AttentionOptions& opt) {
  const FwdInterPlan f = path_fwd_inter_plan(d, dt, dev, opt);
  return f.group > 0 && f.group == d.B * d.H;
}

}  // namespace sb::cuda::detail
