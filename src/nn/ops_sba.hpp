// ops_sba.hpp: causal stick-breaking attention (Tan et al., "Scaling Stick-Breaking Attention",
// arXiv 2410.17980), forward and backward on the CPU: the reference of the CUDA kernels
// (kernels/attention/sba/). Conventions as in ops_attention.hpp: q, k, v, out [B, T, H, Dh]
// contiguous, accumulating backward, nullptr gradients skipped, batch elements independent.
#pragma once
#include <cstdint>

namespace sb::nn {

// For every (b, h) and query i, over the keys j < i (a token does not attend to itself):
//   z_ij  = scale * (q_i . k_j),   beta_ij = sigmoid(z_ij)
//   A_ij  = beta_ij * prod_{j<l<i} (1 - beta_il)          (the nearest key breaks the stick first)
//   r_i   = prod_{j<i} (1 - beta_ij) = 1 - sum_{j<i} A_ij  (the stick left over; r_0 = 1)
//   out_i = sum_{j<i} A_ij v_j + [remainder] r_i v_i
// No softmax normalisation. With `remainder` the left-over stick weights the query's own value (the
// authors' reference: o + rem * v); without it the row's weights sum to 1 - r_i (position 0 outputs
// 0). Computed in log space: log A_ij = logsigmoid(z_ij) + sum_{j<l<i} logsigmoid(-z_il), the sum
// accumulated in double from the query backwards. docs/attention.md has the derivation.
template <class S>
void sba_attention_forward(S* out,      // [B, T, H, Dh]
                           const S* q,  // [B, T, H, Dh]
                           const S* k,  // [B, T, H, Dh]
                           const S* v,  // [B, T, H, Dh]
                           int64_t B, int64_t T, int64_t H, int64_t Dh, double scale, bool remainder);

// Backward: recomputes the weights from q and k. With a_ij = A_ij (dout_i . v_j) and
// p_ij = sum_{l<=j} a_il + [remainder] r_i (dout_i . v_i) (a prefix from the first key, so no
// cancellation), dz_ij = a_ij - beta_ij p_ij; dq_i += scale sum_j dz_ij k_j, dk_j += scale
// sum_i dz_ij q_i, dv_j += sum_i A_ij dout_i (+ r_j dout_j with the remainder). Accumulates.
template <class S>
void sba_attention_backward(S* dq,          // [B, T, H, Dh] or nullptr
                            S* dk,          // [B, T, H, Dh] or nullptr
                            S* dv,          // [B, T, H, Dh] or nullptr
                            const S* dout,  // [B, T, H, Dh]
                            const S* q,     // [B, T, H, Dh]
                            const S* k,     // [B, T, H, Dh]
                            const S* v,     // [B, T, H, Dh]
                            int64_t B, int64_t T, int64_t H, int64_t Dh, double scale, bool remainder);

}  // namespace sb::nn
