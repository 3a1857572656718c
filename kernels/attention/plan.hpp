// plan.hpp: how a CUDA attention call runs, as pure functions of the shapes, the dtype, the device's
// limits and the caller's AttentionOptions (internal): superchunks, head groups, the backward's
// launch configuration (query block, persistent grid, checkpoints), the forward's inter-superchunk
// groups, and the byte layouts of the PaTH factors and the workspace. device_limits() reads the
// current device once per (device, Dh, dtype); tests build DeviceLimits by hand (no GPU needed).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/attention/attention.hpp"

namespace sb::cuda::detail {

constexpr int64_t kBlock = 64;  // rows of a PaTH block (factors, superchunks)

// Dense block transports (X - X C, C = W^T Y, Dh x Dh per block) for Dh <= 64; factored
// (X - (X W^T) Y) above, where the dense product would cost more memory than it saves.
constexpr bool path_dense(int64_t Dh) { return Dh <= 64; }

// The states launch of the PaTH backward's wgmma pass: pipeline stages, shared memory, resident CTAs.
struct PathStatesShape {
  int stages = 2, smem = 0, occupancy = 1;
};

// What a plan needs to know about the device.
struct DeviceLimits {
  int sms = 1;
  int max_smem = 48 * 1024;  // opt-in dynamic shared memory per block
  bool sm90 = false;         // an sm_90 device and a build with sm_90a code: the wgmma kernels exist
  // Resident CTAs per SM of the PaTH pairs kernel for query blocks of {4, 2, 1} warps and {2, 1}
  // pipeline stages ([warps][stages] in that order), 0 where its shared memory does not fit.
  int path_bwd_occupancy[3][2] = {};
  PathStatesShape path_states;  // with sm90, bf16 and Dh 64 / 128
};
// The current device's limits for head dim Dh and dtype dt (queried once, then cached).
DeviceLimits device_limits(int64_t Dh, DType dt);

// Short sequences (kernels/attention/path/path_short_sm80.cu): one CTA per (b, h) holds the whole
// sequence in shared memory as one UT block (the pipeline's block of kBlock rows, so the same
// conditioning), in fp32. Layout in floats: per-position vectors, the T x Dh operands (row stride
// Dh + 1) and the T x T matrices (row stride Tp + 1, Tp = T rounded up to 4); the forward uses the
// part before dout, the backward all of it. Zero-filled at the start (padding rows read as 0).
struct PathShortLayout {
  int64_t Tp = 0, ldx = 0, ldt = 0;
  int64_t g = 0, beta = 0, lse = 0, delta = 0, dg = 0;  // g: gate prefix sums, double [Tp]
  int64_t qs = 0, k = 0, w = 0, v = 0;                  // [Tp, ldx]: scaled queries, keys, w, values
  int64_t m1 = 0, m2 = 0, m3 = 0, m4 = 0;               // [Tp, ldt] each (the kernel says what they hold)
  int64_t fwd_floats = 0;
  int64_t dout = 0, m5 = 0, dk = 0, dw = 0;             // backward: dout, one more T x T, dk and dw sums
  int64_t bwd_floats = 0;
};
constexpr PathShortLayout path_short_layout(int64_t T, int64_t Dh) {
  PathShortLayout L;
  L.Tp = (T + 3) / 4 * 4, L.ldx = Dh + 1, L.ldt = L.Tp + 1;
  const int64_t x = L.Tp * L.ldx, t = L.Tp * L.ldt;
  L.g = 0, L.beta = 2 * L.Tp, L.lse = 3 * L.Tp, L.delta = 4 * L.Tp, L.dg = 5 * L.Tp;
  L.qs = 6 * L.Tp, L.k = L.qs + x, L.w = L.k + x, L.v = L.w + x;
  L.m1 = L.v + x, L.m2 = L.m1 + t, L.m3 = L.m2 + t, L.m4 = L.m3 + t;
  L.fwd_floats = L.m4 + t;
  L.dout = L.fwd_floats, L.m5 = L.dout + x, L.dk = L.m5 + t, L.dw = L.dk + x;
  L.bwd_floats = L.dw + x;
  return L;
}
// Short sequences, two warps per head (kernels/attention/path/path_short_warp_sm80.cu): T <= 32 and
// Dh 16, 32 or 64, a CTA per (b, h), each warp a 16-row half of every result. A head's region in floats:
// the gate's prefix sums (double [32]), beta [32], the operands q, k, w as [32, Dh + 4] and three
// 32 x 32 slots s1..s3 (row stride 36; both strides are an odd number of float4s, so a lane's
// own-row float4 reads are free of bank conflicts); the forward loads v over s1..s2 once they are
// dead. The backward appends a region that holds v (from its start) and dout (from `dout`) first,
// then the slots s4 (at its start) and s5 (one slot further). Zero-filled at the start (rows past T
// read as 0).
constexpr int64_t kShortWarpT = 32;
struct PathShortWarpLayout {
  int64_t ldx = 0, ldt = 0;  // row strides of the operands and of the slots
  int64_t g = 0, beta = 0, qs = 0, k = 0, w = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t fwd_v = 0, fwd_floats = 0;
  int64_t v = 0, dout = 0, s4 = 0, s5 = 0, bwd_floats = 0;
};
constexpr PathShortWarpLayout path_short_warp_layout(int64_t Dh) {
  PathShortWarpLayout L;
  L.ldx = Dh + 4, L.ldt = kShortWarpT + 4;
  const int64_t x = kShortWarpT * L.ldx, t = kShortWarpT * L.ldt;
  L.g = 0, L.beta = 2 * kShortWarpT, L.qs = 3 * kShortWarpT, L.k = L.qs + x, L.w = L.k + x;
  L.s1 = L.w + x, L.s2 = L.s1 + t, L.s3 = L.s2 + t;
  L.fwd_v = L.s1, L.fwd_floats = L.s3 + t;
  L.v = L.fwd_floats, L.s4 = L.v, L.s5 = L.s4 + t;
  L.dout = L.v + (x > t ? x : t);  // after v and after s4 (dout is read while s4 holds P^T)
  L.bwd_floats = L.dout + x > L.s5 + t ? L.dout + x : L.s5 + t;
  return L;
}

// Whether a PaTH call runs the short kernels (forward and backward together, so the plan keys on
// the backward's shared memory): opt.path_short, T <= kBlock, and that memory within the device's
// for the CTA kernels or for one head of the warp kernels (path_short_warp).
bool path_short(const AttnDims& d, const DeviceLimits& dev, const AttentionOptions& opt);
// Whether the short path runs the warp kernels: opt.path_short and opt.path_short_warp, T <= 32,
// Dh 16, 32 or 64, and one head's backward region within the device's shared memory.
bool path_short_warp(const AttnDims& d, const DeviceLimits& dev, const AttentionOptions& opt);
// Whether softmax attention runs the short kernels (fp32: two warps a head,
// softmax/softmax_short_warp_sm80.cu, at most 39 KiB a head; bf16: a warp a head,
// softmax_short_bf16_sm80.cu, at most 72 KiB a CTA of four): opt.softmax_short, T <= 32 and Dh 16,
// 32 or 64.
bool softmax_short_warp(const AttnDims& d, const AttentionOptions& opt);

// Throws sb::Error naming the first option out of range.
void check_options(const AttentionOptions& opt);

// Whether the Hopper wgmma kernels run at (Dh, dt): bf16, Dh 64 or 128, on sm_90 with opt.sm90.
bool uses_wgmma(int64_t Dh, DType dt, const DeviceLimits& dev, const AttentionOptions& opt);

// The superchunks of a PaTH call (forward and backward agree: the factors are kept between them):
// sc blocks each (0: none, when nb <= sc), nsc of them, and whether the backward runs the pairs
// between superchunks on wgmma (inter, with xs_rows states per head). Where the wgmma pass can run
// (`wgmma`), sc = 6 from 24 blocks on, max(3, round(sqrt(nb))) from 9 to 23, if its states and
// gradients fit the backward's accumulator budget at the head group path_bwd_group picks (memory
// first); otherwise max(8, ceil(sqrt(nb))), with the pass wherever it fits (at (2,8192,16,128): 12
// blocks, 2 heads per group). opt.path_superchunk sets sc (0 turns superchunks off; tests use small
// values). superchunk_plan_for: for a persistent grid of `persistent` CTAs over nqb query blocks.
struct ScPlan {
  int sc = 0, nsc = 0;
  bool inter = false;
  int64_t xs_rows = 0;
};
ScPlan superchunk_plan_for(const AttnDims& d, bool wgmma, int64_t nqb, int64_t persistent,
                           const AttentionOptions& opt);
ScPlan superchunk_plan(const AttnDims& d, DType dt, const DeviceLimits& dev, const AttentionOptions& opt);

// Bytes of the PaTH backward's accumulators for one head (xs_rows: the wgmma pass's states per head,
// 0 without it; they count as accumulators, their gradients are zeroed with them), and the heads
// per backward group for a persistent grid of `persistent` CTAs over nqb query blocks per head: all
// B H when their accumulators fit the budget (512 MiB, 128 MiB where one head takes more than
// 24 MiB), else as many as fit but at least 3 waves of the grid (1.5 with the pass), evened out
// over the launches. opt.path_bwd_group sets it.
int64_t path_acc_row_bytes(const AttnDims& d, int64_t nb, int64_t nsc, int64_t xs_rows);
int64_t path_bwd_group(const AttnDims& d, int64_t nb, int64_t nqb, int64_t nsc, int64_t xs_rows, int64_t persistent,
                       const AttentionOptions& opt);

// The qchunk of the wgmma inter pass over `heads` heads on `sms` SMs: 0 (whole ranges) unless
// superchunk 0's range (nb - sc blocks) is more than 1.5 times one SM's share of the launch's
// query-block visits, else about half that share (at least 4, at most nb).
int inter_qchunk(int nb, int sc, int nsc, int64_t heads, int sms);

// sc_bwd's CTAs per (head, superchunk), each taking Dh / parts rows of the chains: 4 at Dh 128 with
// one-plane products (bf16), 2 at Dh >= 64, 1 below.
int sc_bwd_parts(int64_t Dh, bool split);

// The order in which the states and pairs launches take their query blocks when the wgmma pass runs:
// heaviest first by the cost wj j + wa a of block a sc + j (a its superchunk, j its position there),
// ties by larger j. For a launch of `items` (query block, head) items on `grid` persistent CTAs: the
// cost 2 j + a where a CTA gets fewer than kCostOrderItemsPerCta items (their balance sets the
// launch's length), else by block from the last (wj 1, wa sc), which measured faster there.
struct ItemWeights {
  int wj = 1, wa = 1;
};
constexpr int64_t kCostOrderItemsPerCta = 4;
ItemWeights path_item_weights(int sc, int nsc, int64_t items, int64_t grid);

// Heads per chunk of the CTA order (head_order) of the wgmma softmax backward: 16 was best or within
// 1% of best at the benchmark shapes (chunks of 4 cut its DRAM throughput from 59% to 11% of peak
// at (8,2048,16,64)); the forwards and PaTH's inter pass take one chunk (0).
constexpr int64_t kWgBwdHeadChunk = 16;

// Launch shape of the backward main kernel (softmax: one CTA per key block and head, `grid` of
// them; PaTH: persistent CTAs over query blocks, one launch per group of bh_group rows, `grid` and
// `sc_grid` sized for one group).
struct BwdConfig {
  int warps = 4, stages = 2, smem = 0, grid = 1, seg = 1, ck_slots = 1;
  int64_t slot_floats = 0;
  bool wgmma = false;                // softmax: the wgmma kernel
  int sc = 0, nsc = 0, sc_grid = 0;  // superchunks (PaTH, 0 = none) and the sc_bwd kernel's grid
  int sc_parts = 1;                  // sc_bwd's CTAs per (head, superchunk)
  // PaTH: the gradient chains (sc_bwd, G's block transports) split their operands into hi + lo
  // planes with fp32 inputs; with bf16 they take one plane per operand, as every bf16 backward.
  bool split_grads = false;
  int64_t bh_group = 1;              // rows (b, h) per backward group (softmax: B H, one group)
  bool inter = false;                // PaTH: inter-superchunk pairs on wgmma (BwdParams::inter)
  int64_t xs_rows = 0;               // their query states per head (sc_state_row)
  int inter_qchunk = 0;              // that pass's query ranges (BwdParams::qchunk)
  // The states launch before that pass (launch_path_states): pipeline stages, shared memory, and
  // its grid for one group (persistent: occupancy x SMs, at most the group's query blocks).
  int states_stages = 0, states_smem = 0;
  int64_t states_grid = 0;
  int own_warps = 4, own_smem = 0;  // PaTH's own-block kernel (launch_path_own_bwd)
};
BwdConfig bwd_config(const AttnDims& d, DType dt, bool path, const DeviceLimits& dev, const AttentionOptions& opt);

// The PaTH forward's pairs between superchunks on wgmma, where the backward's pass runs
// (ScPlan::inter, bf16): heads per launch group (0: off), so that the group's states (xs_rows per
// head, bf16) stay within the backward's accumulator budget, evened out over the launches as the
// backward's groups; opt.path_fwd_group sets it.
struct FwdInterPlan {
  int64_t group = 0, xs_rows = 0;
};
FwdInterPlan path_fwd_inter_plan_for(const AttnDims& d, const ScPlan& plan, const AttentionOptions& opt);
FwdInterPlan path_fwd_inter_plan(const AttnDims& d, DType dt, const DeviceLimits& dev, const AttentionOptions& opt);
// Whether a caller's factor buffer keeps the forward's states for the backward: where the forward's
// pass runs in one group of all B H heads (their states fit the budget).
bool path_states_kept(const AttnDims& d, DType dt, const DeviceLimits& dev, const AttentionOptions& opt);

// The PaTH factors of one call (byte offsets from the start of their region, each 256-aligned):
// pushed keys, UT pieces and block transports; minv only where a backward will use them.
// with_states: the forward's query states for the backward's wgmma pass (xs, [BH, xs_rows, Dh]
// bf16), where path_states_kept: a caller's factor buffer (the forward writes them, the backward
// skips its states launch). Where path_short_warp runs: only each head's Tinv^T and Z ([BH, 32, 32]
// floats at offset 0, `total` bytes), which its forward keeps for the backward.
struct FactorLayout {
  size_t kt = 0, kt_lo = 0, y = 0, y_lo = 0, z = 0, minv = 0, c = 0, c_lo = 0;
  size_t ke = 0, ke_lo = 0, cs = 0, cs_lo = 0;  // superchunks (when superchunk_plan gives sc > 0)
  size_t xs = 0;  // kept query states (with_states and path_states_kept; 0 bytes otherwise)
  int64_t xs_rows = 0;
  int sc = 0, nsc = 0;
  size_t total = 0;
};
FactorLayout factor_layout(const AttnDims& d, DType dt, bool with_minv, bool with_states, const DeviceLimits& dev,
                           const AttentionOptions& opt);

// Workspace pieces (byte offsets, each 256-aligned) for one call; `factors` is the factor region
// (PaTH, unless the caller keeps the factors in a buffer of its own). [acc_begin, acc_end) is
// zeroed once per call: dg, then from group_begin the accumulators of one group (PaTH: sized for
// bh_group rows and zeroed again before every later group). sc_scratch and scratch share one
// region (sc_bwd runs after the fused kernel of its group, on the same stream).
struct Workspace {
  size_t gcum = 0, delta = 0, factors = 0;
  size_t acc_begin = 0, dg = 0, group_begin = 0, dq = 0, dv = 0, dkt = 0, dk = 0, dy = 0, dw = 0, dz = 0, dp = 0;
  size_t dke = 0, dws = 0, dxs = 0, tickets = 0, acc_end = 0;
  size_t state_tickets = 0;  // PaTH with the wgmma pass: one states-launch counter per group
  size_t sc_scratch = 0;  // superchunks
  size_t sc_dps = 0;      // factored superchunks: ScArgs::dps, inside the scratch region
  size_t xs = 0;          // the wgmma inter-superchunk pass's query states (one group, bf16)
  size_t dqt = 0;         // PaTH: dL/dQt of one group (fp32; written before it is read, not zeroed)
  size_t item_order = 0;  // PaTH with the wgmma pass: BwdParams::item_order
  size_t scratch = 0, total = 0;
};
Workspace workspace_layout(const AttnDims& d, DType dt, bool path, bool backward, bool external_factors,
                           const DeviceLimits& dev, const AttentionOptions& opt);

}  // namespace sb::cuda::detail
