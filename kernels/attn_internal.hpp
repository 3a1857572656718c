// attn_internal.hpp: what the attention .cu files share (internal, not a public interface): kernel
// parameter structs, the workspace layout, the backward launch configuration and the launchers
// each .cu file defines. Factor layouts (per head bh, block m of 64 rows, Tp = 64 nb):
//   kt, y, dv/dkt/dk/dy/dw accumulators: [BH, Tp, Dh] fp32    dz: [BH, nb, 64, 64] fp32
//   z, minv (strictly lower parts): [BH, nb, kTriFloats] fp32, packed (attn_common.cuh tri_row)
//   c, dp: [BH, nb, Dh, Dh] fp32 (dense transport, Dh <= 64)    gcum: [BH, T] double, dg: [BH, Tp]
// The PaTH backward runs in groups of nbh rows bh = bh0 .. bh0 + nbh - 1 (BwdConfig::bh_group):
// its accumulators (dv, dkt, dk, dy, dw, dz, dp, dke, dws) hold the group's rows only and are
// indexed by the local row bh - bh0 (their leading dimension is nbh, not BH); inputs, outputs,
// factors, lse, delta, gcum and dg are indexed by the global bh.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_cuda.hpp"
#include "kernels/cuda_check.hpp"

namespace sb::cuda::detail {

// bf16 storage in the structs shared with host code (device code casts to __nv_bfloat16).
using bf16_raw = uint16_t;

// Dense block transports (X - X C, C = W^T Y, Dh x Dh per block) for Dh <= 64; factored
// (X - (X W^T) Y) above, where the dense product would cost more memory than it saves.
constexpr bool path_dense(int64_t Dh) { return Dh <= 64; }
// Floats of one packed strictly lower 64 x 64 matrix (Z; Minv without its unit diagonal): row r
// keeps its first 4 ceil(r / 4) entries, 2112 floats instead of 4096 (attn_common.cuh tri_row).
constexpr int64_t kTriFloats = 2112;
// Inter-superchunk pairs on wgmma (BwdParams::inter): per head, superchunk b's query states
// X_{e_b} (and their gradients) cover the queries after it, rows (b + 1) S .. Tp - 1 (S = 64 sc),
// stored after those of superchunks 0 .. b-1: first row b Tp - S b (b + 1) / 2; the total for
// nsc superchunks is sc_state_row(nsc - 1, ...).
constexpr int64_t sc_state_row(int64_t b, int64_t Tp, int64_t S) { return b * Tp - S * b * (b + 1) / 2; }
// Throws unless heads bh0 .. bh0 + nbh - 1 are a non-empty range of the B H heads (a backward group).
inline void check_head_group(int64_t bh0, int64_t nbh, int64_t BH, const char* what) {
  if (nbh < 1 || bh0 < 0 || bh0 + nbh > BH) throw_error(what);
}

// Calls f(std::integral_constant<int, Dh>) for the supported head dims.
template <class F>
void with_dh(int64_t Dh, F&& f) {
  switch (Dh) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    default: throw_error("attention CUDA: unsupported head dim (supported: 16, 32, 64, 128)");
  }
}

// Largest dynamic shared memory a block may opt into on the current device.
inline int device_max_smem() {
  int dev = 0, v = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return v;
}

struct FwdParams {
  const void* q = nullptr;       // [B, T, H, Dh]
  const void* k = nullptr;       // [B, T, H, Dh]
  const void* v = nullptr;       // [B, T, H, Dh]
  const float* w = nullptr;      // [B, T, H, Dh] (PaTH)
  const double* gcum = nullptr;  // [BH, T] inclusive prefix sums of log_f, or null
  const bf16_raw* kt_hi = nullptr;  // PaTH factors as bf16 planes (layouts above)
  const bf16_raw* kt_lo = nullptr;  // fp32 mode only
  const bf16_raw* y_hi = nullptr;
  const bf16_raw* y_lo = nullptr;
  const bf16_raw* c_hi = nullptr;  // dense transport only
  const bf16_raw* c_lo = nullptr;
  const float* z = nullptr;
  const bf16_raw* ke_hi = nullptr;  // superchunks (sc > 0): keys pushed to their superchunk's end
  const bf16_raw* ke_lo = nullptr;
  const bf16_raw* cs_hi = nullptr;  // [BH, nsc, Dh, Dh] I - W_b
  const bf16_raw* cs_lo = nullptr;
  int sc = 0, nsc = 0;
  // PaTH's pairs between superchunks on wgmma (launch_path_fwd_inter): the fused kernel serves heads
  // bh0 .. bh0 + nbh - 1 (nbh 0: all B H), stops at its query block's superchunk and writes that
  // block's out and lse over the keys from there, and the states X_{e_b} (b < a) to xs ([nbh,
  // xs_rows, Dh], bf16, rows sc_state_row); path_fwd_inter_kernel then adds the earlier superchunks.
  bf16_raw* xs = nullptr;
  int64_t xs_rows = 0, bh0 = 0, nbh = 0;
  bool inter = false;
  void* out = nullptr;  // [B, T, H, Dh]
  float* lse = nullptr;  // [B, H, T]
  int64_t B = 0, T = 0, H = 0;
  int nb = 0;      // number of 64-row blocks
  int stages = 2;  // key-block pipeline depth (1 where shared memory is short)
  int64_t head_chunk = 0;  // wgmma forward: CTA order over heads in chunks (head_order; 0: one chunk)
  float scale = 1.f;
  bool bf16 = false, dense = false;
};

#ifdef __CUDACC__
#define SB_HOST_DEVICE __host__ __device__
#else
#define SB_HOST_DEVICE
#endif

// The wgmma pass over the pairs between superchunks (softmax_bwd_wgmma_kernel<Dh, true>) cuts the
// query blocks after superchunk b (nb - (b + 1) sc of them, b < nsc - 1) into ceil(len / qchunk)
// ranges of nearly equal length (qchunk 0: one range), so that the early superchunks' long ranges
// no longer set the launch's length. inter_ranges: how many ranges there are in all; inter_range:
// range r's superchunk sb and query blocks [q0, q1), superchunk 0's ranges first.
SB_HOST_DEVICE inline int inter_ranges_of(int b, int nb, int sc, int qchunk) {
  const int len = nb - (b + 1) * sc;
  return qchunk > 0 ? (len + qchunk - 1) / qchunk : 1;
}
SB_HOST_DEVICE inline int64_t inter_ranges(int nb, int sc, int nsc, int qchunk) {
  int64_t n = 0;
  for (int b = 0; b + 1 < nsc; ++b) n += inter_ranges_of(b, nb, sc, qchunk);
  return n;
}
SB_HOST_DEVICE inline void inter_range(int64_t r, int nb, int sc, int nsc, int qchunk, int& sb, int& q0, int& q1) {
  sb = 0;
  for (int n = inter_ranges_of(0, nb, sc, qchunk); r >= n && sb + 2 < nsc; n = inter_ranges_of(sb, nb, sc, qchunk))
    r -= n, ++sb;
  const int first = (sb + 1) * sc, len = nb - first, nr = inter_ranges_of(sb, nb, sc, qchunk);
  q0 = first + static_cast<int>(r * len / nr);
  q1 = first + static_cast<int>((r + 1) * len / nr);
}

// The qchunk of a launch of that pass over `heads` heads on `sms` SMs: 0 (whole ranges) unless
// superchunk 0's range (nb - sc blocks) is more than 1.5 times one SM's share of the launch's
// query-block visits, else about half that share (at least 4, at most nb). The developer switch
// STATEBENCH_PATH_INTER_QCHUNK=N sets N (0: whole ranges; not a count: an Error).
int inter_qchunk(int nb, int sc, int nsc, int64_t heads, int sms);

// The work item (CTA index) -> (head bh, job) of a kernel with njobs jobs per head, job 0 the
// heaviest: heads in chunks of `chunk` (0 or more than nheads: one chunk of all heads; the last
// chunk may be smaller), each chunk's items job-major (job 0 of every head of the chunk first). Few
// heads per chunk keep the CTAs in flight on few heads, whose tiles then stay in L2 between them
// (the softmax backward, kWgBwdHeadChunk); one chunk balances the tail best (the forward).
SB_HOST_DEVICE inline void head_order(int64_t item, int64_t nheads, int64_t njobs, int64_t chunk, int64_t& bh,
                                      int64_t& job) {
  if (chunk <= 0 || chunk > nheads) chunk = nheads;
  const int64_t per = chunk * njobs, c = item / per, j = item - c * per;
  const int64_t gc = chunk < nheads - c * chunk ? chunk : nheads - c * chunk;
  job = j / gc;
  bh = c * chunk + (j - job * gc);
}
// Heads per chunk of the wgmma softmax backward (kernels/NOTES.md, version 37: 16 was best or
// within 1% of best at the seven benchmark shapes; with chunks of 4 the kernel's DRAM throughput
// fell from 59% to 11% of peak at (8,2048,16,64)).
constexpr int64_t kWgBwdHeadChunk = 16;
// `fallback` unless the developer switch STATEBENCH_ATTN_HEAD_CHUNK=N sets it (0: one chunk; not a
// non-negative integer: Error, attention_layout.cpp): the forward takes 0, the backward kWgBwdHeadChunk, PaTH's inter pass 0 (chunks of 16 were 0-2%
// slower there: its head group is already small; NOTES version 37).
int64_t head_chunk_or(int64_t fallback);
// An on / off developer switch: `unset` when the variable is not set, else its value, 0 or 1 (anything
// else: Error naming it; attention_layout.cpp).
bool env_switch_or(const char* name, bool unset);

// A TMA tensor map (CUtensorMap: 128 opaque bytes, 128-byte aligned), encoded on the host.
struct alignas(128) TmaMap {
  uint64_t opaque[16] = {};
};

struct BwdParams {
  const void* q = nullptr;     // [B, T, H, Dh]
  const void* k = nullptr;     // [B, T, H, Dh]
  const void* v = nullptr;     // [B, T, H, Dh]
  const void* dout = nullptr;  // [B, T, H, Dh]
  const float* w = nullptr;    // [B, T, H, Dh]
  const float* lse = nullptr;  // [BH, T]
  const float* delta = nullptr;  // [BH, T] dout . out
  const double* gcum = nullptr;  // [BH, T] or null
  const bf16_raw* kt_hi = nullptr;
  const bf16_raw* kt_lo = nullptr;
  const bf16_raw* y_hi = nullptr;
  const bf16_raw* y_lo = nullptr;
  const bf16_raw* c_hi = nullptr;
  const bf16_raw* c_lo = nullptr;
  const float* z = nullptr;
  void* dq = nullptr;      // [B, T, H, Dh] written directly (PaTH)
  void* dk = nullptr;      // [B, T, H, Dh] written directly (softmax: key-centric kernel)
  void* dv = nullptr;
  float* dq_acc = nullptr;  // softmax: dq accumulator [BH, Tp, Dh] (atomics), zeroed before the launch
  float* dv_acc = nullptr;   // PaTH accumulators (atomics), zeroed before the launch: [nbh, Tp, Dh]
  float* dkt_acc = nullptr;  // [nbh, Tp, Dh]
  float* dk_acc = nullptr;   // [nbh, Tp, Dh]
  float* dy_acc = nullptr;   // [nbh, Tp, Dh]
  float* dw_acc = nullptr;   // [nbh, Tp, Dh]
  float* dz_acc = nullptr;   // [nbh, nb, 64, 64]
  float* dp_acc = nullptr;   // [nbh, nb, Dh, Dh] (dense)
  float* dg = nullptr;       // [BH, Tp] gate gradient w.r.t. the prefix sums (null without gate)
  float* dqt = nullptr;      // [nbh, Tp, Dh] dL/dQt (pulled-back queries) from the pairs, rows of blocks n > 0
  float* scratch = nullptr;  // [grid, slot_floats] per-CTA query states (fp32; bf16 pairs in bf16 mode)
  // PaTH: the launch's item counter (zeroed before it runs: the pairs launch's with the group's
  // accumulators, each states launch's once per call, Workspace::state_tickets); the persistent
  // CTAs take (query block, head) items in cost order (path_item).
  unsigned int* tickets = nullptr;
  // With the wgmma pass: the query blocks in the order those launches take them ([nb],
  // launch_path_item_order); null: from the last block.
  const int* item_order = nullptr;
  // PaTH: the group of rows bh0 .. bh0 + nbh - 1 this launch works on; the PaTH accumulators are
  // [nbh, ...] (local row bh - bh0). Softmax ignores them (its dq_acc is [BH, Tp, Dh]).
  int64_t bh0 = 0, nbh = 0;
  // Superchunks (sc > 0): key blocks in earlier superchunks use the keys pushed to their
  // superchunk's end (ke) and queries transported once per superchunk (cs = I - W_b).
  const bf16_raw* ke_hi = nullptr;  // [BH, Tp, Dh]
  const bf16_raw* ke_lo = nullptr;  // fp32 mode only
  const bf16_raw* cs_hi = nullptr;  // [BH, nsc, Dh, Dh]
  const bf16_raw* cs_lo = nullptr;
  float* dke_acc = nullptr;  // [nbh, Tp, Dh] dL/dKe (atomics)
  float* dws_acc = nullptr;  // [nbh, nsc, Dh, Dh] dL/dW_b (atomics)
  int sc = 0, nsc = 0;       // blocks per superchunk (0: none), superchunks
  // Inter-superchunk pairs on wgmma (bf16, sm_90, 4 warps; kernels/NOTES.md "Inter-superchunk
  // pairs on wgmma"). inter = 0: the fused kernel visits every key block. inter = 1
  // (launch_path_states, the kernel's chain-only instantiation): only the query states X_{e_b}
  // (b < a), written to xs. inter = 2: it reads X_{e_b} back from xs (no superchunk transports)
  // and takes dL/dX_{e_b} from dxs instead of visiting the key blocks of earlier superchunks
  // (softmax_bwd_wgmma_kernel<Dh, true> filled dxs, dv_acc and dke_acc from xs in between). xs, dxs: [nbh, xs_rows, Dh] (sc_state_row).
  bf16_raw* xs = nullptr;
  float* dxs = nullptr;  // zeroed with the group's accumulators
  int64_t xs_rows = 0;
  int inter = 0;
  int qchunk = 0;  // the wgmma inter pass's query ranges (inter_range; 0: one per superchunk)
  int64_t B = 0, T = 0, H = 0;
  int nb = 0, warps = 4, nqb = 0;  // query block = 16 * warps rows; nqb query blocks per head
  int stages = 2;                  // key-block pipeline depth
  bool vec4 = true;                // 16-byte (else 8-byte) vector atomics into the accumulators
  // wgmma softmax backward: dQ (dL/dX_{e_b} with kInter) added by TMA reductions through dq_map
  // (with_dq_map), else by atomics.
  bool dq_bulk = true;
  TmaMap dq_map;
  // wgmma softmax backward and PaTH's inter pass: each stage's Q (states), dO, lse and delta loaded by
  // TMA on an mbarrier (with_load_maps) instead of cp.async, whose pending copies every proxy fence of
  // the iteration waited for (kernels/NOTES.md, session 25). STATEBENCH_ATTN_BWD_TMA=0 turns it off.
  bool load_tma = false;
  bool grad_split = false;  // G's block transports in split planes (BwdConfig::split_grads)
  TmaMap q_map, do_map, lse_map, delta_map;
  // wgmma softmax backward at Dh 64: warpgroup 1 computes and adds the previous query block's dQ
  // before its probabilities, warpgroup 0 after them (softmax_bwd_wgmma_kernel; slower, A/B only).
  bool stagger = false;
  int64_t head_chunk = 0;  // wgmma softmax backward and inter pass: CTA order over heads in chunks (head_order; 0: one)
  int seg = 1, ck_slots = 1;       // checkpoint segment length (blocks) and checkpoint slots
  int64_t slot_floats = 0;
  float scale = 1.f;
  bool bf16 = false, dense = false;
};

// Launch shape of the backward main kernel on the current device (softmax: one CTA per key block
// and head, `grid` of them; PaTH: persistent CTAs over query blocks, one launch per group of
// bh_group rows, `grid` and `sc_grid` sized for one group).
struct BwdConfig {
  int warps = 4, stages = 2, smem = 0, grid = 1, seg = 1, ck_slots = 1;
  int64_t slot_floats = 0;
  int sc = 0, nsc = 0, sc_grid = 0;  // superchunks (PaTH, 0 = none) and the sc_bwd kernel's grid
  int sc_parts = 1;                  // sc_bwd's CTAs per (head, superchunk)
  // PaTH: the gradient chains (sc_bwd, G's block transports) split their operands into hi + lo
  // planes: with fp32 inputs, or bf16 under STATEBENCH_PATH_GRAD_SPLIT=1 (BwdParams::grad_split).
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
// The superchunks of a PaTH call (forward and backward agree: the factors are kept between them):
// sc blocks each (0: none, when nb <= sc), nsc of them, and whether the backward runs the pairs
// between superchunks on wgmma (inter, with xs_rows states per head). Where the wgmma pass can run
// (wgmma: path_inter_wgmma), sc = 6 from 24 blocks on, max(3, round(sqrt(nb))) from 9 to 23, if its
// states and gradients fit the backward's accumulator budget at the head group path_bwd_group picks
// (memory first); otherwise max(8, ceil(sqrt(nb))), with the pass wherever it fits (at
// (2,8192,16,128): 12 blocks, 2 heads per group). STATEBENCH_PATH_SUPERCHUNK=N
// sets N (0 turns superchunks off; tests use small N). superchunk_plan_for is the arithmetic for
// a persistent grid of `persistent` CTAs over nqb query blocks per head; superchunk_plan asks this
// device.
struct ScPlan {
  int sc = 0, nsc = 0;
  bool inter = false;
  int64_t xs_rows = 0;
};
ScPlan superchunk_plan_for(const AttnDims& d, bool wgmma, int64_t nqb, int64_t persistent);
ScPlan superchunk_plan(const AttnDims& d, DType dt);
// Bytes of the PaTH backward's accumulators for one head, and the heads per backward group for a
// persistent grid of `persistent` CTAs over nqb query blocks per head (STATEBENCH_PATH_BWD_GROUP
// overrides; kernels/NOTES.md "Backward head groups").
// xs_rows: the states of the wgmma inter-superchunk pass per head (0 without it); they count as
// accumulators (their gradients are zeroed with them).
int64_t path_acc_row_bytes(const AttnDims& d, int64_t nb, int64_t nsc, int64_t xs_rows);
int64_t path_bwd_group(const AttnDims& d, int64_t nb, int64_t nqb, int64_t nsc, int64_t xs_rows, int64_t persistent);
// Whether the PaTH backward runs its inter-superchunk pairs on wgmma (bf16 at Dh 64 / 128 on sm_90
// with 4-warp query blocks; STATEBENCH_PATH_INTER_WGMMA=0 turns it off for A/B timing).
bool path_inter_wgmma(const AttnDims& d, DType dt, int warps);
BwdConfig bwd_config(const AttnDims& d, DType dt, bool path);
// The PaTH forward's pairs between superchunks on wgmma, where the backward's pass runs (ScPlan::inter)
// unless STATEBENCH_PATH_FWD_INTER=0: heads per launch group (0: off), so that the group's states
// (xs_rows per head, bf16) stay within the backward's accumulator budget, evened out over the launches
// as the backward's groups (STATEBENCH_PATH_FWD_GROUP=N sets N heads, for tests; only bf16 runs the pass).
struct FwdInterPlan {
  int64_t group = 0, xs_rows = 0;
};
FwdInterPlan path_fwd_inter_plan_for(const AttnDims& d, const ScPlan& plan);  // the arithmetic (no device)
FwdInterPlan path_fwd_inter_plan(const AttnDims& d, DType dt);
// Whether a caller's factor buffer keeps the forward's states for the backward: where the forward's
// pass runs in one group of all B H heads (their states fit the budget).
bool path_states_kept(const AttnDims& d, DType dt);

// The PaTH factors of one call (byte offsets from the start of their region, each 256-aligned):
// pushed keys, UT pieces and block transports; minv only where a backward will use them.
struct FactorLayout {
  size_t kt = 0, kt_lo = 0, y = 0, y_lo = 0, z = 0, minv = 0, c = 0, c_lo = 0;
  size_t ke = 0, ke_lo = 0, cs = 0, cs_lo = 0;  // superchunks (when superchunk_plan gives sc > 0)
  size_t xs = 0;  // kept query states (with_states and path_states_kept; 0 bytes otherwise)
  int64_t xs_rows = 0;
  int sc = 0, nsc = 0;
  size_t total = 0;
};
// with_states: the forward's query states for the backward's wgmma pass (xs, [BH, xs_rows, Dh] bf16),
// where path_states_kept: a caller's factor buffer (the forward writes them, the backward skips its
// states launch).
FactorLayout factor_layout(const AttnDims& d, DType dt, bool with_minv, bool with_states = false);

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
Workspace workspace_layout(const AttnDims& d, DType dt, bool path, bool backward, bool external_factors);

// Launchers (stream-ordered; check their launches). Defined in the .cu files.
template <bool kPath>
void launch_fwd(const FwdParams& p, int64_t Dh, cudaStream_t stream);
template <bool kPath>
void launch_bwd(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream);
// The forward's pairs between superchunks of one head group on wgmma (path_fwd_inter.cu; bf16, Dh 64
// / 128, after launch_fwd<true> with p.inter set for the same heads): merges into out and lse.
void launch_path_fwd_inter(const FwdParams& p, int64_t Dh, cudaStream_t stream);
int fwd_smem_bytes(int64_t Dh, bool f32, bool path, bool dense, int stages);
int path_bwd_smem_bytes(int64_t Dh, bool f32, bool dense, int warps, int stages);
int softmax_bwd_smem_bytes(int64_t Dh, bool f32, int stages);
// Resident CTAs per multiprocessor of the PaTH backward kernel (after raising its smem limit).
int path_bwd_occupancy(int64_t Dh, bool f32, int warps, int smem);

// Small kernels (path_prep.cu): prefix sums of log_f per head (double); delta = rowsum(dout * out);
// the per-block UT factors; the factors' backward (writes dk, dw, dbeta); accumulator -> output
// conversion; dlog_f from the prefix-sum gradient.
void launch_gate_prefix(double* gcum, const float* log_f, int64_t B, int64_t T, int64_t H, cudaStream_t s);
void launch_delta(float* delta, const void* dout, const void* out, int64_t B, int64_t T, int64_t H, int64_t Dh,
                  bool bf16, cudaStream_t s);
// Outputs of the factor kernel (null pointers are skipped; lo planes hold x - bf16(x)).
struct PrepOut {
  bf16_raw* kt_hi = nullptr;  // [BH, Tp, Dh]
  bf16_raw* kt_lo = nullptr;  // fp32 mode only
  bf16_raw* y_hi = nullptr;   // [BH, Tp, Dh]
  bf16_raw* y_lo = nullptr;
  bf16_raw* c_hi = nullptr;   // [BH, nb, Dh, Dh] (dense)
  bf16_raw* c_lo = nullptr;
  float* z = nullptr;         // [BH, nb, kTriFloats] packed
  float* minv = nullptr;      // [BH, nb, kTriFloats] packed (backward)
  bf16_raw* ke_hi = nullptr;  // superchunks (sc > 0; filled by launch_sc_prep)
  bf16_raw* ke_lo = nullptr;
  bf16_raw* cs_hi = nullptr;
  bf16_raw* cs_lo = nullptr;
  bf16_raw* xs = nullptr;     // kept query states [BH, xs_rows, Dh] (FactorLayout::xs), or null
  int64_t xs_rows = 0;
  int sc = 0, nsc = 0;
};
void launch_path_prep(const PrepOut& o, const void* k, const float* w, const float* beta, int64_t B, int64_t T,
                      int64_t H, int64_t Dh, bool bf16, cudaStream_t s);
struct FactorsBwdArgs {
  void* dk = nullptr;  // outputs [B, T, H, Dh]
  float* dw = nullptr;
  float* dbeta = nullptr;          // [B, T, H]
  const float* dkt_acc = nullptr;  // accumulators of the fused backward, the group's rows: [nbh, Tp, Dh]
  const float* dy_acc = nullptr;   // [nbh, Tp, Dh]
  const float* dz_acc = nullptr;   // [nbh, nb, 64, 64]
  const float* dp_acc = nullptr;   // [nbh, nb, Dh, Dh] (dense)
  const float* dk_acc = nullptr;   // [nbh, Tp, Dh]
  const float* dw_acc = nullptr;   // [nbh, Tp, Dh]
  int64_t bh0 = 0, nbh = 0;        // the group: rows bh0 .. bh0 + nbh - 1
  const float* minv = nullptr;  // forward factors [BH, nb, kTriFloats] packed
  const float* z = nullptr;
  const bf16_raw* y_hi = nullptr;
  const bf16_raw* y_lo = nullptr;
  const void* k = nullptr;  // inputs
  const float* w = nullptr;
  const float* beta = nullptr;
};
void launch_path_factors_bwd(const FactorsBwdArgs& a, int64_t B, int64_t T, int64_t H, int64_t Dh, bool bf16,
                             cudaStream_t s);
// dst[b, t, h, :] = acc[bh - bh0, t, :] for the rows bh = bh0 .. bh0 + nbh - 1 (acc: [nbh, Tp, Dh]).
void launch_acc_to_output(void* dst, const float* acc, int64_t B, int64_t T, int64_t H, int64_t Dh, int64_t bh0,
                          int64_t nbh, bool bf16, cudaStream_t s);
// Superchunk kernels (path_superchunk.cu), for nsc >= 2 superchunks of sc blocks.
struct ScArgs {
  const bf16_raw* kt_hi = nullptr;  // factors [BH, Tp, Dh]
  const bf16_raw* kt_lo = nullptr;
  const bf16_raw* y_hi = nullptr;
  const bf16_raw* y_lo = nullptr;
  const float* w = nullptr;  // [B, T, H, Dh]
  bf16_raw* ke_hi = nullptr;  // sc_prep outputs: [BH, Tp, Dh] and [BH, nsc, Dh, Dh]
  bf16_raw* ke_lo = nullptr;  // fp32 mode only
  bf16_raw* cs_hi = nullptr;
  bf16_raw* cs_lo = nullptr;
  const float* dke_acc = nullptr;  // sc_bwd inputs (the fused backward's): [nbh, Tp, Dh]
  const float* dws_acc = nullptr;  // [nbh, nsc, Dh, Dh]
  float* dkt_acc = nullptr;  // sc_bwd outputs (added): [nbh, Tp, Dh]
  float* dp_acc = nullptr;   // dense: [nbh, nb, Dh, Dh]
  float* dw_acc = nullptr;   // factored: [nbh, Tp, Dh]
  float* dy_acc = nullptr;   // [nbh, Tp, Dh]
  float* scratch = nullptr;  // sc_bwd: [grid, sc_bwd_slot_floats(sc, Dh, parts)] fp32
  // factored: dP_m of the blocks of superchunks b < nsc - 1, [nbh, (nsc - 1) sc, Dh, Dh] fp32,
  // summed over the parts by sc_bwd's atomics (zeroed before it), read by sc_dwdy.
  float* dps = nullptr;
  int64_t bh0 = 0, nbh = 0;  // sc_bwd: the group, rows bh0 .. bh0 + nbh - 1 (sc_prep: all B H rows)
  int64_t B = 0, T = 0, H = 0;
  int nb = 0, sc = 0, nsc = 0;
  int parts = 1;  // sc_bwd: CTAs per (head, superchunk), sc_bwd_parts
  bool dense = false;
};
void launch_sc_prep(const ScArgs& a, int64_t Dh, bool f32, cudaStream_t stream);
// sc_bwd splits the Dh rows of its chains over sc_bwd_parts(Dh, split) CTAs per (head, superchunk):
// 4 at Dh 128 with one-plane products (bf16, version 55: shorter items beat fewer; with split
// products 4 measured no faster, kernels/NOTES.md sessions 23 and 26), 2 at Dh >= 64, 1 below;
// STATEBENCH_PATH_SC_PARTS=N asks for 1, 2 or 4 (anything else is an Error naming the variable),
// kept to Dh / 64 .. Dh / 16 (16 to 64 rows per part). A CTA's scratch holds its rows of A_m for the
// sc blocks of a superchunk (sc_bwd_slot_floats floats); factored transports add the group's dP_m
// (sc_bwd_dps_floats) after the grid's slots.
int sc_bwd_parts(int64_t Dh, bool split);
constexpr int64_t sc_bwd_slot_floats(int64_t sc, int64_t Dh, int parts) { return sc * (Dh / parts) * Dh; }
constexpr int64_t sc_bwd_dps_floats(int64_t nbh, int64_t sc, int64_t nsc, int64_t Dh) {
  return path_dense(Dh) ? 0 : nbh * (nsc - 1) * sc * Dh * Dh;
}
// split: the chains' products in hi + lo planes (BwdConfig::split_grads; always with fp32 inputs).
void launch_sc_bwd(const ScArgs& a, int grid, int64_t Dh, bool split, cudaStream_t stream);
// Factored transports: dW_m -= Y_m dP_m^T and dY_m -= W_m dP_m for the blocks of a.dps (after sc_bwd).
void launch_sc_dwdy(const ScArgs& a, int64_t Dh, cudaStream_t stream);
int sc_bwd_smem_bytes(int64_t Dh, bool split, int parts);
// The inter-superchunk pairs of one head group on wgmma (path_attention_bwd.cu; p as for
// launch_bwd<true> with p.inter set, between its inter = 1 and inter = 2 launches).
void launch_path_inter_bwd(const BwdParams& p, int64_t Dh, cudaStream_t stream);
// The order in which the states and pairs launches take their query blocks when the wgmma pass runs
// (path_attention_bwd.cu): heaviest first by the cost wj j + wa a of block a sc + j (a superchunk,
// j its position there), ties by larger j. path_item_weights: (wj, wa) for a launch of `items`
// (query block, head) items on `grid` persistent CTAs: the cost 2 j + a where a CTA gets fewer than
// kCostOrderItemsPerCta items (their balance sets the launch's length), else by block (wj 1, wa sc:
// from the last), which measured faster there (kernels/NOTES.md, session 23).
// STATEBENCH_PATH_ITEM_ORDER=0 (by block), 1 (by position: wj nsc, wa 1) or 2 (2 j + a) sets them;
// anything else is an Error naming the variable.
struct ItemWeights {
  int wj = 1, wa = 1;
};
constexpr int64_t kCostOrderItemsPerCta = 4;
ItemWeights path_item_weights(int sc, int nsc, int64_t items, int64_t grid);
void launch_path_item_order(int* order, int nb, int sc, int nsc, ItemWeights w, cudaStream_t stream);
// p with dq_map describing dst as a row-major fp32 [rows, Dh] matrix in boxes of 16 rows x 32
// columns with the 128-byte swizzle, the box's two 8-row halves interleaved in shared memory (the
// wgmma backward's dQ staging, tma_add_frag); dq_bulk is cleared where the driver cannot encode it
// or rows is not a multiple of 16 (the kernel then adds dQ by atomics).
BwdParams with_dq_map(const BwdParams& p, float* dst, int64_t rows, int64_t Dh);
// p with q_map / do_map (q and dout [B, T, H, Dh] bf16 as 4-D maps (Dh, T, H, B), boxes of 64 rows
// x 64 columns, 128-byte swizzle, rows past T zero-filled; with `states` (PaTH's inter pass) q_map
// covers the states xs [nbh xs_rows, Dh] instead) and lse_map / delta_map (the [BH, T] fp32
// arrays flattened, boxes of 64) when p.load_tma is set, Dh is 64 or 128, T is a multiple of 4 (the
// statistics' boxes start 16-byte aligned) and the maps can be encoded (16-byte aligned bases, B H T
// within int32); load_tma is cleared otherwise.
BwdParams with_load_maps(const BwdParams& p, int64_t Dh, bool states);
// The states X_{e_b} of one head group for that pass (p.inter = 1 is implied; writes p.xs): the
// fused kernel's chain-only instantiation in its compact layout, several CTAs per SM.
void launch_path_states(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream);
// That launch's pipeline stages, shared memory and resident CTAs per SM on this device (bf16, Dh 64
// or 128; asked once per backward by bwd_config).
// Developer switch for A/B timing (kernels/NOTES.md): STATEBENCH_ATTN_BWD_STAGES=1 / 2 forces the
// backward's pipeline to one / two stages where they fit (key blocks for PaTH's pairs kernel, query
// blocks for softmax); 0 or unset (returned as 0): two for softmax, and for PaTH two unless one lets
// more CTAs share an SM. Anything else is an Error naming the variable.
int64_t stages_override();
// STATEBENCH_ATTN_FWD_STAGES=1 / 2 does the same for the PaTH forward's fused kernel (default: two
// where they fit, unless one lets more CTAs share an SM; one at Dh 128).
int64_t fwd_stages_override();
// The own-block kernel (path_own_bwd.cu, after the pairs kernel and sc_bwd of a group, before the
// factor backward): its shared memory for query blocks of 16 * warps rows (bwd_config picks the
// largest that fits), and its launch (one CTA per query block of the group's heads).
int path_own_smem_bytes(int64_t Dh, bool f32, int warps);
void launch_path_own_bwd(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream);
struct PathStatesShape {
  int stages = 2, smem = 0, occupancy = 1;
};
PathStatesShape path_states_shape(int64_t Dh);

void launch_gate_grad(float* dlog_f, const float* dg, int64_t B, int64_t T, int64_t H, cudaStream_t s);

}  // namespace sb::cuda::detail
