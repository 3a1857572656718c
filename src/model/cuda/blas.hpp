// blas.hpp: the cuBLAS handle and the linear layer on the device, out = inp W^T (+ bias),
// W stored [O, I] (nn.Linear layout, like nn::linear_forward), with FP32, TF32 or BF16 tensor-core
// products per handle. fp32 storage with BF16 asks for CUBLAS_COMPUTE_32F_FAST_16BF, which lets
// cuBLAS round the operands to bf16 or use TF32 kernels (on the H100 it picked TF32); the bf16
// runner uses it only for the head and PaTH's small w2 product. The typed overloads also take bf16
// operands (the bf16 runner's activations): fp32 accumulate, output fp32 or bf16. The residual form
// adds the product to a residual stream in the GEMM's epilogue (cuBLASLt).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "kernels/ops/ops.hpp"  // ReduceScratch

// Throws sb::Error naming the cuBLAS status, the failing expression and file:line.
#define CUBLAS_CHECK(expr)                                                      \
  do {                                                                          \
    const cublasStatus_t sb_cublas_st_ = (expr);                                \
    if (sb_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::sb::cuda::throw_cublas_error(sb_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

namespace sb::cuda {

[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line);

enum class MatmulPrecision { fp32, tf32, bf16 };

// Owns one cuBLAS handle and one cuBLASLt handle bound to one stream, their fixed workspace (so
// GEMMs can be captured in CUDA graphs without allocations during capture), the cuBLASLt algorithms
// found per shape, and the column-sum scratch that the parameter gradients on this stream share
// (kernels/ops/ops.hpp). Not copyable. use_lt = false never asks cuBLASLt for the residual
// products' epilogue (the fallback it takes where cuBLASLt has no algorithm; its parity test).
class Blas {
 public:
  Blas(MatmulPrecision precision, cudaStream_t stream, bool use_lt = true);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  cublasHandle_t handle() const { return handle_; }
  cublasLtHandle_t lt_handle() const { return lt_; }
  bool uses_lt() const { return use_lt_; }
  cudaStream_t stream() const { return stream_; }
  MatmulPrecision precision() const { return precision_; }
  ReduceScratch reduce_scratch() const { return {reduce_, kReduceFloats}; }
  void* workspace() const { return workspace_; }
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's recommendation for Hopper
  struct LtAlgos;  // blas.cpp: the cuBLASLt algorithm per problem (or none), found once
  LtAlgos& lt_algos() const { return *lt_algos_; }

 private:
  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  bool use_lt_ = true;
  std::unique_ptr<LtAlgos> lt_algos_;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  static constexpr int64_t kReduceFloats = kReduceChunks * 4096;  // 1 MiB
  float* reduce_ = nullptr;
  MatmulPrecision precision_;
};

// out = inp @ weight^T (+ bias, nullable).
void linear_forward_cuda(const Blas& blas,
                         float* out,           // [N, O]
                         const float* inp,     // [N, I]
                         const float* weight,  // [O, I]
                         const float* bias,    // [O] or nullptr
                         int64_t N, int64_t I, int64_t O);
// dinp (= or +=, per accumulate_dinp) dout @ weight; dweight += dout^T @ inp (with at most kNarrowOut
// outputs and fp32 operands: fp32 column sums, whatever the precision); dbias += colsum(dout). Each
// gradient may be nullptr.
void linear_backward_cuda(const Blas& blas,
                          float* dinp,          // [N, I] or nullptr
                          float* dweight,       // [O, I] or nullptr (+=)
                          float* dbias,         // [O] or nullptr (+=)
                          const float* dout,    // [N, O]
                          const float* inp,     // [N, I]
                          const float* weight,  // [O, I]
                          int64_t N, int64_t I, int64_t O, bool accumulate_dinp);

// ---- typed operands (fp32 or raw bf16 storage) ----------------------------------------------------
enum class Storage { f32, bf16 };
struct Operand {  // a device matrix read by a product
  const void* data;
  Storage type;
};
struct Target {  // a device matrix written by a product
  void* data;
  Storage type;
};
inline Operand f32_operand(const float* p) { return {p, Storage::f32}; }
inline Operand bf16_operand(const uint16_t* p) { return {p, Storage::bf16}; }
inline Target f32_target(float* p) { return {p, Storage::f32}; }
inline Target bf16_target(uint16_t* p) { return {p, Storage::bf16}; }

// out = inp @ weight^T (+ bias): inp and weight of one storage type; a bias needs an fp32 out.
void linear_forward_cuda(const Blas& blas,
                         Target out,         // [N, O]
                         Operand inp,        // [N, I]
                         Operand weight,     // [O, I]
                         const float* bias,  // [O] or nullptr
                         int64_t N, int64_t I, int64_t O);
// dinp (= or +=) dout @ weight; dweight += dout^T @ inp (fp32); dout, inp and weight of one storage
// type. Accumulating into dinp needs an fp32 dinp. The bias gradient is the caller's
// (bias_backward_cuda on an fp32 dout). Each gradient may be {nullptr, ...} / nullptr.
void linear_backward_cuda(const Blas& blas,
                          Target dinp,     // [N, I]
                          float* dweight,  // [O, I] or nullptr (+=)
                          Operand dout,    // [N, O]
                          Operand inp,     // [N, I]
                          Operand weight,  // [O, I]
                          int64_t N, int64_t I, int64_t O, bool accumulate_dinp);

// out (= or += with accumulate) op(a) op(b) for small fp32 row-major matrices (products of parameters,
// in the handle's precision): out [m, n], op(a) [m, k] (a stored [k, m] with trans_a), op(b) [k, n]
// (b stored [n, k] with trans_b).
void matmul_f32_cuda(const Blas& blas, float* out, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
                     bool trans_a, bool trans_b, bool accumulate);

// out = residual + inp @ weight^T (fp32 out and residual; inp and weight of one storage type): the
// add runs in the product's epilogue (cuBLASLt, C = residual, D = out), so no [N, O] product is
// written and read back. out may equal residual. Where cuBLASLt has no algorithm for the problem
// (or on a Blas made with use_lt = false) residual is copied to out and the product added by cublasGemmEx.
void linear_forward_residual_cuda(const Blas& blas,
                                  float* out,             // [N, O]
                                  Operand inp,            // [N, I]
                                  Operand weight,         // [O, I]
                                  const float* residual,  // [N, O]
                                  int64_t N, int64_t I, int64_t O);

}  // namespace sb::cuda
