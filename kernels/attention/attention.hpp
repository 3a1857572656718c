// attention.hpp: the public host API of the CUDA attention kernels: PaTH attention (fused,
// FlashAttention-style, forward and backward; optional FoX gate), causal softmax attention
// (NoPE, RoPE-applied q/k, FoX gate) and stick-breaking attention. Same math and layouts as the
// CPU ops in src/nn/ (path_attention.hpp, ops_attention.hpp, ops_sba.hpp): q, k, v, out [B, T, H, Dh] (and their gradients:
// 16-byte aligned, as cudaMalloc gives); lse [B, H, T] fp32; w [B, T, H, Dh] fp32; beta, log_f
// [B, T, H] fp32. Algorithm and numerics: kernels/DESIGN.md.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/cuda_check.hpp"  // cuda_device_available()

namespace sb::cuda {

// Element type of q, k, v, out, dout, dq, dk, dv. w, beta, log_f, lse and their gradients are
// always fp32. Arithmetic: tensor-core bf16 products with fp32 accumulation; in F32 mode every
// product splits its operands into two bf16 halves (three products, ~1e-5 relative error), in BF16
// mode only the Householder transports do (kernels/DESIGN.md).
enum class DType { F32, BF16 };
const char* dtype_name(DType dt);
size_t dtype_bytes(DType dt);

struct AttnDims {
  int64_t B = 1, T = 1, H = 1, Dh = 64;  // Dh in {16, 32, 64, 128}; any T >= 1, any B * H >= 1
  // Elements from one (b, t) row of q, k, v (qkv_ld) and of the backward's dq, dk, dv (grad_ld) to
  // the next: 0 means H Dh (dense). Another value (a multiple of 8, at least H Dh) lets a caller keep
  // the three side by side in the columns of a wider matrix; only where attention_takes_strides.
  int64_t qkv_ld = 0, grad_ld = 0;
  constexpr int64_t qkv_stride() const { return qkv_ld ? qkv_ld : H * Dh; }
  constexpr int64_t grad_stride() const { return grad_ld ? grad_ld : H * Dh; }
};

// How the kernels run, where a caller may choose (the defaults are the measured best; the plan,
// kernels/attention/plan.hpp, decides the rest from the shapes, dtype and device). A forward and
// its backward must get the same options (they share the factors' layout).
struct AttentionOptions {
  // The Hopper kernels (sm_90a wgmma) where the device and the build have them; false runs the
  // mma.sync kernels that other GPUs run (their parity tests on a Hopper GPU use it).
  bool sm90 = true;
  // PaTH at T <= 64 in one kernel per direction (a CTA per head holds the sequence on chip) where its
  // shared memory fits; false runs the blockwise pipeline at every length (its parity tests at short
  // T use it).
  bool path_short = true;
  // On that path at T <= 32 and Dh <= 64, two warps per head on tensor cores; false runs the
  // CTA-per-head kernels there too (their parity tests at those shapes use it).
  bool path_short_warp = true;
  // Softmax attention at T <= 32 and Dh 16, 32 or 64 in one kernel per direction, on tensor cores
  // (two warps a head in fp32, one in bf16); false runs the blockwise kernels there too (their parity
  // tests use it).
  bool softmax_short = true;
  // PaTH superchunks of this many 64-row blocks: -1 the plan's choice, 0 none, 2 or more blocks
  // (tests use small values to cover superchunks at small T).
  int path_superchunk = -1;
  // Heads (b, h) per launch group of the PaTH backward and of the forward's inter-superchunk pass
  // (0: the plan's, from a memory budget; tests force small groups).
  int64_t path_bwd_group = 0, path_fwd_group = 0;
  // Bytes for the PaTH backward's query-state checkpoints (0: max(64 MiB, 4 B T H Dh)); below one
  // segment per item it keeps ~sqrt(T / 64) checkpoints and recomputes segments.
  int64_t path_checkpoint_budget = 0;
  // Each launch's device time, printed to stderr when the call ends (synchronises the stream).
  bool profile = false;
};

// Scratch bytes each call needs on the current device (the backward's query-state checkpoints are
// sized from the device's multiprocessor count). Pass a workspace at least this large, or nullptr
// to let the call allocate (stream-ordered) and free its own. Independent of whether a gate is used.
// external_factors: the call gets a `factors` buffer (below), so its workspace leaves them out.
size_t path_attention_forward_workspace_bytes(const AttnDims& d, DType dt, bool external_factors = false,
                                              const AttentionOptions& opt = {});
size_t path_attention_backward_workspace_bytes(const AttnDims& d, DType dt, bool external_factors = false,
                                               const AttentionOptions& opt = {});
size_t softmax_attention_forward_workspace_bytes(const AttnDims& d, DType dt, const AttentionOptions& opt = {});
size_t softmax_attention_backward_workspace_bytes(const AttnDims& d, DType dt, const AttentionOptions& opt = {});

// The PaTH factors (pushed keys, UT transforms and block transports; O(B H T Dh) bytes; at T <= 32
// and Dh 16, 32 or 64 each head's UT inverse and Z, 4 KiB) that a forward can keep for its backward:
// pass one buffer of this size as `factors` to the forward and to the matching backward (same d, dt,
// k, w, beta; unchanged in between) and the backward skips the factor kernel (or the solve). With
// factors == nullptr each call computes them into its workspace.
size_t path_attention_factors_bytes(const AttnDims& d, DType dt, const AttentionOptions& opt = {});

// PaTH forward (math: docs/path-attention.md; CPU: nn::path_attention_forward):
//   s_ij = scale * q_i . (H_i ... H_{j+1} k_j) + sum_{s=j+1..i} log_f_s,  H_t = I - beta_t w_t w_t^T
//   out_i = sum_{j<=i} softmax_j(s_ij) v_j,  lse_i = log sum_j exp(s_ij)  (natural log)
// out and lse are overwritten. log_f == nullptr: no forget gate. All pointers are device pointers.
void path_attention_forward_cuda(void* out,            // [B, T, H, Dh] dt
                                 float* lse,           // [B, H, T]
                                 const void* q,        // [B, T, H, Dh] dt
                                 const void* k,        // [B, T, H, Dh] dt
                                 const void* v,        // [B, T, H, Dh] dt
                                 const float* w,       // [B, T, H, Dh]
                                 const float* beta,    // [B, T, H]
                                 const float* log_f,   // [B, T, H] or nullptr
                                 const AttnDims& d, float scale, DType dt,
                                 void* workspace,      // [path_attention_forward_workspace_bytes] or nullptr
                                 size_t workspace_bytes, cudaStream_t stream,
                                 void* factors = nullptr,  // [path_attention_factors_bytes], written
                                 const AttentionOptions& opt = {});

// PaTH backward. OVERWRITES every gradient (unlike the accumulating CPU op); dlog_f is required
// when log_f is given (its position-0 entries are exactly 0) and ignored otherwise. out and lse
// are the forward's outputs.
void path_attention_backward_cuda(void* dq,            // [B, T, H, Dh] dt
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
                                  const void* out,     // [B, T, H, Dh] dt
                                  const float* lse,    // [B, H, T]
                                  const AttnDims& d, float scale, DType dt,
                                  void* workspace,     // [path_attention_backward_workspace_bytes] or nullptr
                                  size_t workspace_bytes, cudaStream_t stream,
                                  const void* factors = nullptr,  // the forward's, or nullptr
                                  const AttentionOptions& opt = {});

// Causal softmax attention (CPU: nn::softmax_attention_forward): s_ij = scale q_i . k_j +
// sum_{s=j+1..i} log_f_s. RoPE is applied to q and k by the caller beforehand, or, where
// softmax_attention_takes_rope (the short kernels, T <= 32), inside the kernels: pass RoPE's table
// (rope_table_cuda, [T, Dh / 2] (cos, sin)) as rope_cs with un-rotated q and k, to the forward and
// to its backward, whose dq and dk are then the un-rotated q's and k's gradients.
void softmax_attention_forward_cuda(void* out,           // [B, T, H, Dh] dt
                                    float* lse,          // [B, H, T]
                                    const void* q,       // [B, T, H, Dh] dt
                                    const void* k,       // [B, T, H, Dh] dt
                                    const void* v,       // [B, T, H, Dh] dt
                                    const float* log_f,  // [B, T, H] or nullptr
                                    const AttnDims& d, float scale, DType dt,
                                    void* workspace,     // [softmax_attention_forward_workspace_bytes] or nullptr
                                    size_t workspace_bytes, cudaStream_t stream, const AttentionOptions& opt = {},
                                    const float* rope_cs = nullptr);  // [T, Dh / 2, 2] or nullptr

// Softmax attention backward; overwrites dq, dk, dv and (with a gate) dlog_f.
void softmax_attention_backward_cuda(void* dq,            // [B, T, H, Dh] dt
                                     void* dk,            // [B, T, H, Dh] dt
                                     void* dv,            // [B, T, H, Dh] dt
                                     float* dlog_f,       // [B, T, H] or nullptr (no gate)
                                     const void* dout,    // [B, T, H, Dh] dt
                                     const void* q,       // [B, T, H, Dh] dt
                                     const void* k,       // [B, T, H, Dh] dt
                                     const void* v,       // [B, T, H, Dh] dt
                                     const float* log_f,  // [B, T, H] or nullptr
                                     const void* out,     // [B, T, H, Dh] dt
                                     const float* lse,    // [B, H, T]
                                     const AttnDims& d, float scale, DType dt,
                                     void* workspace,     // [softmax_attention_backward_workspace_bytes] or nullptr
                                     size_t workspace_bytes, cudaStream_t stream, const AttentionOptions& opt = {},
                                     const float* rope_cs = nullptr);  // [T, Dh / 2, 2] or nullptr
// Whether the softmax kernels at d's shape apply RoPE themselves (rope_cs above).
bool softmax_attention_takes_rope(const AttnDims& d, const AttentionOptions& opt = {});

// Causal stick-breaking attention (Tan et al.; CPU: nn::sba_attention_forward, math in
// docs/attention.md): for keys j < i, z_ij = scale q_i . k_j, A_ij = sigmoid(z_ij)
// prod_{j<l<i} (1 - sigmoid(z_il)), out_i = sum_j A_ij v_j (+ r_i v_i with `remainder`, r_i the
// left-over stick). Keys whose share of the stick is below 2^-60 are dropped (a query block stops
// walking back once its sticks are spent). Needs no workspace and saves nothing for the backward.
void sba_attention_forward_cuda(void* out,      // [B, T, H, Dh] dt
                                const void* q,  // [B, T, H, Dh] dt
                                const void* k,  // [B, T, H, Dh] dt
                                const void* v,  // [B, T, H, Dh] dt
                                const AttnDims& d, float scale, DType dt, bool remainder, cudaStream_t stream);
// Workspace of the backward: fp32 accumulators of dk and dv ([B H, 64 ceil(T / 64), Dh] each).
size_t sba_attention_backward_workspace_bytes(const AttnDims& d);
// Its backward (recomputes the weights from q, k); overwrites dq, dk, dv.
void sba_attention_backward_cuda(void* dq,          // [B, T, H, Dh] dt
                                 void* dk,          // [B, T, H, Dh] dt
                                 void* dv,          // [B, T, H, Dh] dt
                                 const void* dout,  // [B, T, H, Dh] dt
                                 const void* q,     // [B, T, H, Dh] dt
                                 const void* k,     // [B, T, H, Dh] dt
                                 const void* v,     // [B, T, H, Dh] dt
                                 const AttnDims& d, float scale, DType dt, bool remainder,
                                 void* workspace,   // [sba_attention_backward_workspace_bytes] or nullptr
                                 size_t workspace_bytes, cudaStream_t stream);

// PaTH attention at selected query rows only: the labelled rows of a sparse-label batch, where the
// last layer's outputs are needed at those rows alone (MQRAR: 32 of 768). Keys, values, w, beta
// and log_f are the whole sequences; the math is path_attention_forward_cuda's at those rows. One
// lane group per query walks its chain q <- H_j q over every earlier key in fp32: O(rows T Dh) work
// instead of the blockwise kernels' O(T^2 Dh). rows: device [M] row indices b T + t, ascending;
// row_starts: device [B + 1], sequence b's rows are rows[row_starts[b] .. row_starts[b + 1]), at
// most kPathRowsMaxPerSeq of them (the caller checks; rows beyond it are ignored). workspace: where
// a backward follows, the forward leaves each chain's state every 8 keys there for it; else nullptr.
constexpr int64_t kPathRowsMaxPerSeq = 32;
void path_attention_rows_forward_cuda(void* out_rows,           // [M, H, Dh] dt
                                      float* lse_rows,          // [M, H]
                                      const void* q,            // [B, T, H, Dh] dt
                                      const void* k,            // [B, T, H, Dh] dt
                                      const void* v,            // [B, T, H, Dh] dt
                                      const float* w,           // [B, T, H, Dh]
                                      const float* beta,        // [B, T, H]
                                      const float* log_f,       // [B, T, H] or nullptr
                                      const int32_t* rows,      // [M]
                                      const int32_t* row_starts,  // [B + 1]
                                      int64_t M, const AttnDims& d, float scale, DType dt,
                                      void* workspace,  // [path_attention_rows_workspace_bytes] or nullptr
                                      size_t workspace_bytes, cudaStream_t stream);

// Workspace of the rows forward and backward: fp32 checkpoints of each query's chain every 8 keys.
size_t path_attention_rows_workspace_bytes(const AttnDims& d);

// Its backward. OVERWRITES the whole-sequence gradients dq (0 off the selected rows), dk, dv, dw,
// dbeta and dlog_f (required with log_f; position 0 is exactly 0). dout_rows, out_rows, lse_rows:
// per selected row, and the workspace's checkpoints, as the forward wrote them (the same inputs).
void path_attention_rows_backward_cuda(void* dq,                  // [B, T, H, Dh] dt
                                       void* dk,                  // [B, T, H, Dh] dt
                                       void* dv,                  // [B, T, H, Dh] dt
                                       float* dw,                 // [B, T, H, Dh]
                                       float* dbeta,              // [B, T, H]
                                       float* dlog_f,             // [B, T, H] or nullptr
                                       const void* dout_rows,     // [M, H, Dh] dt
                                       const void* out_rows,      // [M, H, Dh] dt
                                       const float* lse_rows,     // [M, H]
                                       const void* q,             // [B, T, H, Dh] dt
                                       const void* k,             // [B, T, H, Dh] dt
                                       const void* v,             // [B, T, H, Dh] dt
                                       const float* w,            // [B, T, H, Dh]
                                       const float* beta,         // [B, T, H]
                                       const float* log_f,        // [B, T, H] or nullptr
                                       const int32_t* rows,       // [M]
                                       const int32_t* row_starts,  // [B + 1]
                                       int64_t M, const AttnDims& d, float scale, DType dt,
                                       void* workspace,  // [path_attention_rows_workspace_bytes], forward's
                                       size_t workspace_bytes, cudaStream_t stream);

// Whether softmax attention at head dim Dh and dtype dt runs the Hopper wgmma kernels (bf16, Dh 64
// or 128, an sm_90 device, a build with sm_90a code and opt.sm90) rather than the mma.sync kernels.
bool softmax_attention_uses_wgmma(int64_t Dh, DType dt, const AttentionOptions& opt = {});
// Whether PaTH (path) or softmax attention at d's shape runs kernels that take row strides other than
// H Dh (AttnDims::qkv_ld, grad_ld): the short kernels at T <= 32.
bool attention_takes_strides(bool path, const AttnDims& d, DType dt, const AttentionOptions& opt = {});

}  // namespace sb::cuda
