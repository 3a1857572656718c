// loss.cu: softmax cross-entropy over the labelled rows of the head (forward, with its double loss
// sum of block partials added by the last block; backward; a label < 0 is a padding row: loss and
// gradient 0) and row argmax. Rows of up to 1024 logits: one warp per row, the row held in registers
// (one read of the logits); longer rows: one block per row. Fixed reduction orders throughout
// (deterministic). API: kernels/ops/ops.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "kernels/ops/last_block_sum.cuh"
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

// The loss sum (sums: [2 + M] doubles, crossentropy_sum_doubles): block b's partial (its rows'
// losses added in row order, warp by warp) into sums[2 + b]; the last block of the launch to finish
// (counted in sums[1]) adds the partials into sums[0] (last_block_sum: a fixed order).
__device__ void loss_sum_blocks(double* sums, double block_partial) {
  double total;
  if (last_block_sum<kThreads>(block_partial, sums + 2, reinterpret_cast<unsigned*>(sums + 1), &total)) sums[0] = total;
}

__global__ void ce_forward_kernel(float* losses, double* loss_sum, const float* logits, const int32_t* labels,
                                  int64_t V) {
  __shared__ float sh[kThreads];
  const float* x = logits + blockIdx.x * V;
  float m = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, x[v]);
  m = block_max(m, sh);
  float s = 0.f;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) s += expf(x[v] - m);
  s = block_sum(s, sh);
  const int32_t label = labels[blockIdx.x];
  const float loss = label < 0 ? 0.f : logf(s) - (x[label] - m);
  if (threadIdx.x == 0) losses[blockIdx.x] = loss;
  if (loss_sum) loss_sum_blocks(loss_sum, static_cast<double>(loss));  // one row a block
}

__global__ void ce_backward_kernel(float* dlogits, const float* logits, const int32_t* labels, int64_t V, float scale) {
  __shared__ float sh[kThreads];
  const float* x = logits + blockIdx.x * V;
  float* dx = dlogits + blockIdx.x * V;
  const int32_t label = labels[blockIdx.x];
  if (label < 0) {  // padding: no gradient
    for (int64_t v = threadIdx.x; v < V; v += kThreads) dx[v] = 0.f;
    return;
  }
  float m = -FLT_MAX;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, x[v]);
  m = block_max(m, sh);
  float s = 0.f;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) s += expf(x[v] - m);
  s = block_sum(s, sh);
  const float w = scale / s;
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


// ---- one warp per row (V <= 32 K): lane l holds logits l, l + 32, ..., l + 32 (K - 1) ------------
constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum_f(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Loads row m into v[] (-FLT_MAX past V) and returns its max and sum of exp(x - max) (all lanes).
template <int K>
__device__ __forceinline__ void warp_row_stats(float (&v)[K], const float* x, int V, int lane, float& m, float& s) {
#pragma unroll
  for (int j = 0; j < K; ++j) v[j] = lane + 32 * j < V ? x[lane + 32 * j] : -FLT_MAX;
  m = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < K; ++j) m = fmaxf(m, v[j]);
  m = warp_max(m);
  s = 0.f;
#pragma unroll
  for (int j = 0; j < K; ++j)
    if (lane + 32 * j < V) s += expf(v[j] - m);
  s = warp_sum_f(s);
}

// The whole warp takes the same rows (the loop bound is per warp): full-mask shuffles are safe.
template <int K>
__global__ void ce_forward_warp_kernel(float* losses, double* loss_sum, const float* logits, const int32_t* labels,
                                       int64_t M, int V) {
  __shared__ double warp_sums[kWarpsPerBlock];
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  double acc = 0;  // lane 0: this warp's rows, in order
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + (threadIdx.x >> 5); row < M; row += warps) {
    const float* x = logits + row * V;
    float v[K], m, s;
    warp_row_stats<K>(v, x, V, lane, m, s);
    const int label = labels[row];
    const float loss = label < 0 ? 0.f : logf(s) - (x[label] - m);
    if (lane == 0) losses[row] = loss, acc += static_cast<double>(loss);
  }
  if (!loss_sum) return;
  if (lane == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  double block = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kWarpsPerBlock; ++w) block += warp_sums[w];
  loss_sum_blocks(loss_sum, block);
}

template <int K>
__global__ void ce_backward_warp_kernel(float* dlogits, const float* logits, const int32_t* labels, int64_t M, int V,
                                        float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + (threadIdx.x >> 5); row < M; row += warps) {
    float v[K], m, s;
    warp_row_stats<K>(v, logits + row * V, V, lane, m, s);
    const int label = labels[row];
    const float w = label < 0 ? 0.f : scale / s, hot = label < 0 ? 0.f : scale;  // padding: no gradient
    float* dx = dlogits + row * V;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int c = lane + 32 * j;
      if (c < V) dx[c] = w * expf(v[j] - m) - (c == label ? hot : 0.f);
    }
  }
}

// First index of the row maximum: each lane scans its columns in increasing order, then the lanes'
// (value, index) pairs are merged keeping the larger value, the smaller index on ties.
template <int K>
__global__ void argmax_warp_kernel(int32_t* out, const float* logits, int64_t M, int V) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + (threadIdx.x >> 5); row < M; row += warps) {
    const float* x = logits + row * V;
    float best = -FLT_MAX;
    int bi = V;  // V = "none yet"
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int c = lane + 32 * j;
      if (c < V) {
        const float xv = x[c];
        if (bi == V || xv > best) best = xv, bi = c;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi != V && (bi == V || ov > best || (ov == best && oi < bi))) best = ov, bi = oi;
    }
    if (lane == 0) out[row] = bi;
  }
}

// Launches kernel<K> for the smallest K in {2, 8, 32} with V <= 32 K; false when V > 1024.
template <class Launch>
bool with_row_width(int64_t V, Launch&& launch) {
  if (V <= 64) return launch(std::integral_constant<int, 2>{}), true;
  if (V <= 256) return launch(std::integral_constant<int, 8>{}), true;
  if (V <= 1024) return launch(std::integral_constant<int, 32>{}), true;
  return false;
}
// Blocks of kWarpsPerBlock warps, one row per warp; rows beyond 2^20 blocks are taken in a warp-stride loop.
unsigned warp_row_blocks(int64_t M) {
  return static_cast<unsigned>(std::min<int64_t>((M + kWarpsPerBlock - 1) / kWarpsPerBlock, int64_t{1} << 20));
}

}  // namespace

int64_t crossentropy_sum_doubles(int64_t M) { return 2 + std::max<int64_t>(M, 1); }

void crossentropy_forward_cuda(float* losses, double* loss_sum, const float* logits, const int32_t* labels, int64_t M,
                               int64_t V, cudaStream_t stream) {
  if (M <= 0) {
    if (loss_sum) CUDA_CHECK(cudaMemsetAsync(loss_sum, 0, sizeof(double), stream));
    return;
  }
  const bool warp_rows = with_row_width(V, [&](auto k) {
    ce_forward_warp_kernel<decltype(k)::value><<<warp_row_blocks(M), 32 * kWarpsPerBlock, 0, stream>>>(
        losses, loss_sum, logits, labels, M, static_cast<int>(V));
  });
  if (!warp_rows)
    ce_forward_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(losses, loss_sum, logits, labels, V);
  CUDA_CHECK(cudaGetLastError());
}

void crossentropy_backward_cuda(float* dlogits, const float* logits, const int32_t* labels, int64_t M, int64_t V,
                                float scale, cudaStream_t stream) {
  if (M <= 0) return;
  const bool warp_rows = with_row_width(V, [&](auto k) {
    ce_backward_warp_kernel<decltype(k)::value><<<warp_row_blocks(M), 32 * kWarpsPerBlock, 0, stream>>>(
        dlogits, logits, labels, M, static_cast<int>(V), scale);
  });
  if (!warp_rows)
    ce_backward_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(dlogits, logits, labels, V, scale);
  CUDA_CHECK(cudaGetLastError());
}

void argmax_rows_cuda(int32_t* argmax, const float* logits, int64_t M, int64_t V, cudaStream_t stream) {
  if (M <= 0) return;
  const bool warp_rows = with_row_width(V, [&](auto k) {
    argmax_warp_kernel<decltype(k)::value><<<warp_row_blocks(M), 32 * kWarpsPerBlock, 0, stream>>>(
        argmax, logits, M, static_cast<int>(V));
  });
  if (!warp_rows) argmax_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(argmax, logits, V);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sb::cuda
