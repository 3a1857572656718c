// adamw.cu: the optimiser step on the device: global gradient L2 norm (two deterministic
// passes: per-block double partials over a fixed element partition, then one block), torch-style
// clipping that reads the norm from device memory, and AdamW over the flat parameter buffer with a
// per-element decay mask (AdamW<float>::step semantics). API: kernels/ops/ops.hpp.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/ops/ops.hpp"

namespace sb::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxPartials = 1024;

__device__ void block_reduce_double(double* sh) {
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
}

__global__ void sumsq_partials_kernel(double* partials, const float* g, int64_t n) {
  __shared__ double sh[kThreads];
  double acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads)
    acc += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  sh[threadIdx.x] = acc;
  block_reduce_double(sh);
  if (threadIdx.x == 0) partials[blockIdx.x] = sh[0];
}

__global__ void sqrt_sum_kernel(double* norm, const double* partials, int64_t count) {
  __shared__ double sh[kThreads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) acc += partials[i];
  sh[threadIdx.x] = acc;
  block_reduce_double(sh);
  if (threadIdx.x == 0) *norm = sqrt(sh[0]);
}

__global__ void clip_kernel(float* g, const double* norm, int64_t n, double max_norm) {
  const double nv = *norm;
  if (!isfinite(nv)) return;
  const double coef = max_norm / (nv + 1e-6);
  if (coef >= 1.0) return;
  const float c = static_cast<float>(coef);
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) g[i] *= c;
}

__global__ void adamw_kernel(float* p, float* m, float* v, const float* g, const uint8_t* mask, const double* skip_a,
                             const double* skip_b,
                             int64_t n, float decay, float w1, float b2, float one_minus_b2, float step_size,
                             float bc2s, float eps) {
  if ((skip_a && !isfinite(*skip_a)) || (skip_b && !isfinite(*skip_b))) return;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n || mask[i] == 2) return;
  const float gi = g[i];
  float pi = p[i] * (mask[i] ? decay : 1.f);
  const float mi = m[i] + w1 * (gi - m[i]);
  const float vi = b2 * v[i] + one_minus_b2 * gi * gi;
  const float denom = sqrtf(vi) / bc2s + eps;
  pi -= step_size * mi / denom;
  p[i] = pi, m[i] = mi, v[i] = vi;
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

int64_t grad_norm_partials(int64_t n) {
  const int64_t want = (n + kThreads * 16 - 1) / (kThreads * 16);
  return want < 1 ? 1 : (want > kMaxPartials ? kMaxPartials : want);
}

void grad_norm_cuda(double* norm, double* partials, const float* g, int64_t n, cudaStream_t stream) {
  const int64_t count = grad_norm_partials(n);
  sumsq_partials_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(partials, g, n);
  CUDA_CHECK(cudaGetLastError());
  sqrt_sum_kernel<<<1, kThreads, 0, stream>>>(norm, partials, count);
  CUDA_CHECK(cudaGetLastError());
}

void clip_grads_cuda(float* g, const double* norm, int64_t n, double max_norm, cudaStream_t stream) {
  if (n <= 0 || max_norm <= 0) return;
  clip_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, norm, n, max_norm);
  CUDA_CHECK(cudaGetLastError());
}

void adamw_step_cuda(float* p, float* m, float* v, const float* g, const uint8_t* decay_mask,
                     const double* skip_a, const double* skip_b, int64_t n, const AdamWArgs& a, cudaStream_t stream) {
  if (n <= 0) return;
  const float decay = static_cast<float>(1.0 - a.lr * a.weight_decay);
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      p, m, v, g, decay_mask, skip_a, skip_b, n, decay, static_cast<float>(1.0 - a.beta1),
      static_cast<float>(a.beta2), static_cast<float>(1.0 - a.beta2), static_cast<float>(a.lr / a.bc1),
      static_cast<float>(a.bc2_sqrt), static_cast<float>(a.eps));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sb::cuda
