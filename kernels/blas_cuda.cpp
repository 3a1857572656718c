// blas_cuda.cpp: cuBLAS linear forward/backward (row-major buffers mapped onto column-major GEMMs)
// with FP32 / TF32 / BF16 compute. Errors: CUDA_CHECK / CUBLAS_CHECK (cuda_check.hpp).
#include "kernels/blas_cuda.hpp"

#include "core/error.hpp"
#include "kernels/ops_cuda.hpp"

namespace sb::cuda {

namespace {

// Column-major C[m, n] = op(A) op(B) with fp32 storage; beta 0 or 1.
void gemm(const Blas& blas, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const float alpha = 1.f;
  const cublasComputeType_t compute = blas.precision() == MatmulPrecision::tf32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : blas.precision() == MatmulPrecision::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                                  : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasGemmEx(blas.handle(), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                            &alpha, A, CUDA_R_32F, static_cast<int>(lda), B, CUDA_R_32F, static_cast<int>(ldb), &beta,
                            C, CUDA_R_32F, static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT));
}
}  // namespace

Blas::Blas(MatmulPrecision precision, cudaStream_t stream) : stream_(stream), precision_(precision) {
  CUBLAS_CHECK(cublasCreate(&handle_));
  CUBLAS_CHECK(cublasSetStream(handle_, stream_));
  // Pure fp32 products stay fp32 even if the handle default changes; TF32 is requested per GEMM.
  CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
  // 32 MiB: cuBLAS's recommendation for Hopper; a fixed buffer keeps graph capture allocation-free.
  constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  CUDA_CHECK(cudaMalloc(&reduce_, static_cast<size_t>(kReduceFloats) * sizeof(float)));
}

Blas::~Blas() {
  if (handle_) cublasDestroy(handle_);
  if (workspace_) cudaFree(workspace_);
  if (reduce_) cudaFree(reduce_);
}

// Row-major X[r, c] is column-major X^T[c, r]: out^T[O, N] = W^T^T... i.e. C = op(Wcm) incm with
// Wcm = W^T [I, O] (transposed), incm = inp^T [I, N].
void linear_forward_cuda(const Blas& blas, float* out, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t I, int64_t O) {
  if (N <= 0 || O <= 0) return;
  gemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, weight, I, inp, I, 0.f, out, O);
  if (bias) add_bias_cuda(out, bias, N, O, blas.stream());
}

void linear_backward_cuda(const Blas& blas, float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, int64_t N, int64_t I, int64_t O, bool accumulate_dinp) {
  if (N <= 0) return;
  // dinp^T [I, N] = Wcm [I, O] dout^T [O, N]
  if (dinp) gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, weight, I, dout, O, accumulate_dinp ? 1.f : 0.f, dinp, I);
  // dweight^T [I, O] += inp^T [I, N] (dout^T [O, N])^T
  if (dweight) gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, inp, I, dout, O, 1.f, dweight, I);
  if (dbias) bias_backward_cuda(dbias, dout, N, O, blas.stream(), blas.reduce_scratch());
}

}  // namespace sb::cuda
