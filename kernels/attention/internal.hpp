// internal.hpp: what the attention .cu files share (internal, not a public interface): kernel
// parameter structs, the workspace layout, the backward launch configuration and the launchers
// each .cu file defines. Factor layouts (per head bh, block m of 64 rows, Tp = 64 nb):
//   kt, y, dv/dkt/dk/dy/dw accumulators: [BH, Tp, Dh] fp32    dz: [BH, nb, 64, 64] fp32
//   z, minv (strictly lower parts): [BH, nb, kTriFloats] fp32, packed (kernels/attention/common/tiles.cuh tri_row)
//   c, dp: [BH, nb, Dh, Dh] fp32 (dense transport, Dh <= 64)    gcum: [BH, T] double, dg: [BH, Tp]
// The PaTH backward runs in groups of nbh rows bh = bh0 .. bh0 + nbh - 1 (BwdConfig::bh_group):
// its accumulators (dv, dkt, dk, dy, dw, dz, dp, dke, dws) hold the group's rows only and are
// indexed by the local row bh - bh0 (their leading dimension is nbh, not BH); inputs, outputs,
// factors, lse, delta, gcum and dg are indexed by the global bh.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/plan.hpp"
#include "kernels/common/cuda_check.hpp"

namespace sb::cuda::detail {

// bf16 storage in the structs shared with host code (device code casts to __nv_bfloat16).
using bf16_raw = uint16_t;

// Floats of one packed strictly lower 64 x 64 matrix (Z; Minv without its unit diagonal): row r
// keeps its first 4 ceil(r / 4) entries, 2112 floats instead of 4096 (kernels/attention/common/tiles.cuh tri_row).
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

// The same for the short warp kernels' head dims, 16, 32 or 64 (plan.hpp path_short_warp,
// softmax_short_warp); `kernels` names them in the error.
template <class F>
void with_short_dh(int64_t Dh, const char* kernels, F&& f) {
  switch (Dh) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    default: throw_error((std::string(kernels) + ": head dim must be 16, 32 or 64 (plan.hpp)").c_str());
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
  bool wgmma = false;      // softmax: the Hopper wgmma kernel (uses_wgmma)
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
  // Inter-superchunk pairs on wgmma (bf16, sm_90, 4 warps; kernels/DESIGN.md). inter = 0: the fused kernel visits every key block. inter = 1
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
  // wgmma softmax backward: dQ (dL/dX_{e_b} with kInter) added by TMA reductions through dq_map
  // (with_dq_map), else by atomics.
  bool dq_bulk = true;
  TmaMap dq_map;
  // wgmma softmax backward and PaTH's inter pass: each stage's Q (states), dO, lse and delta loaded by
  // TMA on an mbarrier (with_load_maps) instead of cp.async, whose pending copies every proxy fence of
  // the iteration waited for; with_load_maps clears it where TMA cannot load them (T not a multiple of 4).
  bool load_tma = true;
  TmaMap q_map, do_map, lse_map, delta_map;
  int64_t head_chunk = 0;  // wgmma softmax backward and inter pass: CTA order over heads in chunks (head_order; 0: one)
  int seg = 1, ck_slots = 1;       // checkpoint segment length (blocks) and checkpoint slots
  int64_t slot_floats = 0;
  float scale = 1.f;
  bool bf16 = false, dense = false;
};

// Launchers (stream-ordered; check their launches). Defined in the .cu files.
template <bool kPath>
void launch_fwd(const FwdParams& p, int64_t Dh, cudaStream_t stream);
template <bool kPath>
void launch_bwd(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream);
// The forward's pairs between superchunks of one head group on wgmma (kernels/attention/path/path_fwd_inter_sm90.cu; bf16, Dh 64
// / 128, after launch_fwd<true> with p.inter set for the same heads): merges into out and lse.
void launch_path_fwd_inter(const FwdParams& p, int64_t Dh, cudaStream_t stream);
int fwd_smem_bytes(int64_t Dh, bool f32, bool path, bool dense, int stages);
int path_bwd_smem_bytes(int64_t Dh, bool f32, bool dense, int warps, int stages);
int softmax_bwd_smem_bytes(int64_t Dh, bool f32, int stages);
// Resident CTAs per multiprocessor of the PaTH backward kernel (after raising its smem limit), and
// the shape of its states launch on this device (bf16, Dh 64 / 128): asked by device_limits.
int path_bwd_occupancy(int64_t Dh, bool f32, int warps, int smem);
PathStatesShape path_states_shape(int64_t Dh);

// Small kernels (kernels/attention/common/prep.cu): prefix sums of log_f per head (double); delta = rowsum(dout * out);
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
// Superchunk kernels (kernels/attention/path/path_superchunk.cu), for nsc >= 2 superchunks of sc blocks.
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
constexpr int64_t sc_bwd_slot_floats(int64_t sc, int64_t Dh, int parts) { return sc * (Dh / parts) * Dh; }
constexpr int64_t sc_bwd_dps_floats(int64_t nbh, int64_t sc, int64_t nsc, int64_t Dh) {
  return path_dense(Dh) ? 0 : nbh * (nsc - 1) * sc * Dh * Dh;
}
// split: the chains' products in hi + lo planes (BwdConfig::split_grads; always with fp32 inputs).
void launch_sc_bwd(const ScArgs& a, int grid, int64_t Dh, bool split, cudaStream_t stream);
// Factored transports: dW_m -= Y_m dP_m^T and dY_m -= W_m dP_m for the blocks of a.dps (after sc_bwd).
void launch_sc_dwdy(const ScArgs& a, int64_t Dh, cudaStream_t stream);
int sc_bwd_smem_bytes(int64_t Dh, bool split, int parts);
// The inter-superchunk pairs of one head group on wgmma (kernels/attention/path/path_bwd.cu; p as for
// launch_bwd<true> with p.inter set, between its inter = 1 and inter = 2 launches).
void launch_path_inter_bwd(const BwdParams& p, int64_t Dh, cudaStream_t stream);
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
// The own-block kernel (kernels/attention/path/path_bwd_own.cu, after the pairs kernel and sc_bwd of a group, before the
// factor backward): its shared memory for query blocks of 16 * warps rows (bwd_config picks the
// largest that fits), and its launch (one CTA per query block of the group's heads).
int path_own_smem_bytes(int64_t Dh, bool f32, int warps);
void launch_path_own_bwd(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream);
void launch_gate_grad(float* dlog_f, const float* dg, int64_t B, int64_t T, int64_t H, cudaStream_t s);

// PaTH at short T (kernels/attention/path/path_short_sm80.cu; plan.hpp path_short): one CTA per
// (b, h), the whole sequence in shared memory. The forward writes out and lse; the backward
// recomputes everything from q, k, v, w, beta, log_f and lse and overwrites every gradient.
void path_short_forward(void* out,           // [B, T, H, Dh] dt
                        float* lse,          // [B, H, T]
                        const void* q,       // [B, T, H, Dh] dt
                        const void* k,       // [B, T, H, Dh] dt
                        const void* v,       // [B, T, H, Dh] dt
                        const float* w,      // [B, T, H, Dh]
                        const float* beta,   // [B, T, H]
                        const float* log_f,  // [B, T, H] or nullptr
                        const AttnDims& d, float scale, bool bf16, cudaStream_t stream);
void path_short_backward(void* dq,            // [B, T, H, Dh] dt
                         void* dk,            // [B, T, H, Dh] dt
                         void* dv,            // [B, T, H, Dh] dt
                         float* dw,           // [B, T, H, Dh]
                         float* dbeta,        // [B, T, H]
                         float* dlog_f,       // [B, T, H] or nullptr (no gate)
                         const void* dout,    // [B, T, H, Dh] dt
                         const void* q,       // [B, T, H, Dh] dt
                         const void* k,       // [B, T, H, Dh] dt
                         const void* v,       // [B, T, H, Dh] dt
                         const float* w,      // [B, T, H, Dh]
                         const float* beta,   // [B, T, H]
                         const float* log_f,  // [B, T, H] or nullptr
                         const float* lse,    // [B, H, T]
                         const AttnDims& d, float scale, bool bf16, cudaStream_t stream);
// The same at T <= 32, Dh 16, 32 or 64 with two warps per (b, h) (kernels/attention/path/path_short_warp_sm80.cu;
// plan.hpp path_short_warp); the same arguments, plus the device's limits and `kept`: the caller's
// factors ([B H, 32, 32] floats, factor_layout), where the forward keeps each head's Tinv^T and Z
// for the backward, or nullptr in both (the backward solves for them again).
void path_short_warp_forward(void* out, float* lse, const void* q, const void* k, const void* v, const float* w,
                             const float* beta, const float* log_f, const AttnDims& d, float scale, bool bf16,
                             float* kept, const DeviceLimits& dev, cudaStream_t stream);
void path_short_warp_backward(void* dq, void* dk, void* dv, float* dw, float* dbeta, float* dlog_f, const void* dout,
                              const void* q, const void* k, const void* v, const float* w, const float* beta,
                              const float* log_f, const float* lse, const AttnDims& d, float scale, bool bf16,
                              const float* kept, const DeviceLimits& dev, cudaStream_t stream);

// Causal softmax attention at T <= 32 and Dh 16, 32 or 64, no workspace (plan.hpp softmax_short_warp;
// fp32: two warps per (b, h), kernels/attention/softmax/softmax_short_warp_sm80.cu; bf16: a warp per
// (b, h), softmax_short_bf16_sm80.cu): out and lse; from lse, dq, dk, dv and (with a gate) dlog_f,
// whose position 0 gets 0. With rope_cs (RoPE's table, [T, Dh / 2] (cos, sin)) q and k are rotated on
// chip and dq, dk rotated back.
void softmax_short_warp_forward(void* out, float* lse, const void* q, const void* k, const void* v,
                                const float* log_f, const float* rope_cs, const AttnDims& d, float scale, bool bf16,
                                cudaStream_t stream);
void softmax_short_warp_backward(void* dq, void* dk, void* dv, float* dlog_f, const void* dout, const void* q,
                                 const void* k, const void* v, const float* log_f, const float* rope_cs,
                                 const float* lse, const AttnDims& d, float scale, bool bf16, cudaStream_t stream);
void softmax_short_bf16_forward(void* out, float* lse, const void* q, const void* k, const void* v, const float* log_f,
                                const float* rope_cs, const AttnDims& d, float scale, cudaStream_t stream);
void softmax_short_bf16_backward(void* dq, void* dk, void* dv, float* dlog_f, const void* dout, const void* q,
                                 const void* k, const void* v, const float* log_f, const float* rope_cs,
                                 const float* lse, const AttnDims& d, float scale, cudaStream_t stream);

}  // namespace sb::cuda::detail
