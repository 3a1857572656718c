// blas_cuda.cpp: cuBLAS linear forward/backward (row-major buffers mapped onto column-major GEMMs)
// with FP32 / TF32 / BF16 compute. Errors: CUDA_CHECK / CUBLAS_CHECK (cuda_check.hpp).
#include "kernels/blas_cuda.hpp"

#include "core/error.hpp"
#include "kernels/ops_cuda.hpp"

namespace sb::cuda {

namespace {

cudaDataType_t cuda_type(Storage t) { return t == Storage::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// Column-major C[m, n] = op(A) op(B); beta 0 or 1. A and B share one storage type: fp32 ones use
// the handle's precision, bf16 ones plain fp32 accumulation.
void gemm(const Blas& blas, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, Operand A,
          int64_t lda, Operand B, int64_t ldb, float beta, Target C, int64_t ldc) {
  if (A.type != B.type) fail("linear: a product of an fp32 and a bf16 operand is not supported");
  if (beta != 0.f && C.type == Storage::bf16) fail("linear: accumulating into a bf16 output is not supported");
  const float alpha = 1.f;
  // The handle is in the default math mode, so the compute type alone decides: pedantic fp32 (no
  // TF32 behind our back), TF32, bf16-rounded fp32 operands, or bf16 operands on the tensor cores.
  const cublasComputeType_t compute = A.type == Storage::bf16                      ? CUBLAS_COMPUTE_32F
                                      : blas.precision() == MatmulPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : blas.precision() == MatmulPrecision::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                                  : CUBLAS_COMPUTE_32F_PEDANTIC;
  CUBLAS_CHECK(cublasGemmEx(blas.handle(), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                            &alpha, A.data, cuda_type(A.type), static_cast<int>(lda), B.data, cuda_type(B.type),
                            static_cast<int>(ldb), &beta, C.data, cuda_type(C.type), static_cast<int>(ldc), compute,
                            CUBLAS_GEMM_DEFAULT));
}
}  // namespace

Blas::Blas(MatmulPrecision precision, cudaStream_t stream) : stream_(stream), precision_(precision) {
  CUBLAS_CHECK(cublasCreate(&handle_));
  CUBLAS_CHECK(cublasSetStream(handle_, stream_));
  // Each GEMM names its compute type (gemm above); fp32 ones ask for CUBLAS_COMPUTE_32F_PEDANTIC.
  CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
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
void linear_forward_cuda(const Blas& blas, Target out, Operand inp, Operand weight, const float* bias, int64_t N,
                         int64_t I, int64_t O) {
  if (N <= 0 || O <= 0) return;
  if (bias && out.type != Storage::f32) fail("linear: a bias needs an fp32 output");
  gemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, weight, I, inp, I, 0.f, out, O);
  if (bias) add_bias_cuda(static_cast<float*>(out.data), bias, N, O, blas.stream());
}

void linear_backward_cuda(const Blas& blas, Target dinp, float* dweight, Operand dout, Operand inp, Operand weight,
                          int64_t N, int64_t I, int64_t O, bool accumulate_dinp) {
  if (N <= 0) return;
  // dinp^T [I, N] = Wcm [I, O] dout^T [O, N]
  if (dinp.data) gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, weight, I, dout, O, accumulate_dinp ? 1.f : 0.f, dinp, I);
  // dweight^T [I, O] += inp^T [I, N] (dout^T [O, N])^T
  if (dweight) gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, inp, I, dout, O, 1.f, f32_target(dweight), I);
}

void linear_forward_cuda(const Blas& blas, float* out, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t I, int64_t O) {
  linear_forward_cuda(blas, f32_target(out), f32_operand(inp), f32_operand(weight), bias, N, I, O);
}

void linear_backward_cuda(const Blas& blas, float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, int64_t N, int64_t I, int64_t O, bool accumulate_dinp) {
  if (N <= 0) return;
  linear_backward_cuda(blas, f32_target(dinp), dweight, f32_operand(dout), f32_operand(inp), f32_operand(weight), N, I,
                       O, accumulate_dinp);
  if (dbias) bias_backward_cuda(dbias, dout, N, O, blas.stream(), blas.reduce_scratch());
}

}  // namespace sb::cuda
