// loss.cu: softmax cross-entropy over the labelled rows of the head (forward with a
// fixed-order double loss sum, backward) and row argmax, one block per row. API: kernels/ops/ops.hpp.
#include <cuda_runtime.h>

#include <cfloat>

#include "kernels/ops/ops.hpp"

namespace sb::cuda {
namespace {

constexpr int kThreads = 256;

// Block-wide max / sum over kThreads threads (fixed tree order, deterministic); all threads get it.
__device__ float block_max(float x, float* sh) {
  sh[threadIdx.x] = x;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();
  return r;
}
__device__ float block_sum(float x, float* sh) {
  sh[threadIdx.x] = x;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();
  return r;
}

__global__ void ce_forward_kernel(float* losses, const float* logits, const int32_t* labels, int64_t V) {
  __shared__ float sh[kThreads];
  const float* x = logits + blockIdx.x * V;
  float m = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, x[v]);
  m = block_max(m, sh);
  float s = 0.f;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) s += expf(x[v] - m);
  s = block_sum(s, sh);
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(s) - (x[labels[blockIdx.x]] - m);
}

__global__ void sum_to_double_kernel(double* out, const float* in, int64_t n) {
  __shared__ double sh[kThreads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) acc += static_cast<double>(in[i]);
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = sh[0];
}

__global__ void ce_backward_kernel(float* dlogits, const float* logits, const int32_t* labels, int64_t V, float scale) {
  __shared__ float sh[kThreads];
  const float* x = logits + blockIdx.x * V;
  float* dx = dlogits + blockIdx.x * V;
  float m = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, x[v]);
  m = block_max(m, sh);
  float s = 0.f;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) s += expf(x[v] - m);
  s = block_sum(s, sh);
  const float w = scale / s;
  const int32_t label = labels[blockIdx.x];
  for (int64_t v = threadIdx.x; v < V; v += kThreads) dx[v] = w * expf(x[v] - m) - (v == label ? scale : 0.f);
}

__global__ void argmax_kernel(int32_t* out, const float* logits, int64_t V) {
  __shared__ float shv[kThreads];
  __shared__ int64_t shi[kThreads];
  const float* x = logits + blockIdx.x * V;
  float best = -FLT_MAX;
  int64_t bi = V;  // V = "none yet"
  for (int64_t v = threadIdx.x; v < V; v += kThreads)
    if (bi == V || x[v] > best) best = x[v], bi = v;  // strided scan: indices increase, keep the first max
  shv[threadIdx.x] = best, shi[threadIdx.x] = bi;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = shv[threadIdx.x + s];
      const int64_t oi = shi[threadIdx.x + s];
      const bool take = oi != V && (shi[threadIdx.x] == V || ov > shv[threadIdx.x] ||
                                    (ov == shv[threadIdx.x] && oi < shi[threadIdx.x]));
      if (take) shv[threadIdx.x] = ov, shi[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(shi[0]);
}

}  // namespace

void crossentropy_forward_cuda(float* losses, double* loss_sum, const float* logits, const int32_t* labels, int64_t M,
                               int64_t V, cudaStream_t stream) {
  if (M > 0) {
    ce_forward_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(losses, logits, labels, V);
    CUDA_CHECK(cudaGetLastError());
  }
  if (loss_sum) {
    sum_to_double_kernel<<<1, kThreads, 0, stream>>>(loss_sum, losses, M);
    CUDA_CHECK(cudaGetLastError());
  }
}

void crossentropy_backward_cuda(float* dlogits, const float* logits, const int32_t* labels, int64_t M, int64_t V,
                                float scale, cudaStream_t stream) {
  if (M <= 0) return;
  ce_backward_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(dlogits, logits, labels, V, scale);
  CUDA_CHECK(cudaGetLastError());
}

void argmax_rows_cuda(int32_t* argmax, const float* logits, int64_t M, int64_t V, cudaStream_t stream) {
  if (M <= 0) return;
  argmax_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(argmax, logits, V);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sb::cuda
