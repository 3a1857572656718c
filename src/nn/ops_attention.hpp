// ops_attention.hpp: rotary position embedding (RoPE) and causal softmax attention with an optional
// FoX forget-gate bias (covers NoPE, RoPE and FoX attention; PaTH lives in src/nn/path_*).
// Conventions as in ops_basic.hpp (accumulating backward, nullptr gradient = skipped). Attention
// tensors q, k, v, out are [B, T, H, Dh] contiguous; per-head vectors (lse, log_f) are as stated.
// Everything for one batch element b is independent of the others: a caller may split a batch
// across threads by offsetting every pointer to element b and passing B = 1.
#pragma once
#include <cstdint>

namespace sb::nn {

// ---- RoPE --------------------------------------------------------------------------------------
// Rotary embedding, HF / LLaMA / GPT-NeoX "rotate_half" convention: channel m of each head is paired
// with channel m + Dh/2 (NOT with channel m+1), m = 0 .. Dh/2 - 1, and the pair is rotated by
//   angle(t, m) = t * theta^(-2m / Dh),   t = 0 .. T-1 (the first position is 0, i.e. unrotated):
//   out[m]        = x[m] cos(angle) - x[m + Dh/2] sin(angle)
//   out[m + Dh/2] = x[m + Dh/2] cos(angle) + x[m] sin(angle)
// i.e. (x[m] + i x[m + Dh/2]) * exp(i angle) as a complex number. Apply it to q and to k
// (separately). Dh must be even (throws sb::Error). Angles are computed in double. out may alias
// inp (in-place rotation).
template <class S>
void rope_forward(S* out,        // [B, T, H, Dh]
                  const S* inp,  // [B, T, H, Dh]
                  int64_t B, int64_t T, int64_t H, int64_t Dh, double theta = 10000.0);
// The inverse rotation: dinp += R(-angle) dout. dinp must not alias dout.
template <class S>
void rope_backward(S* dinp,        // [B, T, H, Dh]
                   const S* dout,  // [B, T, H, Dh]
                   int64_t B, int64_t T, int64_t H, int64_t Dh, double theta = 10000.0);

// ---- causal softmax attention (NoPE / RoPE / FoX) ----------------------------------------------
// For every (b, h) and query position i, over keys j <= i (causal):
//   s_ij   = scale * (q_i . k_j) + (c_i - c_j),   c_t = sum_{s <= t} log_f[b, s, h]
//          = scale * (q_i . k_j) + sum_{s = j+1 .. i} log_f[b, s, h]     (FoX forget-gate bias)
//   out_i  = sum_j softmax_j(s_ij) v_j
//   lse_i  = log sum_{j <= i} exp(s_ij)        (saved for backward)
// log_f == nullptr means no gate (plain NoPE; RoPE = rope_forward on q and k first). The gate term is
// NOT multiplied by `scale` (FoX paper convention); log_f[b, 0, h] never contributes. log_f is the
// log of the forget gate, log_f = logsigmoid(z) (ops_act.hpp), applied by the model. Typical
// scale = 1 / sqrt(Dh). The prefix sums c are formed in double and rounded to S only relative to
// the current query block, so in float the gate bias keeps its precision at any sequence length. Work per (b, h) is done in query blocks of 64 rows
// with Eigen GEMMs over the causal prefix only; scratch is O(64 * T) per call, no T x T tensor.
template <class S>
void softmax_attention_forward(S* out,          // [B, T, H, Dh]
                               S* lse,          // [B, H, T] saved: row log-sum-exp of the scores
                               const S* q,      // [B, T, H, Dh]
                               const S* k,      // [B, T, H, Dh]
                               const S* v,      // [B, T, H, Dh]
                               const S* log_f,  // [B, T, H] log forget gate, or nullptr (no gate)
                               int64_t B, int64_t T, int64_t H, int64_t Dh, double scale);
// FlashAttention-style backward: probabilities are recomputed from q, k, log_f and the saved lse;
// D_i = dout_i . out_i is taken from the forward output. Accumulates into dq, dk, dv and dlog_f
// (each nullable; dlog_f is ignored when log_f is nullptr). dlog_f[b, 0, h] is left untouched: its
// gradient is exactly 0 since log_f at position 0 never enters a score.
template <class S>
void softmax_attention_backward(S* dq,            // [B, T, H, Dh] or nullptr
                                S* dk,            // [B, T, H, Dh] or nullptr
                                S* dv,            // [B, T, H, Dh] or nullptr
                                S* dlog_f,        // [B, T, H] or nullptr
                                const S* dout,    // [B, T, H, Dh]
                                const S* q,       // [B, T, H, Dh]
                                const S* k,       // [B, T, H, Dh]
                                const S* v,       // [B, T, H, Dh]
                                const S* log_f,   // [B, T, H] or nullptr, as in forward
                                const S* out,     // [B, T, H, Dh] forward output
                                const S* lse,     // [B, H, T] saved by forward
                                int64_t B, int64_t T, int64_t H, int64_t Dh, double scale);

}  // namespace sb::nn
