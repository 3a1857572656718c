// norm.cu: RMSNorm and LayerNorm on the device, one warp per row: the forwards (fp32 output, or
// bf16 for kernels/ops/ops_bf16.hpp, the same kernels) and the backwards, which add into dinp with its bf16 copy
// and sum the weight (and bias) gradients in the same pass, per chunk of rows through the ReduceScratch
// and then in chunk order (no atomics: deterministic). Declarations: kernels/ops/ops.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/ops/ops_bf16.hpp"
#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

template <class O>
__global__ void rmsnorm_forward_kernel(O* out, float* rstd, const float* inp, const float* weight, int64_t N,
                                       int64_t D, double eps) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const float* x = inp + n * D;
  float ss = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) ss += x[d] * x[d];
  ss = warp_sum(ss);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / static_cast<double>(D) + eps));
  if (threadIdx.x == 0) rstd[n] = r;
  for (int64_t d = threadIdx.x; d < D; d += 32) store_rn(out + n * D + d, x[d] * r * weight[d]);
}

// dinp[i] = v, or += v when accumulating (__fadd_rn: not contracted into an FMA with v's last
// product, so the sum equals adding the overwritten result); dinp16 (nullable) gets bf16 of it.
__device__ __forceinline__ void store_dinp(float* dinp, uint16_t* dinp16, int64_t i, float v, bool accumulate) {
  if (accumulate) v = __fadd_rn(dinp[i], v);
  dinp[i] = v;
  if (dinp16) dinp16[i] = bf16_bits(v);
}

template <class O>
__global__ void layernorm_forward_kernel(O* out, float* mean, float* rstd, const float* inp, const float* weight,
                                         const float* bias, int64_t N, int64_t D, double eps) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const float* x = inp + n * D;
  float s = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) s += x[d];
  const float m = warp_sum(s) / static_cast<float>(D);
  float v = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) v += (x[d] - m) * (x[d] - m);
  v = warp_sum(v);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(v) / static_cast<double>(D) + eps));
  if (threadIdx.x == 0) mean[n] = m, rstd[n] = r;
  for (int64_t d = threadIdx.x; d < D; d += 32) store_rn(out + n * D + d, (x[d] - m) * r * weight[d] + bias[d]);
}

template <class O>
void rmsnorm_forward(O* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t D, double eps,
                     cudaStream_t stream) {
  if (N <= 0) return;
  rmsnorm_forward_kernel<<<blocks_for(N, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(out, rstd, inp, weight,
                                                                                              N, D, eps);
  SB_CUDA_CHECK_LAUNCH();
}

template <class O>
void layernorm_forward(O* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       int64_t N, int64_t D, double eps, cudaStream_t stream) {
  if (N <= 0) return;
  layernorm_forward_kernel<<<blocks_for(N, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, D, eps);
  SB_CUDA_CHECK_LAUNCH();
}
// Norm backward, one warp per row (kMode 1: RMSNorm, 2: LayerNorm): dinp = or += the input gradient,
// dinp16 (nullable) its bf16 copy. Without partials (part_w null) CTA c takes rows 8c .. 8c + 7. With
// them CTA c owns rows [c rows_per_chunk, (c + 1) rows_per_chunk), its warps take them in turn and
// each lane adds its columns' weight-gradient terms dy (x - mu) r (LayerNorm's bias terms dy into a
// second array) to its warp's row of shared memory; the CTA then writes the sum of its warps' rows,
// in warp order, to part_w[c, :] (part_b[c, :]). Fixed order: deterministic.
template <int kMode>
__global__ void norm_backward_kernel(float* dinp, uint16_t* dinp16, bool accumulate, float* part_w, float* part_b,
                                     const float* dout, const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int64_t N, int64_t D, int64_t rows_per_chunk) {
  extern __shared__ float sums[];  // [kRowsPerBlock][D] weight terms, then [kRowsPerBlock][D] bias terms
  const int warp = threadIdx.y, lane = threadIdx.x;
  const bool partials = part_w != nullptr, bias = kMode == 2 && part_b != nullptr;
  float* sw = sums + warp * D;
  float* sb = sums + (kRowsPerBlock + warp) * D;
  if (partials)
    for (int64_t d = lane; d < D; d += 32) {
      sw[d] = 0.f;
      if (bias) sb[d] = 0.f;
    }
  const int64_t n0 = blockIdx.x * rows_per_chunk, n1 = min(N, n0 + rows_per_chunk);
  for (int64_t n = n0 + warp; n < n1; n += kRowsPerBlock) {
    const float* x = inp + n * D;
    const float* dy = dout + n * D;
    const float r = rstd[n], m = kMode == 2 ? mean[n] : 0.f;
    if constexpr (kMode == 1) {
      float gx = 0.f;
      for (int64_t d = lane; d < D; d += 32) gx += dy[d] * weight[d] * x[d];
      const float mean_gx = warp_sum(gx) * r / static_cast<float>(D);
      for (int64_t d = lane; d < D; d += 32) {
        store_dinp(dinp, dinp16, n * D + d, r * (dy[d] * weight[d] - x[d] * (r * mean_gx)), accumulate);
        if (partials) sw[d] += dy[d] * (x[d] * r);
      }
    } else {
      float sg = 0.f, sgx = 0.f;
      for (int64_t d = lane; d < D; d += 32) {
        const float g = dy[d] * weight[d];
        sg += g, sgx += g * ((x[d] - m) * r);
      }
      const float mean_g = warp_sum(sg) / static_cast<float>(D);
      const float mean_gx = warp_sum(sgx) / static_cast<float>(D);
      for (int64_t d = lane; d < D; d += 32) {
        const float xh = (x[d] - m) * r;
        store_dinp(dinp, dinp16, n * D + d, r * (dy[d] * weight[d] - mean_g - xh * mean_gx), accumulate);
        if (partials) sw[d] += dy[d] * xh;
        if (bias) sb[d] += dy[d];
      }
    }
  }
  if (!partials) return;
  __syncthreads();
  for (int64_t d = warp * 32 + lane; d < D; d += 32 * kRowsPerBlock) {
    float s = 0.f, t = 0.f;
    for (int w = 0; w < kRowsPerBlock; ++w) {
      s += sums[w * D + d];
      if (bias) t += sums[(kRowsPerBlock + w) * D + d];
    }
    part_w[blockIdx.x * D + d] = s;
    if (bias) part_b[blockIdx.x * D + d] = t;
  }
}

// Row chunks of the fused parameter-gradient sums (0: not fused): with a scratch of `arrays` partial
// rows per chunk, and the CTA's shared rows within the default 48 KB; about 32 rows per chunk, at most
// 1024 chunks (one wave of 8-warp CTAs on an H100 at the MQRAR shape, N = 49152).
int64_t norm_chunks(int64_t N, int64_t D, int64_t arrays, ReduceScratch scratch) {
  if (!scratch.data || arrays * kRowsPerBlock * D * static_cast<int64_t>(sizeof(float)) > 48 * 1024) return 0;
  return std::max<int64_t>(1, std::min<int64_t>({N / 32, scratch.floats / (arrays * D), 1024}));
}

// The backward launch: fused sums when dweight (and LayerNorm's dbias) are asked for and fit the
// scratch; otherwise column sums (colsum) and the per-row kernel.
template <int kMode>
void norm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                   const float* mean, const float* rstd, int64_t N, int64_t D, cudaStream_t stream,
                   ReduceScratch scratch, bool accumulate, uint16_t* dinp_bf16) {
  if (N <= 0) return;
  const int64_t chunks = dweight && (kMode == 1 || dbias) ? norm_chunks(N, D, kMode, scratch) : 0;
  if (chunks > 0) {
    float* part_b = kMode == 2 ? scratch.data + chunks * D : nullptr;
    const int64_t rows = (N + chunks - 1) / chunks;
    const size_t smem = static_cast<size_t>(kMode * kRowsPerBlock * D) * sizeof(float);
    norm_backward_kernel<kMode><<<static_cast<unsigned>(chunks), dim3(32, kRowsPerBlock), smem, stream>>>(
        dinp, dinp_bf16, accumulate, scratch.data, part_b, dout, inp, weight, mean, rstd, N, D, rows);
    SB_CUDA_CHECK_LAUNCH();
    chunk_sum(dweight, scratch.data, chunks, D, stream);
    if (part_b) chunk_sum(dbias, part_b, chunks, D, stream);
    return;
  }
  if (dweight) colsum(dweight, dout, inp, mean, rstd, N, D, kMode, stream, scratch);
  if (dbias) colsum(dbias, dout, nullptr, nullptr, nullptr, N, D, 0, stream, scratch);
  norm_backward_kernel<kMode><<<blocks_for(N, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(
      dinp, dinp_bf16, accumulate, nullptr, nullptr, dout, inp, weight, mean, rstd, N, D, kRowsPerBlock);
  SB_CUDA_CHECK_LAUNCH();
}
}  // namespace

void rmsnorm_forward_cuda(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t D,
                          double eps, cudaStream_t stream) {
  rmsnorm_forward(out, rstd, inp, weight, N, D, eps, stream);
}

void rmsnorm_forward_bf16_cuda(uint16_t* out, float* rstd, const float* inp, const float* weight, int64_t N,
                               int64_t D, double eps, cudaStream_t stream) {
  rmsnorm_forward(out, rstd, inp, weight, N, D, eps, stream);
}

void rmsnorm_backward_cuda(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                           const float* rstd, int64_t N, int64_t D, cudaStream_t stream, ReduceScratch scratch,
                           bool accumulate, uint16_t* dinp_bf16) {
  norm_backward<1>(dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd, N, D, stream, scratch, accumulate,
                   dinp_bf16);
}

void layernorm_forward_cuda(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                            const float* bias, int64_t N, int64_t D, double eps, cudaStream_t stream) {
  layernorm_forward(out, mean, rstd, inp, weight, bias, N, D, eps, stream);
}

void layernorm_forward_bf16_cuda(uint16_t* out, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, int64_t N, int64_t D, double eps, cudaStream_t stream) {
  layernorm_forward(out, mean, rstd, inp, weight, bias, N, D, eps, stream);
}

void layernorm_backward_cuda(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                             const float* weight, const float* mean, const float* rstd, int64_t N, int64_t D,
                             cudaStream_t stream, ReduceScratch scratch, bool accumulate, uint16_t* dinp_bf16) {
  norm_backward<2>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, D, stream, scratch, accumulate, dinp_bf16);
}

}  // namespace sb::cuda
