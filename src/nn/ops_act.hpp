// ops_act.hpp: elementwise activation ops (SiLU, exact GELU, sigmoid, log-sigmoid) and the SwiGLU
// gate, each a forward and a backward. Conventions as in ops_basic.hpp: caller-preallocated
// buffers, backward ACCUMULATES (+=) into gradient outputs, nullptr gradient = skipped.
// Every backward takes the forward INPUT (not the output) and recomputes what it needs, so a
// forward may write in place (out == inp) only when its backward will not be called.
#pragma once
#include <cstdint>

namespace sb::nn {

// SiLU (swish): out = x * sigmoid(x).
template <class S>
void silu_forward(S* out,        // [n]
                  const S* inp,  // [n]
                  int64_t n);
// dinp += dout * sigmoid(x) * (1 + x * (1 - sigmoid(x))).
template <class S>
void silu_backward(S* dinp,        // [n]
                   const S* dout,  // [n]
                   const S* inp,   // [n] forward input
                   int64_t n);

// GELU, the EXACT erf form (PyTorch nn.GELU(approximate='none'), not the tanh approximation):
// out = x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))).
template <class S>
void gelu_forward(S* out,        // [n]
                  const S* inp,  // [n]
                  int64_t n);
// dinp += dout * (Phi(x) + x * phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
template <class S>
void gelu_backward(S* dinp,        // [n]
                   const S* dout,  // [n]
                   const S* inp,   // [n] forward input
                   int64_t n);

// Sigmoid: out = 1 / (1 + exp(-x)), evaluated without overflow for large |x|.
template <class S>
void sigmoid_forward(S* out,        // [n]
                     const S* inp,  // [n]
                     int64_t n);
// dinp += dout * sigmoid(x) * (1 - sigmoid(x)).
template <class S>
void sigmoid_backward(S* dinp,        // [n]
                      const S* dout,  // [n]
                      const S* inp,   // [n] forward input
                      int64_t n);

// Log-sigmoid: out = log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for any x (this is
// what turns a FoX gate pre-activation z into log_f = log sigmoid(z) for softmax_attention).
template <class S>
void logsigmoid_forward(S* out,        // [n]
                        const S* inp,  // [n]
                        int64_t n);
// dinp += dout * (1 - sigmoid(x)) = dout * sigmoid(-x).
template <class S>
void logsigmoid_backward(S* dinp,        // [n]
                         const S* dout,  // [n]
                         const S* inp,   // [n] forward input
                         int64_t n);

// SwiGLU gate of the LLaMA MLP: the fused up-projection gives inp [N, 2F] whose FIRST half of each
// row (columns 0..F-1) is the gate g and SECOND half (columns F..2F-1) the up value u:
//   out[n, f] = silu(g[n, f]) * u[n, f].
// (So the fused weight is [2F, D] with W_gate in rows 0..F-1 and W_up in rows F..2F-1.)
template <class S>
void swiglu_forward(S* out,        // [N, F]
                    const S* inp,  // [N, 2F] = [gate | up]
                    int64_t N, int64_t F);
// dinp[:, :F] += dout * u * silu'(g);  dinp[:, F:] += dout * silu(g).
template <class S>
void swiglu_backward(S* dinp,        // [N, 2F]
                     const S* dout,  // [N, F]
                     const S* inp,   // [N, 2F] forward input
                     int64_t N, int64_t F);

}  // namespace sb::nn
