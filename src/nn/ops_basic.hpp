// ops_basic.hpp: CPU reference ops for the transformer's dense layers: token and position embeddings, linear
// (Eigen GEMM, optional bias), RMSNorm, LayerNorm and residual adds, each a forward and a backward.
// Conventions for every op in src/nn/ops_*.hpp (llm.c style):
//   - free functions over caller-preallocated, row-major, contiguous raw pointers; activations
//     [B, T, D] are passed flattened as [N = B*T, D]; `S` is float or double (explicitly
//     instantiated in the .cpp, nn/instantiate.hpp); scalar hyperparameters (eps, theta, scale) are double;
//   - backward ACCUMULATES (+=) into every gradient output; the caller zeroes gradient buffers;
//     a nullptr gradient output means "not needed" and is skipped;
//   - forward saves what backward needs into caller-provided buffers (documented per op);
//   - no hidden global state: ops on disjoint rows may run concurrently on different threads.
#pragma once
#include <cstdint>

namespace sb::nn {

// ---- embedding ---------------------------------------------------------------------------------
// out[n, :] = wte[ids[n], :]. Throws sb::Error for an id outside [0, V).
template <class S>
void embedding_forward(S* out,             // [N, D]
                       const int32_t* ids,  // [N] token ids in [0, V)
                       const S* wte,        // [V, D] embedding table
                       int64_t N, int64_t V, int64_t D);
// dwte[ids[n], :] += dout[n, :] (rows of repeated ids add up).
template <class S>
void embedding_backward(S* dwte,             // [V, D]
                        const S* dout,       // [N, D]
                        const int32_t* ids,  // [N]
                        int64_t N, int64_t V, int64_t D);

// ---- learned absolute positions ------------------------------------------------------------------
// out[b, t, :] += wpe[t, :] for t < T (the first T rows of a table of at least T rows).
template <class S>
void position_forward(S* out,        // [B, T, D]
                      const S* wpe,  // [>= T, D]
                      int64_t B, int64_t T, int64_t D);
// dwpe[t, :] += sum_b dout[b, t, :].
template <class S>
void position_backward(S* dwpe,        // [>= T, D]
                       const S* dout,  // [B, T, D]
                       int64_t B, int64_t T, int64_t D);

// ---- linear ------------------------------------------------------------------------------------
// out = inp @ weight^T + bias, weight stored [O, I] (PyTorch nn.Linear layout); bias may be nullptr
// (no bias). One Eigen GEMM. `out` must not alias `inp`.
template <class S>
void linear_forward(S* out,          // [N, O]
                    const S* inp,     // [N, I]
                    const S* weight,  // [O, I]
                    const S* bias,    // [O] or nullptr
                    int64_t N, int64_t I, int64_t O);
// dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout. Each gradient
// output may be nullptr (skipped).
template <class S>
void linear_backward(S* dinp,          // [N, I] or nullptr
                     S* dweight,       // [O, I] or nullptr
                     S* dbias,         // [O] or nullptr
                     const S* dout,    // [N, O]
                     const S* inp,     // [N, I] forward input
                     const S* weight,  // [O, I]
                     int64_t N, int64_t I, int64_t O);

// ---- RMSNorm -----------------------------------------------------------------------------------
// out[n, :] = inp[n, :] * rstd[n] * weight, rstd[n] = 1 / sqrt(mean_d inp[n, d]^2 + eps).
// weight may be nullptr (no gain, i.e. all ones). Saves rstd for backward. out may alias inp.
template <class S>
void rmsnorm_forward(S* out,          // [N, D]
                     S* rstd,         // [N] saved: reciprocal RMS per row
                     const S* inp,    // [N, D]
                     const S* weight, // [D] or nullptr
                     int64_t N, int64_t D, double eps = 1e-6);
template <class S>
void rmsnorm_backward(S* dinp,         // [N, D] or nullptr
                      S* dweight,      // [D] or nullptr (ignored when weight is nullptr)
                      const S* dout,   // [N, D]
                      const S* inp,    // [N, D] forward input
                      const S* weight, // [D] or nullptr, as in forward
                      const S* rstd,   // [N] saved by forward
                      int64_t N, int64_t D);

// ---- LayerNorm ---------------------------------------------------------------------------------
// out[n, :] = (inp[n, :] - mean[n]) * rstd[n] * weight + bias, with the biased variance
// (divide by D): rstd[n] = 1 / sqrt(var[n] + eps). weight / bias may be nullptr (ones / zeros).
// Saves mean and rstd for backward. out may alias inp.
template <class S>
void layernorm_forward(S* out,          // [N, D]
                       S* mean,         // [N] saved: row mean
                       S* rstd,         // [N] saved: reciprocal standard deviation per row
                       const S* inp,    // [N, D]
                       const S* weight, // [D] or nullptr
                       const S* bias,   // [D] or nullptr
                       int64_t N, int64_t D, double eps = 1e-5);
template <class S>
void layernorm_backward(S* dinp,         // [N, D] or nullptr
                        S* dweight,      // [D] or nullptr (ignored when weight is nullptr)
                        S* dbias,        // [D] or nullptr
                        const S* dout,   // [N, D]
                        const S* inp,    // [N, D] forward input
                        const S* weight, // [D] or nullptr, as in forward
                        const S* mean,   // [N] saved by forward
                        const S* rstd,   // [N] saved by forward
                        int64_t N, int64_t D);

// ---- residual / elementwise add ----------------------------------------------------------------
// out = inp1 + inp2 over n elements; out may alias inp1 or inp2 (in-place residual add).
template <class S>
void residual_forward(S* out,         // [n]
                      const S* inp1,  // [n]
                      const S* inp2,  // [n]
                      int64_t n);
// dinp1 += dout; dinp2 += dout (each may be nullptr). Neither may alias dout.
template <class S>
void residual_backward(S* dinp1,       // [n] or nullptr
                       S* dinp2,       // [n] or nullptr
                       const S* dout,  // [n]
                       int64_t n);
// dst += alpha * src over n elements (gradient accumulation, residual-branch scaling).
template <class S>
void add_scaled(S* dst,        // [n]
                const S* src,  // [n]
                double alpha, int64_t n);

}  // namespace sb::nn
