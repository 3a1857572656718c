// path_wpath.cu: CUDA kernels of the PaTH projections: the w path (short causal convolution,
// SiLU, L2 normalisation per head) and beta = min(2 sigmoid(z), beta_max), forward and backward.
// Declarations: kernels/ops/ops.hpp; the CPU reference: src/nn/path_wpath.hpp.
#include <cuda_runtime.h>

#include "kernels/ops/ops.hpp"
#include "kernels/ops/launch.cuh"

namespace sb::cuda {
namespace {

using namespace ops_detail;

// ---- PaTH w path: one warp per (b, t, head) ------------------------------------------------------
__global__ void wpath_forward_kernel(float* w, float* conv_out, const float* u, const float* wconv, const float* bias,
                                     int64_t rows, int64_t T, int64_t H, int64_t Dh, float eps) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;  // (b * T + t) * H + h
  if (row >= rows) return;
  const int64_t C = H * Dh, h = row % H, bt = row / H, t = bt % T;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const int64_t c = h * Dh + i;
    float a = bias ? bias[c] : 0.f;
    for (int k = 0; k < 3; ++k) {
      const int64_t src = t - 2 + k;
      if (src >= 0) a += wconv[c * 3 + k] * u[(bt - t + src) * C + c];
    }
    conv_out[bt * C + c] = a;
    const float hv = a * sigmoidf_stable(a);
    w[bt * C + c] = hv;
    ss += hv * hv;
  }
  const float inv = 1.f / sqrtf(warp_sum(ss) + eps);
  for (int64_t i = threadIdx.x; i < Dh; i += 32) w[bt * C + h * Dh + i] *= inv;
}

__global__ void wpath_da_kernel(float* da, const float* dw, const float* conv_out, int64_t rows, int64_t H, int64_t Dh,
                                float eps) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (row >= rows) return;
  const float* a = conv_out + row * Dh;  // [B, T, H * Dh] row-major = rows of Dh
  const float* g = dw + row * Dh;
  float ss = 0.f, hg = 0.f;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const float hv = a[i] * sigmoidf_stable(a[i]);
    ss += hv * hv, hg += hv * g[i];
  }
  const float inv = 1.f / sqrtf(warp_sum(ss) + eps);
  const float wdw = warp_sum(hg) * inv;
  for (int64_t i = threadIdx.x; i < Dh; i += 32) {
    const float sg = sigmoidf_stable(a[i]);
    const float hv = a[i] * sg;
    const float dh = (g[i] - hv * inv * wdw) * inv;
    da[row * Dh + i] = dh * sg * (1.f + a[i] * (1.f - sg));
  }
}

__global__ void wpath_du_kernel(float* du, const float* da, const float* wconv, int64_t N, int64_t T, int64_t C) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * C) return;
  const int64_t c = i % C, n = i / C, t = n % T;
  float acc = 0.f;
  for (int k = 2; k >= 0; --k) {  // u[t] feeds a[t + 2 - k] through tap k
    const int64_t dst = t + 2 - k;
    if (dst < T) acc += wconv[c * 3 + k] * da[(n + 2 - k) * C + c];
  }
  du[i] = acc;
}

// dwconv[c, k] += sum_n da[n, c] u[n - 2 + k, c] (same sequence), dbias[c] += sum_n da[n, c], over the
// rows of chunk blockIdx.y. partial == nullptr: added to dwconv / dbias; else partial[chunk, k, c] =
// the chunk's sum k (k = 3: the bias term), for chunk_sum_kernel over 4 C columns.
__global__ void wpath_param_grad_kernel(float* dwconv, float* dbias, float* partial, const float* da, const float* u,
                                        int64_t N, int64_t T, int64_t C, int64_t rows_per_chunk) {
  __shared__ float part[4][16][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  const int64_t n0 = blockIdx.y * rows_per_chunk, n1 = min(N, n0 + rows_per_chunk);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (c < C)
    for (int64_t n = n0 + threadIdx.y; n < n1; n += 16) {
      const float d = da[n * C + c];
      const int64_t t = n % T;
      for (int k = 0; k < 3; ++k)
        if (t - 2 + k >= 0) acc[k] += d * u[(n - 2 + k) * C + c];
      acc[3] += d;
    }
  for (int k = 0; k < 4; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int k = 0; k < 4; ++k) {
      float s = 0.f;
      for (int i = 0; i < 16; ++i) s += part[k][i][threadIdx.x];
      if (partial)
        partial[(blockIdx.y * 4 + k) * C + c] = s;
      else if (k < 3)
        dwconv[c * 3 + k] += s;
      else if (dbias)
        dbias[c] += s;
    }
  }
}

// The chunked wpath sums: partial[chunk, k, c] in chunk order into dwconv[c, k] and dbias[c].
__global__ void wpath_chunk_sum_kernel(float* dwconv, float* dbias, const float* partial, int64_t chunks, int64_t C) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= 4 * C) return;
  const int64_t k = i / C, c = i % C;
  float s = 0.f;
  for (int64_t ch = 0; ch < chunks; ++ch) s += partial[(ch * 4 + k) * C + c];
  if (k < 3)
    dwconv[c * 3 + k] += s;
  else if (dbias)
    dbias[c] += s;
}

__global__ void beta_forward_kernel(float* beta, const float* z, int64_t n, float beta_max) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) beta[i] = fminf(2.f * sigmoidf_stable(z[i]), beta_max);
}
__global__ void beta_backward_kernel(float* dz, const float* dbeta, const float* z, int64_t n, float beta_max) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float sg = sigmoidf_stable(z[i]);
  dz[i] = 2.f * sg > beta_max ? 0.f : dbeta[i] * 2.f * sg * (1.f - sg);
}

}  // namespace

using namespace ops_detail;

void path_wpath_forward_cuda(float* w, float* conv_out, const float* u, const float* wconv, const float* bias,
                             int64_t B, int64_t T, int64_t H, int64_t Dh, float eps, cudaStream_t stream) {
  const int64_t rows = B * T * H;
  if (rows <= 0) return;
  wpath_forward_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(w, conv_out, u, wconv,
                                                                                              bias, rows, T, H, Dh, eps);
  SB_CUDA_CHECK_LAUNCH();
}

void path_wpath_backward_cuda(float* du, float* dwconv, float* dbias, float* da_scratch, const float* dw,
                              const float* conv_out, const float* u, const float* wconv, int64_t B, int64_t T,
                              int64_t H, int64_t Dh, float eps, cudaStream_t stream, ReduceScratch scratch) {
  const int64_t rows = B * T * H, N = B * T, C = H * Dh;
  if (rows <= 0) return;
  wpath_da_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(da_scratch, dw, conv_out,
                                                                                         rows, H, Dh, eps);
  SB_CUDA_CHECK_LAUNCH();
  if (du) {
    wpath_du_kernel<<<blocks_for(N * C), kThreads, 0, stream>>>(du, da_scratch, wconv, N, T, C);
    SB_CUDA_CHECK_LAUNCH();
  }
  if (dwconv) {
    const int64_t chunks = reduce_chunks(N, 4 * C, scratch), rows_per = (N + chunks - 1) / chunks;
    float* partial = chunks > 1 ? scratch.data : nullptr;
    wpath_param_grad_kernel<<<dim3(blocks_for(C, 32), static_cast<unsigned>(chunks)), dim3(32, 16), 0, stream>>>(
        dwconv, dbias, partial, da_scratch, u, N, T, C, rows_per);
    SB_CUDA_CHECK_LAUNCH();
    if (partial) {
      wpath_chunk_sum_kernel<<<blocks_for(4 * C), kThreads, 0, stream>>>(dwconv, dbias, partial, chunks, C);
      SB_CUDA_CHECK_LAUNCH();
    }
  }
}

void path_beta_forward_cuda(float* beta, const float* z, int64_t n, float beta_max, cudaStream_t stream) {
  if (n <= 0) return;
  beta_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(beta, z, n, beta_max);
  SB_CUDA_CHECK_LAUNCH();
}

void path_beta_backward_cuda(float* dz, const float* dbeta, const float* z, int64_t n, float beta_max,
                             cudaStream_t stream) {
  if (n <= 0) return;
  beta_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dz, dbeta, z, n, beta_max);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace sb::cuda
