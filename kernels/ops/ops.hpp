// ops.hpp: host API of the CUDA versions of the dense CPU ops in src/nn/ (embedding, RMSNorm,
// LayerNorm, activations, SwiGLU, RoPE, PaTH w path and beta, cross-entropy,
// argmax, AdamW, gradient norm / clipping) on fp32 activations (their bf16 forms: kernels/ops/ops_bf16.hpp); every pointer is a device pointer; every
// call is asynchronous on `stream` and deterministic (no atomics; reductions in a fixed order).
// Gradient conventions (differ from the CPU ops where noted):
//   - gradients w.r.t. ACTIVATIONS (dinp, dx, dq ...) are OVERWRITTEN;
//   - gradients w.r.t. PARAMETERS (dweight, dbias, dwte, dwconv) are ACCUMULATED (+=), like the CPU.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/cuda_check.hpp"  // CUDA_CHECK

namespace sb::cuda {


// ---- embedding ---------------------------------------------------------------------------------
// out[n, :] = wte[ids[n], :]; ids must lie in [0, V) (not checked on the device).
void embedding_forward_cuda(float* out,         // [N, D]
                            const int32_t* ids,  // [N]
                            const float* wte,    // [V, D]
                            int64_t N, int64_t V, int64_t D, cudaStream_t stream);
// ---- column sums (parameter gradients) ------------------------------------------------------------
// Device scratch for the column sums of the parameter gradients (norm weights, biases, the PaTH w
// convolution). Without it a sum runs in one pass of D / 32 CTAs; with it the rows are split into
// up to kReduceChunks fixed chunks summed in parallel, then the chunks in order (still
// deterministic; the chunking depends only on N, D and `floats`). One scratch serves every call
// on one stream (Blas::reduce_scratch()).
struct ReduceScratch {
  float* data = nullptr;
  int64_t floats = 0;
};
constexpr int64_t kReduceChunks = 64;

// ---- embedding gradient --------------------------------------------------------------------------
// The rows of one batch grouped by token id, built on the host (stable counting sort) and uploaded
// with the batch. An id's rows (increasing n) are cut into segments of at most `max_rows` rows; a
// segment is summed by one CTA, straight into dwte when it is the id's only one, else into a
// scratch slot, and the slots of a many-segment id are added in order afterwards. So a frequent
// token (MQAR's filler) is spread over many CTAs and the sum stays deterministic. Layout (int32):
//   [n_seg | n_multi | seg_id[N] | seg_begin[N + 1] | seg_slot[N] (-1: direct) | order[N] |
//    multi_id[N] | multi_slot0[N + 1]]
constexpr int64_t embedding_index_ints(int64_t N) { return 6 * N + 4; }
// The segment length (>= 64) that keeps the slots (at most 2 N / rows + 1 rows of D floats) in
// `floats`; with no scratch (floats = 0) every id is one segment.
int64_t embedding_segment_rows(int64_t N, int64_t D, int64_t floats);
void embedding_index_build(int32_t* index,      // [embedding_index_ints(N)] host
                           const int32_t* ids,  // [N] host, each in [0, V)
                           int64_t N, int64_t V, int64_t D,
                           int32_t* counts,          // [V] host scratch
                           int64_t scratch_floats);  // the floats of the scratch given to the backward
// dwte[id, :] += the sum of dout[n, :] over the rows n with that id (deterministic, no atomics).
void embedding_backward_cuda(float* dwte,           // [V, D] (+=)
                             const float* dout,     // [N, D]
                             const int32_t* index,  // [embedding_index_ints(N)] device
                             int64_t N, int64_t V, int64_t D, cudaStream_t stream,
                             ReduceScratch scratch);  // the slots: floats as given to embedding_index_build

// ---- norms -------------------------------------------------------------------------------------
void rmsnorm_forward_cuda(float* out,          // [N, D]
                          float* rstd,         // [N] saved
                          const float* inp,    // [N, D]
                          const float* weight, // [D]
                          int64_t N, int64_t D, double eps, cudaStream_t stream);
// The norm backwards overwrite dinp, or add to it with accumulate (dinp must not alias dout); with
// dinp_bf16 they also write bf16 of what they stored in dinp (the bf16 runner's copy of its
// residual gradient).
void rmsnorm_backward_cuda(float* dinp,         // [N, D] (overwritten, or += with accumulate)
                           float* dweight,      // [D] (+=)
                           const float* dout,   // [N, D]
                           const float* inp,    // [N, D]
                           const float* weight, // [D]
                           const float* rstd,   // [N]
                           int64_t N, int64_t D, cudaStream_t stream, ReduceScratch scratch = {},
                           bool accumulate = false, uint16_t* dinp_bf16 = nullptr);  // [N, D] bf16 or nullptr
void layernorm_forward_cuda(float* out,          // [N, D]
                            float* mean,         // [N] saved
                            float* rstd,         // [N] saved
                            const float* inp,    // [N, D]
                            const float* weight, // [D]
                            const float* bias,   // [D]
                            int64_t N, int64_t D, double eps, cudaStream_t stream);
void layernorm_backward_cuda(float* dinp,         // [N, D] (overwritten, or += with accumulate)
                             float* dweight,      // [D] (+=)
                             float* dbias,        // [D] (+=)
                             const float* dout,   // [N, D]
                             const float* inp,    // [N, D]
                             const float* weight, // [D]
                             const float* mean,   // [N]
                             const float* rstd,   // [N]
                             int64_t N, int64_t D, cudaStream_t stream, ReduceScratch scratch = {},
                             bool accumulate = false, uint16_t* dinp_bf16 = nullptr);  // [N, D] bf16 or nullptr

// ---- elementwise -------------------------------------------------------------------------------
enum class Act { silu, gelu, sigmoid, logsigmoid };  // gelu = exact erf form
void act_forward_cuda(Act act, float* out, const float* inp, int64_t n, cudaStream_t stream);  // [n]
// dinp = dout * act'(inp) (overwritten; dinp may alias dout).
void act_backward_cuda(Act act, float* dinp, const float* dout, const float* inp, int64_t n,
                       cudaStream_t stream);  // [n] each
void swiglu_forward_cuda(float* out,        // [N, F]
                         const float* inp,  // [N, 2F] = [gate | up]
                         int64_t N, int64_t F, cudaStream_t stream);
void swiglu_backward_cuda(float* dinp,        // [N, 2F] (overwritten)
                          const float* dout,  // [N, F]
                          const float* inp,   // [N, 2F]
                          int64_t N, int64_t F, cudaStream_t stream);
// x *= alpha over n elements.
void scale_cuda(float* x, float alpha, int64_t n, cudaStream_t stream);  // [n]
// out[n, :] += bias (row broadcast).
void add_bias_cuda(float* out,         // [N, O]
                   const float* bias,  // [O]
                   int64_t N, int64_t O, cudaStream_t stream);
// dbias[o] += sum_n dout[n, o] (fixed-order column sums).
void bias_backward_cuda(float* dbias,       // [O] (+=)
                        const float* dout,  // [N, O]
                        int64_t N, int64_t O, cudaStream_t stream, ReduceScratch scratch = {});
// dweight[o, i] += sum_n dout[n, o] inp[n, i] as column sums (fp32 products, a fixed order): the
// weight gradient of a product with at most kNarrowOut outputs (a small vocabulary's head, which the
// GEMM libraries run on one or two CTAs over a long reduction).
constexpr int64_t kNarrowOut = 16;
void weight_grad_narrow_cuda(float* dweight,     // [O, I] (+=)
                             const float* dout,  // [N, O]
                             const float* inp,   // [N, I]
                             int64_t N, int64_t I, int64_t O, cudaStream_t stream, ReduceScratch scratch = {});

// ---- RoPE (rotate_half pairing m <-> m + Dh/2, angle t * theta^(-2m/Dh)) ------------------------
// The angles' (cos, sin), computed in double and rounded to float (the values the CPU path uses),
// once per runner: cs[t, m] for t < T, m < Dh/2.
void rope_table_cuda(float* cs,  // [T, Dh/2, 2]
                     int64_t T, int64_t Dh, double theta, cudaStream_t stream);
// out may alias inp. backward: dinp = R(-angle) dout (overwritten; must not alias dout).
void rope_forward_cuda(float* out, const float* inp,  // [B, T, H, Dh] each
                       const float* cs,                 // [T, Dh/2, 2] (rope_table_cuda)
                       int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t stream);
void rope_backward_cuda(float* dinp, const float* dout,  // [B, T, H, Dh] each
                        const float* cs,                   // [T, Dh/2, 2]
                        int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t stream);

// ---- PaTH w path and beta (nn::path_wpath_*) ------------------------------------------------------
void path_wpath_forward_cuda(float* w,            // [B, T, H, Dh]
                             const float* u,      // [B, T, H * Dh]
                             const float* wconv,  // [H * Dh, 3]
                             const float* bias,   // [H * Dh] or nullptr
                             int64_t B, int64_t T, int64_t H, int64_t Dh, float eps, cudaStream_t stream);
// The backward recomputes the convolution from u, wconv and bias (the forward saves nothing). With
// du_bf16, du goes there instead, rounded to bf16 (nearest even), row n at du_bf16 + n du_ld (the
// columns of a packed operand); du is then nullptr.
void path_wpath_backward_cuda(float* du,           // [B, T, H * Dh] (overwritten) or nullptr
                              float* dwconv,       // [H * Dh, 3] (+=)
                              float* dbias,        // [H * Dh] (+=) or nullptr
                              float* da_scratch,   // [B, T, H * Dh] scratch (da, or the fused kernel's partial sums)
                              const float* dw,     // [B, T, H, Dh]
                              const float* u,      // [B, T, H * Dh]
                              const float* wconv,  // [H * Dh, 3]
                              const float* bias,   // [H * Dh] or nullptr
                              int64_t B, int64_t T, int64_t H, int64_t Dh, float eps, cudaStream_t stream,
                              ReduceScratch scratch = {}, uint16_t* du_bf16 = nullptr, int64_t du_ld = 0);
// beta = min(2 sigmoid(z), beta_max) over [N, H]; with bias, z += bias (per column, in place: the
// backward reads that z) first. The backward overwrites dz (zero where clamped) and with dbias adds
// its column sums (fixed order) to dbias.
void path_beta_forward_cuda(float* beta, float* z, const float* bias, int64_t N, int64_t H, float beta_max,
                            cudaStream_t stream);
void path_beta_backward_cuda(float* dz, float* dbias, const float* dbeta, const float* z, int64_t N, int64_t H,
                             float beta_max, cudaStream_t stream, ReduceScratch scratch = {});

// ---- rows of the head ----------------------------------------------------------------------------
// Rows of a fp32 [.., Da] tensor a and, with Db > 0, of a [.., Db] tensor b (fp32, or with b_bf16
// bf16 bits), both by the same index. The gather: out[m, :] = inp[rows[m], :], zeros where rows[m]
// < 0 (padding). The expansion writes every row of out: out[n, :] = inp[row_of[n], :], zeros where
// row_of[n] < 0 (a scatter into a zeroed output, in one pass).
void gather_rows_cuda(float* out_a, const float* inp_a, int64_t Da, void* out_b, const void* inp_b, int64_t Db,
                      bool b_bf16, const int32_t* rows, int64_t M, cudaStream_t stream);  // [M, ..], [N, ..], [M]
void expand_rows_cuda(float* out_a, const float* inp_a, int64_t Da, void* out_b, const void* inp_b, int64_t Db,
                      bool b_bf16, const int32_t* row_of, int64_t N, cudaStream_t stream);  // [N, ..], [M, ..], [N]

// ---- loss --------------------------------------------------------------------------------------
// Every row is labelled (labels in [0, V), the caller gathers the labelled rows) or padding (label
// < 0: loss 0, gradient 0):
//   losses[m] = logsumexp(logits[m, :]) - logits[m, labels[m]];  *loss_sum = sum_m losses[m]
// (double, fixed order). loss_sum may be nullptr; else crossentropy_sum_doubles(M) doubles, zeroed
// when allocated: the sum, then the kernel's own (a count of finished blocks that each call leaves at
// 0, and per-block partial sums).
int64_t crossentropy_sum_doubles(int64_t M);
void crossentropy_forward_cuda(float* losses,          // [M]
                               double* loss_sum,       // [crossentropy_sum_doubles(M)] or nullptr
                               const float* logits,    // [M, V]
                               const int32_t* labels,  // [M]
                               int64_t M, int64_t V, cudaStream_t stream);
// dlogits[m, :] = scale * (softmax(logits[m, :]) - onehot(labels[m])) (overwritten).
void crossentropy_backward_cuda(float* dlogits,        // [M, V]
                                const float* logits,   // [M, V]
                                const int32_t* labels, // [M]
                                int64_t M, int64_t V, float scale, cudaStream_t stream);
// argmax[m] = first index of the row maximum.
void argmax_rows_cuda(int32_t* argmax, const float* logits,  // [M], [M, V]
                      int64_t M, int64_t V, cudaStream_t stream);

// ---- precision conversion (kernels/ops/convert.cu) ---------------------------------------------
// bf16 values are stored as raw uint16_t (the attention kernels' BF16 layout); rounding to nearest even.
void f32_to_bf16_cuda(uint16_t* dst,     // [n]
                      const float* src,  // [n]
                      int64_t n, cudaStream_t stream);
void bf16_to_f32_cuda(float* dst,           // [n]
                      const uint16_t* src,  // [n]
                      int64_t n, cudaStream_t stream);

// ---- optimiser ---------------------------------------------------------------------------------
// Global gradient L2 norm in one launch, in a fixed order (per-block double partials, summed by the
// last block to finish): *norm = sqrt(sum g^2). partials needs grad_norm_partials() doubles, zeroed
// once when allocated (the last holds the blocks' count, which each call leaves at 0).
int64_t grad_norm_partials(int64_t n);
void grad_norm_cuda(double* norm,      // [1]
                    double* partials,  // [grad_norm_partials(n)] scratch
                    const float* g,    // [n]
                    int64_t n, cudaStream_t stream);
// One AdamW update (AdamW<float>::step semantics) per element with decay_mask 1 (decay) or 0 (no
// decay); mask 2 marks padding (untouched). Skipped entirely (no change) when *skip_a or *skip_b
// (each nullable: e.g. the gradient norm and the loss sum) is not finite. With max_norm > 0 the
// gradient is clipped as torch's clip_grad_norm_ on the way in (g itself is not written): scaled by
// max_norm / (*clip_norm + 1e-6) where *clip_norm is finite and that is below 1.
// bc1 = 1 - beta1^t, bc2_sqrt = sqrt(1 - beta2^t).
struct AdamWArgs {
  double lr, beta1, beta2, eps, weight_decay, bc1, bc2_sqrt;
};
void adamw_step_cuda(float* p, float* m, float* v,  // [n] each
                     const float* g,                // [n]
                     const uint8_t* decay_mask,     // [n]
                     const double* skip_a,          // [1] or nullptr
                     const double* skip_b,          // [1] or nullptr
                     const double* clip_norm,       // [1] (read when max_norm > 0)
                     double max_norm, int64_t n, const AdamWArgs& args, cudaStream_t stream);

}  // namespace sb::cuda
