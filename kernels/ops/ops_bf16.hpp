// ops_bf16.hpp: the per-token ops on bf16 activations (train.precision bf16: the runner stores the
// matrix products' inputs and outputs as bf16, raw uint16_t, round to nearest even; the residual
// stream, norm statistics and parameter gradients stay fp32). Math is fp32: each op equals its fp32
// version (kernels/ops/ops.hpp) applied to the same bf16-exact inputs, with its output rounded to bf16 (bit for bit:
// they share the fp32 ops' element math or kernels), but for the two SwiGLU kernels that are a product and an op in
// one. Every pointer is a device pointer; every call is asynchronous on `stream`. Definitions: kernels/ops/norm.cu
// (norms), kernels/ops/act.cu (activations, SwiGLU), kernels/ops/swiglu_up_fwd_sm80.cu and
// kernels/ops/swiglu_down_bwd_sm80.cu (the fused SwiGLU kernels), kernels/ops/rope.cu (RoPE).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/ops/ops.hpp"  // Act

namespace sb::cuda {

// out = bf16(norm(inp)); the saved statistics are fp32, as in rmsnorm_forward_cuda / layernorm_forward_cuda.
void rmsnorm_forward_bf16_cuda(uint16_t* out,        // [N, D] bf16
                               float* rstd,          // [N] saved
                               const float* inp,     // [N, D]
                               const float* weight,  // [D]
                               int64_t N, int64_t D, double eps, cudaStream_t stream);
void layernorm_forward_bf16_cuda(uint16_t* out,        // [N, D] bf16
                                 float* mean,          // [N] saved
                                 float* rstd,          // [N] saved
                                 const float* inp,     // [N, D]
                                 const float* weight,  // [D]
                                 const float* bias,    // [D]
                                 int64_t N, int64_t D, double eps, cudaStream_t stream);

// The norm backwards of rmsnorm_backward_cuda / layernorm_backward_cuda (same kernels, same contract)
// reading a bf16 dout (a product's bf16 d(norm output)): equal to them on dout widened to fp32.
void rmsnorm_backward_bf16_cuda(float* dinp,           // [N, D] (overwritten, or += with accumulate)
                                float* dweight,        // [D] (+=)
                                const uint16_t* dout,  // [N, D] bf16
                                const float* inp,      // [N, D]
                                const float* weight,   // [D]
                                const float* rstd,     // [N]
                                int64_t N, int64_t D, cudaStream_t stream, ReduceScratch scratch = {},
                                bool accumulate = false, uint16_t* dinp_bf16 = nullptr);
void layernorm_backward_bf16_cuda(float* dinp,           // [N, D] (overwritten, or += with accumulate)
                                  float* dweight,        // [D] (+=)
                                  float* dbias,          // [D] (+=)
                                  const uint16_t* dout,  // [N, D] bf16
                                  const float* inp,      // [N, D]
                                  const float* weight,   // [D]
                                  const float* mean,     // [N]
                                  const float* rstd,     // [N]
                                  int64_t N, int64_t D, cudaStream_t stream, ReduceScratch scratch = {},
                                  bool accumulate = false, uint16_t* dinp_bf16 = nullptr);

// Elementwise activations on bf16 (dinp may alias dout).
void act_forward_bf16_cuda(Act act, uint16_t* out, const uint16_t* inp, int64_t n, cudaStream_t stream);  // [n]
void act_backward_bf16_cuda(Act act, uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n,
                            cudaStream_t stream);  // [n] each

// SwiGLU: eight columns per thread (16-byte accesses) where F % 8 == 0 and every pointer is 16-byte
// aligned, else one.
void swiglu_forward_bf16_cuda(uint16_t* out,        // [N, F]
                              const uint16_t* inp,  // [N, 2F] = [gate | up]
                              int64_t N, int64_t F, cudaStream_t stream);
void swiglu_backward_bf16_cuda(uint16_t* dinp,        // [N, 2F] (overwritten)
                               const uint16_t* dout,  // [N, F]
                               const uint16_t* inp,   // [N, 2F]
                               int64_t N, int64_t F, cudaStream_t stream);

// The SwiGLU MLP's input product and SwiGLU in one kernel: inp = h w_gate_up^T ([N, 2F], fp32
// accumulation, rounded once) and out = swiglu_forward of the rounded inp, inp not read back
// (kernels/ops/swiglu_up_fwd_sm80.cu). swiglu_up_forward_fits: D 64 or 128, F a multiple of 64, every
// pointer 16-byte aligned (otherwise it throws); pays: over at least a wave of its CTAs (two a SM).
bool swiglu_up_forward_fits(int64_t D, int64_t F, std::initializer_list<const void*> pointers);
bool swiglu_up_forward_pays(int64_t N, int64_t D, int64_t F, int sms);
void swiglu_up_forward_bf16_cuda(uint16_t* inp,              // [N, 2F] = [gate | up]
                                 uint16_t* out,              // [N, F]
                                 const uint16_t* h,          // [N, D]
                                 const uint16_t* w_gate_up,  // [2F, D]
                                 int64_t N, int64_t D, int64_t F, cudaStream_t stream);

// The SwiGLU MLP's backward from d(MLP output) to d(its input product's output) in one kernel:
// dinp = swiglu_backward(dout w_down) at inp, ds = dout w_down ([N, F], fp32 accumulation) never
// stored (kernels/ops/swiglu_down_bwd_sm80.cu). Where swiglu_down_backward_fits(D, F, pointers): D and
// F multiples of 64, every pointer 16-byte aligned; otherwise it throws.
bool swiglu_down_backward_fits(int64_t D, int64_t F, std::initializer_list<const void*> pointers);
// Whether it beats the product and swiglu_backward_bf16_cuda on N rows (H200, kernels/DESIGN.md): at
// D <= 128, where d(s)'s traffic outweighs the product (at D = 256 even, at 512 cuBLAS's product wins
// by more), and over at least a wave of its 64 x 64 tiles at four a SM (fewer: 1% slower).
bool swiglu_down_backward_pays(int64_t N, int64_t D, int64_t F, int sms);
void swiglu_down_backward_bf16_cuda(uint16_t* dinp,          // [N, 2F] = [d gate | d up] (overwritten)
                                    const uint16_t* dout,    // [N, D] d(MLP output)
                                    const uint16_t* w_down,  // [D, F]
                                    const uint16_t* inp,     // [N, 2F] = [gate | up]
                                    int64_t N, int64_t D, int64_t F, cudaStream_t stream);

// RoPE with the table of rope_table_cuda. The forward rotates fp32 rows (a product's fp32 output) and
// rounds once; the backward rotates bf16 rows, dinp may alias dout.
void rope_forward_bf16_cuda(uint16_t* out, const float* inp,  // [B, T, H, Dh] each
                            const float* cs,                       // [T, Dh/2, 2]
                            int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t stream);
void rope_backward_bf16_cuda(uint16_t* dinp, const uint16_t* dout,  // [B, T, H, Dh] each
                             const float* cs,                         // [T, Dh/2, 2]
                             int64_t B, int64_t T, int64_t H, int64_t Dh, cudaStream_t stream);

}  // namespace sb::cuda
