// gemm_lab.cpp: the kernel lab's cuBLAS study (not built by CMake). Times the study models'
// products (a5_l32, merrill_a5: forward, d(input), d(weight) in bf16 with fp32 accumulation) as
// cublasGemmEx runs them against cuBLASLt's heuristic candidates, each timed alone, with and without
// split-K reductions in a separate kernel. Build: nvcc -O2 gemm_lab.cpp -lcublas -lcublasLt; run: gemm_lab [reps].
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    auto e_ = (x);                                                             \
    if (e_ != 0) {                                                             \
      std::fprintf(stderr, "%s failed (%d) at line %d\n", #x, (int)e_, __LINE__); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace {

// Column-major C[m, n] (+)= op(A) op(B), bf16 A and B; C fp32 (beta 0 or 1) or bf16 (beta 0).
struct Problem {
  std::string name;
  bool ta, tb;
  int m, n, k;
  bool out_bf16;
  float beta;
};

constexpr size_t kWs = 32u << 20;

float time_it(cudaStream_t st, int reps, const std::function<void()>& f) {
  for (int i = 0; i < 5; ++i) f();
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, st));
  for (int i = 0; i < reps; ++i) f();
  CK(cudaEventRecord(b, st));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 1000.f * ms / reps;  // us
}

void run(const Problem& p, cublasHandle_t h, cublasLtHandle_t lt, cudaStream_t st, void* A, void* B, void* C,
         void* ws, int reps) {
  const int lda = p.ta ? p.k : p.m, ldb = p.tb ? p.n : p.k;
  const float alpha = 1.f, beta = p.beta;
  const cudaDataType_t ct = p.out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float t_ex = time_it(st, reps, [&] {
    CK(cublasGemmEx(h, p.ta ? CUBLAS_OP_T : CUBLAS_OP_N, p.tb ? CUBLAS_OP_T : CUBLAS_OP_N, p.m, p.n, p.k, &alpha, A,
                    CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, C, ct, p.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, p.ta ? p.k : p.m, p.ta ? p.m : p.k, lda));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, p.tb ? p.n : p.k, p.tb ? p.k : p.n, ldb));
  CK(cublasLtMatrixLayoutCreate(&lc, ct, p.m, p.n, p.m));
  std::printf("%-28s m %5d n %6d k %6d  GemmEx %7.1f us", p.name.c_str(), p.m, p.n, p.k, t_ex);
  for (uint32_t mask : {uint32_t(CUBLASLT_REDUCTION_SCHEME_MASK), uint32_t(CUBLASLT_REDUCTION_SCHEME_INPLACE)}) {
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t w = kWs;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, sizeof w));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask));
    cublasLtMatmulHeuristicResult_t res[32];
    int count = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 32, res, &count));
    cublasLtMatmulPreferenceDestroy(pref);
    float first = -1, best = 1e30f;
    int best_i = -1;
    for (int i = 0; i < count; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      const float t = time_it(st, reps, [&] {
        CK(cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &res[i].algo, ws, kWs, st));
      });
      if (i == 0) first = t;
      if (t < best) best = t, best_i = i;
    }
    uint32_t splitk = 0, scheme = 0;
    size_t sz = 0;
    if (best_i >= 0) {
      cublasLtMatmulAlgoConfigGetAttribute(&res[best_i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                           &sz);
      cublasLtMatmulAlgoConfigGetAttribute(&res[best_i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                           sizeof scheme, &sz);
    }
    std::printf(" | %s: top1 %7.1f best %7.1f (#%d/%d, splitK %u, red %u)", mask == 1 ? "inplace" : "any", first, best,
                best_i, count, splitk, scheme);
  }
  std::printf("\n");
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
}

// A model's products, row-major as the runner does them (blas.cpp): forward out^T[O, N] = W^T x^T,
// d(input)^T[I, N] = W dout^T, d(weight)^T[I, O] += x^T dout.
void add_linear(std::vector<Problem>& ps, const std::string& name, int N, int I, int O, bool fwd_bf16) {
  ps.push_back({name + " fwd", true, false, O, N, I, fwd_bf16, fwd_bf16 ? 0.f : 1.f});
  ps.push_back({name + " dinp", false, false, I, N, O, false, 0.f});
  ps.push_back({name + " dweight", false, true, I, O, N, false, 1.f});
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 100;
  std::vector<Problem> ps;
  {  // a5_l32: N = 1024 x 32, D 128, HD 128, SwiGLU F 512; PaTH's packed K = 3 HD + HD + H rounded up to 8
    const int N = 32768;
    add_linear(ps, "a5 qkv", N, 128, 384, true);
    add_linear(ps, "a5 packed(path)", N, 128, 520, true);
    add_linear(ps, "a5 wo", N, 128, 128, false);
    add_linear(ps, "a5 mlp_in", N, 128, 1024, true);
    add_linear(ps, "a5 mlp_out", N, 512, 128, false);
  }
  {  // merrill_a5: N = 512 x 21, D 512, GELU F 2048
    const int N = 10752;
    add_linear(ps, "merrill qkv", N, 512, 1536, true);
    add_linear(ps, "merrill wo", N, 512, 512, false);
    add_linear(ps, "merrill mlp_in", N, 512, 2048, true);
    add_linear(ps, "merrill mlp_out", N, 2048, 512, false);
  }
  cublasHandle_t h;
  cublasLtHandle_t lt;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  CK(cublasCreate(&h));
  CK(cublasSetStream(h, st));
  CK(cublasLtCreate(&lt));
  void *ws, *A, *B, *C;
  CK(cudaMalloc(&ws, kWs));
  CK(cublasSetWorkspace(h, ws, kWs));
  const size_t big = size_t(64) << 20;  // bytes per operand: the largest is 32768 x 1024 bf16
  CK(cudaMalloc(&A, big));
  CK(cudaMalloc(&B, big));
  CK(cudaMalloc(&C, 2 * big));
  CK(cudaMemset(A, 0x3c, big));  // bf16 ~0.011: finite, no overflow
  CK(cudaMemset(B, 0x3c, big));
  CK(cudaMemset(C, 0, 2 * big));
  for (const Problem& p : ps) run(p, h, lt, st, A, B, C, ws, reps);
  return 0;
}
