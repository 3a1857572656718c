// adamw.cu: the optimiser step on the device: global gradient L2 norm (deterministic: per-block
// double partials over a fixed element partition, summed in a fixed order by whichever block
// finishes last, in the same launch), and AdamW over the flat parameter buffer with a per-element
// decay mask (AdamW<float>::step semantics) and torch-style clipping by that norm read from device
// memory. API: kernels/ops/ops.hpp.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/ops/last_block_sum.cuh"
#include "kernels/ops/ops.hpp"

namespace sb::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxPartials = 1024;

// partials[b] = the sum of g^2 over block b's elements; the last block to finish (counted in
// *done) writes *norm = sqrt of their sum (last_block_sum: a fixed order whichever block it is).
__global__ void grad_norm_kernel(double* norm, double* partials, unsigned* done, const float* g, int64_t n) {
  __shared__ double sh[kThreads];
  double acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {  // four loads in flight, added in order
    float x[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) x[u] = g[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += static_cast<double>(x[u]) * static_cast<double>(x[u]);
  }
  for (; i < n; i += stride) acc += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  sh[threadIdx.x] = acc;
  block_tree_sum<kThreads>(sh);
  double total;
  if (last_block_sum<kThreads>(sh[0], partials, done, &total)) *norm = sqrt(total);
}

// Skipped (no change) when *skip_a or *skip_b is not finite. With clip_norm, the gradient is scaled
// by max_norm / (*clip_norm + 1e-6) (in float, as torch's clip_grad_norm_) where that is below 1.
__global__ void adamw_kernel(float* p, float* m, float* v, const float* g, const uint8_t* mask, const double* skip_a,
                             const double* skip_b, const double* clip_norm, double max_norm, int64_t n, float decay,
                             float w1, float b2, float one_minus_b2, float step_size, float bc2s, float eps) {
  if ((skip_a && !isfinite(*skip_a)) || (skip_b && !isfinite(*skip_b))) return;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n || mask[i] == 2) return;
  float gi = g[i];
  if (clip_norm) {
    const double nv = *clip_norm;
    const double coef = max_norm / (nv + 1e-6);
    if (isfinite(nv) && coef < 1.0) gi *= static_cast<float>(coef);
  }
  float pi = p[i] * (mask[i] ? decay : 1.f);
  const float mi = m[i] + w1 * (gi - m[i]);
  const float vi = b2 * v[i] + one_minus_b2 * gi * gi;
  const float denom = sqrtf(vi) / bc2s + eps;
  pi -= step_size * mi / denom;
  p[i] = pi, m[i] = mi, v[i] = vi;
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// About four elements a thread (one round of loads), at most kMaxPartials blocks.
int64_t grad_norm_blocks(int64_t n) {
  const int64_t want = (n + kThreads * 4 - 1) / (kThreads * 4);
  return want < 1 ? 1 : (want > kMaxPartials ? kMaxPartials : want);
}

}  // namespace

int64_t grad_norm_partials(int64_t n) { return grad_norm_blocks(n) + 1; }  // + the blocks' count

void grad_norm_cuda(double* norm, double* partials, const float* g, int64_t n, cudaStream_t stream) {
  const int64_t blocks = grad_norm_blocks(n);
  grad_norm_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      norm, partials, reinterpret_cast<unsigned*>(partials + blocks), g, n);
  CUDA_CHECK(cudaGetLastError());
}

void adamw_step_cuda(float* p, float* m, float* v, const float* g, const uint8_t* decay_mask, const double* skip_a,
                     const double* skip_b, const double* clip_norm, double max_norm, int64_t n, const AdamWArgs& a,
                     cudaStream_t stream) {
  if (n <= 0) return;
  const float decay = static_cast<float>(1.0 - a.lr * a.weight_decay);
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      p, m, v, g, decay_mask, skip_a, skip_b, max_norm > 0 ? clip_norm : nullptr, max_norm, n, decay,
      static_cast<float>(1.0 - a.beta1), static_cast<float>(a.beta2), static_cast<float>(1.0 - a.beta2),
      static_cast<float>(a.lr / a.bc1), static_cast<float>(a.bc2_sqrt), static_cast<float>(a.eps));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sb::cuda
