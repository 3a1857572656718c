// path_wpath.hpp: the PaTH-specific per-token inputs of H_t = I - beta_t w_t w_t^T: the w path
// (causal depthwise conv3 over time -> SiLU -> per-head L2 normalisation; the low-rank projection
// u = W2 W1 x before it is the model's job) and beta = 2 sigmoid(z) with an optional clamp.
// Forward and backward; backward ACCUMULATES (+=) into gradient outputs, nullptr = not needed.
#pragma once
#include <cstdint>

namespace sb::nn {

// Default eps of the L2 normalisation: w = h / sqrt(|h|^2 + eps) (eps inside the square root).
inline constexpr double kPathWNormEps = 1e-6;

// w path forward, C = H * Dh channels, tap order of the causal depthwise convolution:
//   a[b, t, c] = bias[c] + sum_{k=0..2} wconv[c, k] * u[b, t - 2 + k, c]   (u = 0 before t = 0)
// so tap k = 2 multiplies the current token and k = 0 the token two steps back (the layout of a
// PyTorch Conv1d(C, C, 3, groups=C) weight [C, 1, 3] with left padding 2). Then
//   h = silu(a) = a * sigmoid(a),   w[b, t, head] = h_head / sqrt(|h_head|^2 + eps)   (Dh-vectors).
// conv_out keeps a for the backward.
template <class S>
void path_wpath_forward(S* w,            // [B, T, H, Dh]  unit rows (up to eps)
                        S* conv_out,     // [B, T, H * Dh] a, saved for the backward
                        const S* u,      // [B, T, H * Dh]
                        const S* wconv,  // [H * Dh, 3]
                        const S* bias,   // [H * Dh] or nullptr (no bias)
                        int64_t B, int64_t T, int64_t H, int64_t Dh, S eps);

// w path backward: from dw gives du, dwconv, dbias (+=; any may be nullptr).
template <class S>
void path_wpath_backward(S* du,              // [B, T, H * Dh]
                         S* dwconv,          // [H * Dh, 3]
                         S* dbias,           // [H * Dh]
                         const S* dw,        // [B, T, H, Dh]
                         const S* conv_out,  // [B, T, H * Dh] saved by the forward
                         const S* u,         // [B, T, H * Dh]
                         const S* wconv,     // [H * Dh, 3]
                         int64_t B, int64_t T, int64_t H, int64_t Dh, S eps);

// beta = min(2 * sigmoid(z), beta_max), elementwise over n values (n = B * T * H). beta_max >= 2
// disables the clamp. Where the clamp is active the backward passes ZERO gradient (the exact
// derivative of the min; no straight-through), so such tokens stop pushing beta further up.
template <class S>
void path_beta_forward(S* beta,     // [n]
                       const S* z,  // [n]
                       int64_t n, S beta_max);

template <class S>
void path_beta_backward(S* dz,           // [n]  (+=)
                        const S* dbeta,  // [n]
                        const S* z,      // [n]
                        int64_t n, S beta_max);

}  // namespace sb::nn
