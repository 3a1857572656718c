// blas.cpp: cuBLAS linear forward/backward (row-major buffers mapped onto column-major GEMMs)
// with FP32 / TF32 / BF16 compute, and the residual forward on cuBLASLt (its algorithm per problem
// found once per handle). Errors: CUDA_CHECK / CUBLAS_CHECK (kernels/common/cuda_check.hpp).
#include "model/cuda/blas.hpp"

#include <array>
#include <map>
#include <optional>

#include "core/error.hpp"
#include "kernels/ops/ops.hpp"

namespace sb::cuda {

// Key: m, n, k, operand storage, compute type, and the alignments (bytes, at most 256) of A, B, C, D.
struct Blas::LtAlgos {
  std::map<std::array<int64_t, 9>, std::optional<cublasLtMatmulAlgo_t>> found;
};

namespace {

cudaDataType_t cuda_type(Storage t) { return t == Storage::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The handle is in the default math mode, so the compute type alone decides: pedantic fp32 (no TF32
// behind our back), TF32, bf16-rounded fp32 operands, or bf16 operands on the tensor cores.
cublasComputeType_t compute_type(const Blas& blas, Storage operands) {
  return operands == Storage::bf16                      ? CUBLAS_COMPUTE_32F
         : blas.precision() == MatmulPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
         : blas.precision() == MatmulPrecision::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                     : CUBLAS_COMPUTE_32F_PEDANTIC;
}

// Column-major C[m, n] = op(A) op(B); beta 0 or 1. A and B share one storage type: fp32 ones use
// the handle's precision, bf16 ones plain fp32 accumulation.
void gemm(const Blas& blas, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, Operand A,
          int64_t lda, Operand B, int64_t ldb, float beta, Target C, int64_t ldc) {
  if (A.type != B.type) fail("linear: a product of an fp32 and a bf16 operand is not supported");
  if (beta != 0.f && C.type == Storage::bf16) fail("linear: accumulating into a bf16 output is not supported");
  const float alpha = 1.f;
  const cublasComputeType_t compute = compute_type(blas, A.type);
  CUBLAS_CHECK(cublasGemmEx(blas.handle(), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                            &alpha, A.data, cuda_type(A.type), static_cast<int>(lda), B.data, cuda_type(B.type),
                            static_cast<int>(ldb), &beta, C.data, cuda_type(C.type), static_cast<int>(ldc), compute,
                            CUBLAS_GEMM_DEFAULT));
}

// The largest power of two (at most 256) dividing the address: cuBLASLt's alignment preferences.
int64_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t b = 1;
  while (b < 256 && a % (2 * b) == 0) b *= 2;
  return b;
}

// The descriptors of one cuBLASLt product, destroyed with it.
struct LtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  LtProblem() = default;
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;
  ~LtProblem() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Column-major D[m, n] = A^T B + C with A [k, m], B [k, n], C and D [m, n] (fp32) on cuBLASLt;
// false where it has no algorithm for the problem (nothing launched).
bool lt_residual_gemm(const Blas& blas, int64_t m, int64_t n, int64_t k, Operand A, Operand B, const float* C,
                      float* D) {
  const cublasComputeType_t compute = compute_type(blas, A.type);
  const std::array<int64_t, 9> key{m, n, k, static_cast<int64_t>(A.type), static_cast<int64_t>(compute),
                                   alignment(A.data), alignment(B.data), alignment(C), alignment(D)};
  auto& found = blas.lt_algos().found;
  auto it = found.find(key);
  if (it != found.end() && !it->second) return false;  // known to have no algorithm: no descriptors needed
  LtProblem p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, cuda_type(A.type), static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, cuda_type(B.type), static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m));
  if (it == found.end()) {  // cached only once the heuristic has answered (an error throws, caching nothing)
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = Blas::kWorkspaceBytes;
    const uint32_t align[4] = {static_cast<uint32_t>(key[5]), static_cast<uint32_t>(key[6]),
                               static_cast<uint32_t>(key[7]), static_cast<uint32_t>(key[8])};
    const cublasLtMatmulPreferenceAttributes_t attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                             sizeof ws);
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i)
      st = cublasLtMatmulPreferenceSetAttribute(pref, attr[i], &align[i], sizeof align[i]);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(blas.lt_handle(), p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    // No algorithm (NOT_SUPPORTED, or none returned) is an answer, not an error: the caller falls back.
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(st);
    std::optional<cublasLtMatmulAlgo_t> algo;
    if (st == CUBLAS_STATUS_SUCCESS && count > 0) algo = result.algo;
    it = found.emplace(key, algo).first;
  }
  if (!it->second) return false;
  const float one = 1.f;
  CUBLAS_CHECK(cublasLtMatmul(blas.lt_handle(), p.op, &one, A.data, p.a, B.data, p.b, &one, C, p.c, D, p.c,
                              &*it->second, blas.workspace(), Blas::kWorkspaceBytes, blas.stream()));
  return true;
}
}  // namespace

void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  fail("cuBLAS error '{}' ({}) in '{}' at {}:{}", cublasGetStatusString(st), static_cast<int>(st), expr, file, line);
}

Blas::Blas(MatmulPrecision precision, cudaStream_t stream, bool use_lt)
    : use_lt_(use_lt), stream_(stream), precision_(precision) {
  lt_algos_ = std::make_unique<LtAlgos>();
  CUBLAS_CHECK(cublasCreate(&handle_));
  CUBLAS_CHECK(cublasSetStream(handle_, stream_));
  CUBLAS_CHECK(cublasLtCreate(&lt_));
  // Each GEMM names its compute type (gemm above); fp32 ones ask for CUBLAS_COMPUTE_32F_PEDANTIC.
  CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  // A fixed buffer keeps graph capture allocation-free; cuBLAS and cuBLASLt share it (one stream).
  CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  CUDA_CHECK(cudaMalloc(&reduce_, static_cast<size_t>(kReduceFloats) * sizeof(float)));
}

Blas::~Blas() {
  if (lt_) cublasLtDestroy(lt_);
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
  // dweight^T [I, O] += inp^T [I, N] (dout^T [O, N])^T; a narrow fp32 one as column sums (fp32 products)
  if (dweight && O <= kNarrowOut && inp.type == Storage::f32 && dout.type == Storage::f32)
    weight_grad_narrow_cuda(dweight, static_cast<const float*>(dout.data), static_cast<const float*>(inp.data), N, I, O,
                            blas.stream(), blas.reduce_scratch());
  else if (dweight) gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, inp, I, dout, O, 1.f, f32_target(dweight), I);
}

void linear_forward_residual_cuda(const Blas& blas, float* out, Operand inp, Operand weight, const float* residual,
                                  int64_t N, int64_t I, int64_t O) {
  if (N <= 0 || O <= 0) return;
  if (inp.type != weight.type) fail("linear: a product of an fp32 and a bf16 operand is not supported");
  // out^T [O, N] = W^T [O, I] inp^T [I, N] + residual^T, W^T read from column-major W [I, O] transposed.
  if (blas.uses_lt() && lt_residual_gemm(blas, O, N, I, weight, inp, residual, out)) return;
  if (out != residual)
    CUDA_CHECK(cudaMemcpyAsync(out, residual, static_cast<size_t>(N * O) * sizeof(float), cudaMemcpyDeviceToDevice,
                               blas.stream()));
  gemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, weight, I, inp, I, 1.f, f32_target(out), O);
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

void matmul_f32_cuda(const Blas& blas, float* out, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
                     bool trans_a, bool trans_b, bool accumulate) {
  // Row-major out [m, n] is column-major out^T [n, m] = op(b)^T op(a)^T.
  gemm(blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, f32_operand(b),
       trans_b ? k : n, f32_operand(a), trans_a ? m : k, accumulate ? 1.f : 0.f, f32_target(out), n);
}

}  // namespace sb::cuda
