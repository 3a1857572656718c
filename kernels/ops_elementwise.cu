// ops_elementwise.cu: CUDA kernels for the dense per-token ops of the model (embedding, RMSNorm,
// LayerNorm, activations, SwiGLU, RoPE, PaTH w path and beta, residual adds, bias, row gather /
// scatter). Declarations and gradient conventions: kernels/ops_cuda.hpp. Parameter gradients are
// reduced over rows with fixed-order column sums (no atomics), so every result is deterministic.
#include <cuda_runtime.h>

#include "kernels/ops_cuda.hpp"

namespace sb::cuda {
namespace {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}
inline void check_launch() { CUDA_CHECK(cudaGetLastError()); }

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float sigmoidf_stable(float x) {
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}

// ---- embedding ---------------------------------------------------------------------------------
__global__ void embedding_forward_kernel(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t D) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < N * D) out[i] = wte[static_cast<int64_t>(ids[i / D]) * D + i % D];
}

constexpr int kIdChunk = 1024;
__global__ void embedding_backward_kernel(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t D,
                                          int buckets) {
  __shared__ int32_t sid[kIdChunk];
  const int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int bucket = blockIdx.y;
  for (int64_t base = 0; base < N; base += kIdChunk) {
    const int cnt = static_cast<int>(min(static_cast<int64_t>(kIdChunk), N - base));
    __syncthreads();
    for (int i = threadIdx.x; i < cnt; i += blockDim.x) sid[i] = ids[base + i];
    __syncthreads();
    if (d >= D) continue;
    for (int i = 0; i < cnt; ++i) {
      const int id = sid[i];
      if (id % buckets == bucket) dwte[static_cast<int64_t>(id) * D + d] += dout[(base + i) * D + d];
    }
  }
}

// ---- column sums (parameter gradients of norms and biases) ---------------------------------------
// out[d] += sum_n term(n, d); mode 0: a[n, d]; 1: a[n, d] * b[n, d] * r[n];
// 2: a[n, d] * (b[n, d] - mu[n]) * r[n]. Block (32, 16): columns x rows, fixed reduction order.
__global__ void colsum_kernel(float* out, const float* a, const float* b, const float* mu, const float* r, int64_t N,
                              int64_t D, int mode) {
  __shared__ float part[16][33];
  const int64_t d = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (d < D)
    for (int64_t n = threadIdx.y; n < N; n += 16) {
      const float x = a[n * D + d];
      if (mode == 0)
        acc += x;
      else if (mode == 1)
        acc += x * b[n * D + d] * r[n];
      else
        acc += x * ((b[n * D + d] - mu[n]) * r[n]);
    }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && d < D) {
    float s = 0.f;
    for (int i = 0; i < 16; ++i) s += part[i][threadIdx.x];
    out[d] += s;
  }
}

void colsum(float* out, const float* a, const float* b, const float* mu, const float* r, int64_t N, int64_t D,
            int mode, cudaStream_t stream) {
  if (N <= 0 || D <= 0) return;
  colsum_kernel<<<blocks_for(D, 32), dim3(32, 16), 0, stream>>>(out, a, b, mu, r, N, D, mode);
  check_launch();
}

// ---- norms: one warp per row -------------------------------------------------------------------
constexpr int kRowsPerBlock = 8;

__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                                       int64_t D, double eps) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const float* x = inp + n * D;
  float ss = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) ss += x[d] * x[d];
  ss = warp_sum(ss);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / static_cast<double>(D) + eps));
  if (threadIdx.x == 0) rstd[n] = r;
  for (int64_t d = threadIdx.x; d < D; d += 32) out[n * D + d] = x[d] * r * weight[d];
}

__global__ void rmsnorm_backward_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                        const float* rstd, int64_t N, int64_t D) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const float* x = inp + n * D;
  const float* dy = dout + n * D;
  const float r = rstd[n];
  float gx = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) gx += dy[d] * weight[d] * x[d];
  gx = warp_sum(gx);
  const float mean_gx = gx * r / static_cast<float>(D);
  for (int64_t d = threadIdx.x; d < D; d += 32) dinp[n * D + d] = r * (dy[d] * weight[d] - x[d] * (r * mean_gx));
}

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp, const float* weight,
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
  for (int64_t d = threadIdx.x; d < D; d += 32) out[n * D + d] = (x[d] - m) * r * weight[d] + bias[d];
}

__global__ void layernorm_backward_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                          const float* mean, const float* rstd, int64_t N, int64_t D) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.y;
  if (n >= N) return;
  const float* x = inp + n * D;
  const float* dy = dout + n * D;
  const float m = mean[n], r = rstd[n];
  float sg = 0.f, sgx = 0.f;
  for (int64_t d = threadIdx.x; d < D; d += 32) {
    const float g = dy[d] * weight[d];
    sg += g, sgx += g * ((x[d] - m) * r);
  }
  const float mean_g = warp_sum(sg) / static_cast<float>(D);
  const float mean_gx = warp_sum(sgx) / static_cast<float>(D);
  for (int64_t d = threadIdx.x; d < D; d += 32)
    dinp[n * D + d] = r * (dy[d] * weight[d] - mean_g - ((x[d] - m) * r) * mean_gx);
}

// ---- activations -------------------------------------------------------------------------------
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

template <int A>
__global__ void act_forward_kernel(float* out, const float* inp, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  if constexpr (A == 0) out[i] = x / (1.f + expf(-x));
  if constexpr (A == 1) out[i] = 0.5f * x * (1.f + erff(x * kInvSqrt2));
  if constexpr (A == 2) out[i] = 1.f / (1.f + expf(-x));
  if constexpr (A == 3) out[i] = fminf(x, 0.f) - log1pf(expf(-fabsf(x)));
}

template <int A>
__global__ void act_backward_kernel(float* dinp, const float* dout, const float* inp, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i], dy = dout[i];
  if constexpr (A == 0) {
    const float s = 1.f / (1.f + expf(-x));
    dinp[i] = dy * s * (1.f + x * (1.f - s));
  }
  if constexpr (A == 1) {
    const float cdf = 0.5f * (1.f + erff(x * kInvSqrt2));
    dinp[i] = dy * (cdf + x * kInvSqrt2Pi * expf(-0.5f * x * x));
  }
  if constexpr (A == 2) {
    const float s = 1.f / (1.f + expf(-x));
    dinp[i] = dy * s * (1.f - s);
  }
  if constexpr (A == 3) dinp[i] = dy / (1.f + expf(x));
}

__global__ void swiglu_forward_kernel(float* out, const float* inp, int64_t N, int64_t F) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * F) return;
  const int64_t r = i / F, f = i % F;
  const float g = inp[r * 2 * F + f], u = inp[r * 2 * F + F + f];
  out[i] = g / (1.f + expf(-g)) * u;
}

__global__ void swiglu_backward_kernel(float* dinp, const float* dout, const float* inp, int64_t N, int64_t F) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * F) return;
  const int64_t r = i / F, f = i % F;
  const float g = inp[r * 2 * F + f], u = inp[r * 2 * F + F + f], dy = dout[i];
  const float s = 1.f / (1.f + expf(-g));
  dinp[r * 2 * F + f] = dy * u * s * (1.f + g * (1.f - s));
  dinp[r * 2 * F + F + f] = dy * g * s;
}

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
__global__ void accumulate_kernel(float* dst, const float* src, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] += src[i];
}
__global__ void add_bias_kernel(float* out, const float* bias, int64_t N, int64_t O) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < N * O) out[i] += bias[i % O];
}

// ---- RoPE --------------------------------------------------------------------------------------
template <bool kInverse>
__global__ void rope_kernel(float* out, const float* inp, int64_t B, int64_t T, int64_t H, int64_t Dh, double theta) {
  const int64_t half = Dh / 2;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= B * T * H * half) return;
  const int64_t m = i % half, row = i / half;  // row = (b * T + t) * H + h
  const int64_t t = (row / H) % T;
  const double a = static_cast<double>(t) * pow(theta, -2.0 * static_cast<double>(m) / static_cast<double>(Dh));
  const float c = static_cast<float>(cos(a)), s = static_cast<float>(sin(a));
  const int64_t base = row * Dh;
  const float x1 = inp[base + m], x2 = inp[base + m + half];
  if constexpr (kInverse) {
    out[base + m] = x1 * c + x2 * s;
    out[base + m + half] = x2 * c - x1 * s;
  } else {
    out[base + m] = x1 * c - x2 * s;
    out[base + m + half] = x2 * c + x1 * s;
  }
}

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

// dwconv[c, k] += sum_n da[n, c] u[n - 2 + k, c] (same sequence), dbias[c] += sum_n da[n, c].
__global__ void wpath_param_grad_kernel(float* dwconv, float* dbias, const float* da, const float* u, int64_t N,
                                        int64_t T, int64_t C) {
  __shared__ float part[4][16][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (c < C)
    for (int64_t n = threadIdx.y; n < N; n += 16) {
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
      if (k < 3)
        dwconv[c * 3 + k] += s;
      else if (dbias)
        dbias[c] += s;
    }
  }
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

__global__ void gather_rows_kernel(float* out, const float* inp, const int32_t* rows, int64_t M, int64_t D) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < M * D) out[i] = inp[static_cast<int64_t>(rows[i / D]) * D + i % D];
}
__global__ void scatter_rows_kernel(float* out, const float* inp, const int32_t* rows, int64_t M, int64_t D) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < M * D) out[static_cast<int64_t>(rows[i / D]) * D + i % D] = inp[i];
}

}  // namespace

// ---- host wrappers ------------------------------------------------------------------------------
void embedding_forward_cuda(float* out, const int32_t* ids, const float* wte, int64_t N, int64_t V, int64_t D,
                            cudaStream_t stream) {
  if (N <= 0) return;
  embedding_forward_kernel<<<blocks_for(N * D), kThreads, 0, stream>>>(out, ids, wte, N, D);
  check_launch();
}

void embedding_backward_cuda(float* dwte, const float* dout, const int32_t* ids, int64_t N, int64_t V, int64_t D,
                             cudaStream_t stream) {
  if (N <= 0) return;
  const int buckets = static_cast<int>(V < 128 ? V : 128);
  embedding_backward_kernel<<<dim3(blocks_for(D, 128), buckets), 128, 0, stream>>>(dwte, dout, ids, N, D, buckets);
  check_launch();
}

void rmsnorm_forward_cuda(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t D,
                          double eps, cudaStream_t stream) {
  if (N <= 0) return;
  rmsnorm_forward_kernel<<<blocks_for(N, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(out, rstd, inp, weight,
                                                                                              N, D, eps);
  check_launch();
}

void rmsnorm_backward_cuda(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                           const float* rstd, int64_t N, int64_t D, cudaStream_t stream) {
  if (N <= 0) return;
  if (dweight) colsum(dweight, dout, inp, nullptr, rstd, N, D, 1, stream);
  rmsnorm_backward_kernel<<<blocks_for(N, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(dinp, dout, inp, weight,
                                                                                               rstd, N, D);
  check_launch();
}

void layernorm_forward_cuda(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                            const float* bias, int64_t N, int64_t D, double eps, cudaStream_t stream) {
  if (N <= 0) return;
  layernorm_forward_kernel<<<blocks_for(N, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, D, eps);
  check_launch();
}

void layernorm_backward_cuda(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                             const float* weight, const float* mean, const float* rstd, int64_t N, int64_t D,
                             cudaStream_t stream) {
  if (N <= 0) return;
  if (dweight) colsum(dweight, dout, inp, mean, rstd, N, D, 2, stream);
  if (dbias) colsum(dbias, dout, nullptr, nullptr, nullptr, N, D, 0, stream);
  layernorm_backward_kernel<<<blocks_for(N, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, D);
  check_launch();
}

void act_forward_cuda(Act act, float* out, const float* inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  switch (act) {
    case Act::silu: act_forward_kernel<0><<<blocks_for(n), kThreads, 0, stream>>>(out, inp, n); break;
    case Act::gelu: act_forward_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(out, inp, n); break;
    case Act::sigmoid: act_forward_kernel<2><<<blocks_for(n), kThreads, 0, stream>>>(out, inp, n); break;
    case Act::logsigmoid: act_forward_kernel<3><<<blocks_for(n), kThreads, 0, stream>>>(out, inp, n); break;
  }
  check_launch();
}

void act_backward_cuda(Act act, float* dinp, const float* dout, const float* inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  switch (act) {
    case Act::silu: act_backward_kernel<0><<<blocks_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n); break;
    case Act::gelu: act_backward_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n); break;
    case Act::sigmoid: act_backward_kernel<2><<<blocks_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n); break;
    case Act::logsigmoid: act_backward_kernel<3><<<blocks_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n); break;
  }
  check_launch();
}

void swiglu_forward_cuda(float* out, const float* inp, int64_t N, int64_t F, cudaStream_t stream) {
  if (N * F <= 0) return;
  swiglu_forward_kernel<<<blocks_for(N * F), kThreads, 0, stream>>>(out, inp, N, F);
  check_launch();
}

void swiglu_backward_cuda(float* dinp, const float* dout, const float* inp, int64_t N, int64_t F, cudaStream_t stream) {
  if (N * F <= 0) return;
  swiglu_backward_kernel<<<blocks_for(N * F), kThreads, 0, stream>>>(dinp, dout, inp, N, F);
  check_launch();
}

void add_cuda(float* out, const float* a, const float* b, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, n);
  check_launch();
}

void accumulate_cuda(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  accumulate_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  check_launch();
}

void add_bias_cuda(float* out, const float* bias, int64_t N, int64_t O, cudaStream_t stream) {
  if (N * O <= 0) return;
  add_bias_kernel<<<blocks_for(N * O), kThreads, 0, stream>>>(out, bias, N, O);
  check_launch();
}

void bias_backward_cuda(float* dbias, const float* dout, int64_t N, int64_t O, cudaStream_t stream) {
  colsum(dbias, dout, nullptr, nullptr, nullptr, N, O, 0, stream);
}

void rope_forward_cuda(float* out, const float* inp, int64_t B, int64_t T, int64_t H, int64_t Dh, double theta,
                       cudaStream_t stream) {
  const int64_t n = B * T * H * (Dh / 2);
  if (n <= 0) return;
  rope_kernel<false><<<blocks_for(n), kThreads, 0, stream>>>(out, inp, B, T, H, Dh, theta);
  check_launch();
}

void rope_backward_cuda(float* dinp, const float* dout, int64_t B, int64_t T, int64_t H, int64_t Dh, double theta,
                        cudaStream_t stream) {
  const int64_t n = B * T * H * (Dh / 2);
  if (n <= 0) return;
  rope_kernel<true><<<blocks_for(n), kThreads, 0, stream>>>(dinp, dout, B, T, H, Dh, theta);
  check_launch();
}

void path_wpath_forward_cuda(float* w, float* conv_out, const float* u, const float* wconv, const float* bias,
                             int64_t B, int64_t T, int64_t H, int64_t Dh, float eps, cudaStream_t stream) {
  const int64_t rows = B * T * H;
  if (rows <= 0) return;
  wpath_forward_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(w, conv_out, u, wconv,
                                                                                              bias, rows, T, H, Dh, eps);
  check_launch();
}

void path_wpath_backward_cuda(float* du, float* dwconv, float* dbias, float* da_scratch, const float* dw,
                              const float* conv_out, const float* u, const float* wconv, int64_t B, int64_t T,
                              int64_t H, int64_t Dh, float eps, cudaStream_t stream) {
  const int64_t rows = B * T * H, N = B * T, C = H * Dh;
  if (rows <= 0) return;
  wpath_da_kernel<<<blocks_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream>>>(da_scratch, dw, conv_out,
                                                                                         rows, H, Dh, eps);
  check_launch();
  if (du) {
    wpath_du_kernel<<<blocks_for(N * C), kThreads, 0, stream>>>(du, da_scratch, wconv, N, T, C);
    check_launch();
  }
  if (dwconv) {
    wpath_param_grad_kernel<<<blocks_for(C, 32), dim3(32, 16), 0, stream>>>(dwconv, dbias, da_scratch, u, N, T, C);
    check_launch();
  }
}

void path_beta_forward_cuda(float* beta, const float* z, int64_t n, float beta_max, cudaStream_t stream) {
  if (n <= 0) return;
  beta_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(beta, z, n, beta_max);
  check_launch();
}

void path_beta_backward_cuda(float* dz, const float* dbeta, const float* z, int64_t n, float beta_max,
                             cudaStream_t stream) {
  if (n <= 0) return;
  beta_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dz, dbeta, z, n, beta_max);
  check_launch();
}

void gather_rows_cuda(float* out, const float* inp, const int32_t* rows, int64_t M, int64_t D, cudaStream_t stream) {
  if (M * D <= 0) return;
  gather_rows_kernel<<<blocks_for(M * D), kThreads, 0, stream>>>(out, inp, rows, M, D);
  check_launch();
}

void scatter_rows_cuda(float* out, const float* inp, const int32_t* rows, int64_t M, int64_t D, cudaStream_t stream) {
  if (M * D <= 0) return;
  scatter_rows_kernel<<<blocks_for(M * D), kThreads, 0, stream>>>(out, inp, rows, M, D);
  check_launch();
}

}  // namespace sb::cuda
