// path_attention.hpp: PaTH attention (Householder-product position encoding) on the CPU, forward
// and backward, with the optional FoX forget gate. Two forms: Direct (O(T^2 d) reference, O(T^3 d)
// backward, small T only) and Blockwise (UT-form FlashAttention-style production path).
// Math and conventions: docs/path-attention.md; backward derivation:
// docs/path-backward.md.
#pragma once
#include <cstdint>

namespace sb::nn {

// Direct: the literal definition, used as the reference in checks (stores a T x T score matrix).
// Blockwise: per-block UT factors, each query block walks key blocks right to left; memory
// O(T (Dh + block)) per call, never T x T.
enum class PathForm { Direct, Blockwise };

// A good Blockwise block size on the CPU for head dim Dh (measured at T = 512, one core): 32 for
// Dh <= 64, 64 above. Blocks with Dh <= 2 * block transport queries through dense Dh x Dh block
// products, smaller blocks through the factored form (both exact; see docs/path-backward.md).
int64_t path_default_block(int64_t Dh);

// Scratch needed by one call, in elements of the scalar type S (independent of B and H: the
// buffer is reused for each (b, h)). Pass a buffer at least this long, or nullptr to let the call
// allocate its own. `block` is ignored by the Direct form.
int64_t path_forward_workspace_elems(int64_t T, int64_t Dh, PathForm form, int64_t block);
int64_t path_backward_workspace_elems(int64_t T, int64_t Dh, PathForm form, int64_t block);

// Forward. For every batch b, head h and query i (causal, keys j <= i):
//   s_ij  = scale * q_i . (H_i H_{i-1} ... H_{j+1} k_j) + sum_{s=j+1..i} log_f_s
//           (the gate term is NOT scaled; log_f at position 0 never enters a score)
//   H_t   = I - beta_t w_t w_t^T
//   out_i = sum_j softmax_j(s_ij) v_j,   lse_i = log sum_j exp(s_ij)
// w rows need not be unit for the op itself (the model feeds unit rows from path_wpath).
// out and lse are overwritten. The call is sequential over (b, h); callers wanting threads can
// call it on batch slices (B = 1 slices of every tensor are contiguous).
template <class S>
void path_attention_forward(S* out,          // [B, T, H, Dh]
                            S* lse,          // [B, H, T]
                            const S* q,      // [B, T, H, Dh]
                            const S* k,      // [B, T, H, Dh]
                            const S* v,      // [B, T, H, Dh]
                            const S* w,      // [B, T, H, Dh]
                            const S* beta,   // [B, T, H]
                            const S* log_f,  // [B, T, H] or nullptr (no forget gate)
                            int64_t B, int64_t T, int64_t H, int64_t Dh, S scale, PathForm form,
                            int64_t block,  // Blockwise block size (>= 1); T need not be a multiple
                            S* workspace);  // [path_forward_workspace_elems(...)] or nullptr

// Backward. ACCUMULATES (+=) into every gradient output; pass nullptr for gradients not needed
// (dlog_f is ignored when log_f is nullptr). out and lse are the forward's outputs.
template <class S>
void path_attention_backward(S* dq,           // [B, T, H, Dh]
                             S* dk,           // [B, T, H, Dh]
                             S* dv,           // [B, T, H, Dh]
                             S* dw,           // [B, T, H, Dh]
                             S* dbeta,        // [B, T, H]
                             S* dlog_f,       // [B, T, H]
                             const S* dout,   // [B, T, H, Dh]
                             const S* q,      // [B, T, H, Dh]
                             const S* k,      // [B, T, H, Dh]
                             const S* v,      // [B, T, H, Dh]
                             const S* w,      // [B, T, H, Dh]
                             const S* beta,   // [B, T, H]
                             const S* log_f,  // [B, T, H] or nullptr
                             const S* out,    // [B, T, H, Dh]
                             const S* lse,    // [B, H, T]
                             int64_t B, int64_t T, int64_t H, int64_t Dh, S scale, PathForm form,
                             int64_t block,
                             S* workspace);  // [path_backward_workspace_elems(...)] or nullptr

}  // namespace sb::nn
