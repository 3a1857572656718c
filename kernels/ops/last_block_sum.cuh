// last_block_sum.cuh: a block's double tree sum, and a sum of per-block double partials in the same
// launch, shared by the gradient norm (kernels/ops/adamw.cu) and the loss sum (kernels/ops/loss.cu):
// each block publishes its partial, and the last block to finish adds them in a fixed order (the same
// bits whichever block it is) and resets the count for the next launch.
#pragma once
#include <cuda_runtime.h>

namespace sb::cuda {

// sh[0] = sh[0] + ... + sh[THREADS - 1] as a tree (threads t and t + k, k halving), read by every
// thread after it; the caller has filled sh[threadIdx.x].
template <int THREADS>
__device__ void block_tree_sum(double* sh) {
  __syncthreads();
  for (int k = THREADS / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
}

// Called by every thread of a block of THREADS threads (a power of two) with its block's partial
// (thread 0's is the one kept). partials: [gridDim.x] doubles; *done: the finished blocks, 0 between
// launches. Returns true in thread 0 of the last block, with *total = partials[0] + ... as thread i
// adding partials i, i + THREADS, ... in order and the threads' sums added as a tree.
template <int THREADS>
__device__ bool last_block_sum(double block_partial, double* partials, unsigned* done, double* total) {
  __shared__ double sh[THREADS];
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = block_partial;
    __threadfence();  // the partial is visible before the count that announces it
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return false;
  __threadfence();
  const volatile double* p = partials;
  double acc = 0;
  unsigned i = threadIdx.x;
  for (; i + 7 * THREADS < gridDim.x; i += 8 * THREADS) {  // eight loads in flight, added in order
    double x[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) x[u] = p[i + u * THREADS];
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += x[u];
  }
  for (; i < gridDim.x; i += THREADS) acc += p[i];
  sh[threadIdx.x] = acc;
  block_tree_sum<THREADS>(sh);
  if (threadIdx.x != 0) return false;
  *total = sh[0], *done = 0;
  return true;
}

}  // namespace sb::cuda
