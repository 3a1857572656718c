// path_prep.cu: the small kernels around the fused attention kernels: per-head prefix sums of the
// forget gate (double), delta = rowsum(dout * out), the per-block UT factors of PaTH (Tinv, Y, Z,
// pushed keys Kt, dense block products C; CUDA-core fp32, one CTA per 64-row block, formulas of
// src/nn/path_internal.hpp), their backward (src/nn/path_backward.cpp factors_backward; writes
// dk, dw, dbeta), and the accumulator -> output conversions.
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/attn_common.cuh"
#include "kernels/attn_internal.hpp"
#include "kernels/cuda_check.hpp"

namespace sb::cuda::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kLd = kL + 1;  // padded stride of 64 x 64 fp32 matrices

__device__ __forceinline__ float load1(const void* base, int64_t idx, bool is_bf16) {
  return is_bf16 ? __bfloat162float(static_cast<const bf16*>(base)[idx]) : static_cast<const float*>(base)[idx];
}

// gcum[bh, t] = sum_{s <= t} log_f[b, s, h] in double; one CTA per head, chunked block scan.
__global__ void gate_prefix_kernel(double* gcum, const float* log_f, int64_t T, int64_t H) {
  __shared__ double part[kThreads];
  const int64_t bh = blockIdx.x, b = bh / H, h = bh % H;
  const int64_t chunk = (T + kThreads - 1) / kThreads, s0 = threadIdx.x * chunk, s1 = min(T, s0 + chunk);
  double acc = 0;
  for (int64_t s = s0; s < s1; ++s) acc += log_f[(b * T + s) * H + h];
  part[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0;
    for (int i = 0; i < kThreads; ++i) {
      const double x = part[i];
      part[i] = run;
      run += x;
    }
  }
  __syncthreads();
  acc = part[threadIdx.x];
  for (int64_t s = s0; s < s1; ++s) {
    acc += log_f[(b * T + s) * H + h];
    gcum[bh * T + s] = acc;
  }
}

// dlog_f[b, s, h] = sum_{t >= s} dg[bh, t] for s >= 1, exactly 0 at s = 0 (never enters a score).
__global__ void gate_grad_kernel(float* dlog_f, const float* dg, int64_t T, int64_t Tp, int64_t H) {
  __shared__ double part[kThreads];
  const int64_t bh = blockIdx.x, b = bh / H, h = bh % H;
  const int64_t chunk = (T + kThreads - 1) / kThreads, s0 = threadIdx.x * chunk, s1 = min(T, s0 + chunk);
  double acc = 0;
  for (int64_t s = s0; s < s1; ++s) acc += dg[bh * Tp + s];
  part[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0;
    for (int i = kThreads - 1; i >= 0; --i) {
      const double x = part[i];
      part[i] = run;
      run += x;
    }
  }
  __syncthreads();
  acc = part[threadIdx.x];
  for (int64_t s = s1 - 1; s >= s0; --s) {
    acc += dg[bh * Tp + s];
    dlog_f[(b * T + s) * H + h] = s == 0 ? 0.f : static_cast<float>(acc);
  }
}

// delta[bh, t] = dout[b, t, h, :] . out[b, t, h, :]
__global__ void delta_kernel(float* delta, const void* dout, const void* out, int64_t B, int64_t T, int64_t H,
                             int64_t Dh, bool is_bf16) {
  const int64_t rows = B * T * H;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = 0.f;
    for (int64_t d = 0; d < Dh; d += 2) {
      const float2 a = load2(dout, r * Dh + d, is_bf16), o = load2(out, r * Dh + d, is_bf16);
      acc += a.x * o.x + a.y * o.y;
    }
    const int64_t h = r % H, t = (r / H) % T, b = r / (H * T);
    delta[(b * H + h) * T + t] = acc;
  }
}

// dst[b, t, h, :] = acc[bh, t, :] for t < T.
__global__ void acc_to_output_kernel(void* dst, const float* acc, int64_t B, int64_t T, int64_t Tp, int64_t H,
                                     int64_t Dh, bool is_bf16) {
  const int64_t n = B * T * H * Dh / 2;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = 2 * e, d = i % Dh, r = i / Dh, h = r % H, t = (r / H) % T, b = r / (H * T);
    const float* src = acc + ((b * H + h) * Tp + t) * Dh + d;
    store2(dst, i, src[0], src[1], is_bf16);
  }
}

// Per-block UT factors. One CTA per (block m, head bh); fp32 throughout.
template <int Dh>
__global__ void __launch_bounds__(kThreads) prep_kernel(float* kt, float* y, float* z, float* tinv, float* cmat,
                                                        const void* k, const float* w, const float* beta, int64_t T,
                                                        int64_t H, int nb, bool is_bf16, bool dense) {
  constexpr int LdD = Dh + 1;  // padded rows: conflict-free column walks
  extern __shared__ __align__(16) float sm[];
  float* W = sm;                 // [64][LdD]
  float* K = W + kL * LdD;       // [64][LdD]
  float* Y = K + kL * LdD;       // [64][LdD]
  float* gram = Y + kL * LdD;    // [64][kLd] W W^T, later Z
  float* Ti = gram + kL * kLd;  // [64][kLd]
  float* Cm = Ti + kL * kLd;    // [64][kLd] strictLower(W K^T)
  float* bt = Cm + kL * kLd;    // [64]
  const int tid = threadIdx.x, m = static_cast<int>(blockIdx.x % nb);
  const int64_t bh = blockIdx.x / nb, b = bh / H, h = bh % H, k0 = static_cast<int64_t>(m) * kL;
  const int64_t Tp = static_cast<int64_t>(nb) * kL;
  for (int e = tid; e < kL * Dh; e += kThreads) {
    const int r = e / Dh, d = e % Dh;
    const int64_t t = k0 + r, gi = ((b * T + t) * H + h) * Dh + d;
    W[r * LdD + d] = t < T ? w[gi] : 0.f;
    K[r * LdD + d] = t < T ? load1(k, gi, is_bf16) : 0.f;
  }
  if (tid < kL) bt[tid] = k0 + tid < T ? beta[(b * T + k0 + tid) * H + h] : 0.f;
  __syncthreads();
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, p = e % kL;
    float gw = 0.f, gk = 0.f;
    for (int d = 0; d < Dh; ++d) {
      gw += W[r * LdD + d] * W[p * LdD + d];
      gk += W[r * LdD + d] * K[p * LdD + d];
    }
    gram[r * kLd + p] = gw;
    Cm[r * kLd + p] = p < r ? gk : 0.f;
  }
  __syncthreads();
  // Tinv = (I + strictLower(D W W^T))^{-1} D by forward substitution, one row per step.
  for (int r = 0; r < kL; ++r) {
    if (tid < kL) {
      const int c = tid;
      float val = 0.f;
      if (c <= r) {
        float acc = 0.f;
        for (int p = c; p < r; ++p) acc += gram[r * kLd + p] * Ti[p * kLd + c];
        val = (c == r ? bt[r] : 0.f) - bt[r] * acc;
      }
      Ti[r * kLd + c] = val;
    }
    __syncthreads();
  }
  // Y = Tinv W; Z = Tinv Cm (into gram).
  for (int e = tid; e < kL * Dh; e += kThreads) {
    const int r = e / Dh, d = e % Dh;
    float acc = 0.f;
    for (int p = 0; p <= r; ++p) acc += Ti[r * kLd + p] * W[p * LdD + d];
    Y[r * LdD + d] = acc;
  }
  __syncthreads();
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, j = e % kL;
    float acc = 0.f;
    for (int p = j + 1; p <= r; ++p) acc += Ti[r * kLd + p] * Cm[p * kLd + j];
    gram[r * kLd + j] = acc;
  }
  __syncthreads();
  const float* Z = gram;
  for (int e = tid; e < kL * Dh; e += kThreads) {
    const int j = e / Dh, d = e % Dh;
    float acc = K[j * LdD + d];
    for (int r = j + 1; r < kL; ++r) acc -= Z[r * kLd + j] * W[r * LdD + d];
    kt[(bh * Tp + k0) * Dh + e] = acc;
    y[(bh * Tp + k0) * Dh + e] = Y[j * LdD + d];
  }
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, c = e % kL;
    z[(bh * nb + m) * kL * kL + e] = Z[r * kLd + c];
    if (tinv) tinv[(bh * nb + m) * kL * kL + e] = Ti[r * kLd + c];
  }
  if (dense) {
    for (int e = tid; e < Dh * Dh; e += kThreads) {
      const int a = e / Dh, c = e % Dh;
      float acc = 0.f;
      for (int r = 0; r < kL; ++r) acc += W[r * LdD + a] * Y[r * LdD + c];
      cmat[(bh * nb + m) * Dh * Dh + e] = acc;
    }
  }
}

int prep_smem_bytes(int64_t Dh) { return static_cast<int>((3 * kL * (Dh + 1) + 3 * kL * kLd + kL) * 4); }

// Backward of the factors of block m (src/nn/path_backward.cpp factors_backward), plus the dense
// block-product gradient dP (dW -= Y dP^T, dY -= W dP) and the own-block accumulators.
template <int Dh>
__global__ void __launch_bounds__(kThreads) factors_bwd_kernel(
    void* dk, float* dw, float* dbeta, const float* dkt_acc, const float* dy_acc, const float* dz_acc,
    const float* dp_acc, const float* dk_acc, const float* dw_acc, const float* tinv, const float* zf,
    const float* yf, const void* k, const float* w, const float* beta, int64_t T, int64_t H, int nb, bool is_bf16,
    bool dense) {
  constexpr int NE = kL * Dh / kThreads, LdD = Dh + 1;  // padded rows: conflict-free column walks
  extern __shared__ __align__(16) float sm[];
  float* W = sm;                // [64][LdD]
  float* K = W + kL * LdD;      // [64][LdD]
  float* dKt = K + kL * LdD;    // [64][LdD]
  float* dY = dKt + kL * LdD;   // [64][LdD]
  float* Ti = dY + kL * LdD;    // [64][kLd]
  float* Zb = Ti + kL * kLd;   // Z, then dC
  float* dZ = Zb + kL * kLd;   // dZ, then gram
  float* Cm = dZ + kL * kLd;   // strictLower(W K^T), then E
  float* X1 = Cm + kL * kLd;   // dTinv, then R
  float* bt = X1 + kL * kLd;   // [64]
  float* db = bt + kL;         // [64]
  float* Yb = db + kL;         // [64][LdD] (dense)
  float* dP = Yb + kL * LdD;   // [Dh][LdD] (dense)
  const int tid = threadIdx.x, m = static_cast<int>(blockIdx.x % nb);
  const int64_t bh = blockIdx.x / nb, b = bh / H, h = bh % H, k0 = static_cast<int64_t>(m) * kL;
  const int64_t Tp = static_cast<int64_t>(nb) * kL, rowbase = (bh * Tp + k0) * Dh, blk = (bh * nb + m) * kL * kL;
  for (int e = tid; e < kL * Dh; e += kThreads) {
    const int r = e / Dh, d = e % Dh;
    const int64_t t = k0 + r, gi = ((b * T + t) * H + h) * Dh + d;
    W[r * LdD + d] = t < T ? w[gi] : 0.f;
    K[r * LdD + d] = t < T ? load1(k, gi, is_bf16) : 0.f;
    dKt[r * LdD + d] = dkt_acc[rowbase + e];
    dY[r * LdD + d] = dy_acc[rowbase + e];
    if (dense) Yb[r * LdD + d] = yf[rowbase + e];
  }
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, c = e % kL;
    Ti[r * kLd + c] = tinv[blk + e];
    Zb[r * kLd + c] = zf[blk + e];
    dZ[r * kLd + c] = dz_acc[blk + e];
  }
  if (dense)
    for (int e = tid; e < Dh * Dh; e += kThreads) dP[e / Dh * LdD + e % Dh] = dp_acc[(bh * nb + m) * Dh * Dh + e];
  if (tid < kL) {
    bt[tid] = k0 + tid < T ? beta[(b * T + k0 + tid) * H + h] : 0.f;
    db[tid] = 0.f;
  }
  __syncthreads();
  float dWl[NE], dKl[NE];
#pragma unroll
  for (int i = 0; i < NE; ++i) {
    const int e = tid + kThreads * i;
    dWl[i] = dw_acc[rowbase + e];
    dKl[i] = dk_acc[rowbase + e] + dKt[e / Dh * LdD + e % Dh];  // Kt = K - Z^T W: dK += dKt
  }
  if (dense) {  // P = I - W^T Y: dW -= Y dP^T, dY -= W dP
#pragma unroll
    for (int i = 0; i < NE; ++i) {
      const int e = tid + kThreads * i, r = e / Dh, d = e % Dh;
      float a1 = 0.f, a2 = 0.f;
      for (int c = 0; c < Dh; ++c) {
        a1 += Yb[r * LdD + c] * dP[d * LdD + c];
        a2 += W[r * LdD + c] * dP[c * LdD + d];
      }
      dWl[i] -= a1;
      dY[r * LdD + d] -= a2;  // own element only
    }
  }
  // Phase 1: dZ -= W dKt^T; dW -= Z dKt; Cm = strictLower(W K^T).
#pragma unroll
  for (int i = 0; i < NE; ++i) {
    const int e = tid + kThreads * i, r = e / Dh, d = e % Dh;
    float acc = 0.f;
    for (int j = 0; j < kL; ++j) acc += Zb[r * kLd + j] * dKt[j * LdD + d];
    dWl[i] -= acc;
  }
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, j = e % kL;
    float a1 = 0.f, a2 = 0.f;
    for (int d = 0; d < Dh; ++d) {
      a1 += W[r * LdD + d] * dKt[j * LdD + d];
      a2 += W[r * LdD + d] * K[j * LdD + d];
    }
    dZ[r * kLd + j] -= a1;
    Cm[r * kLd + j] = j < r ? a2 : 0.f;
  }
  __syncthreads();
  // Phase 2: dTinv = dZ Cm^T + dY W^T; dC = strictLower(Tinv^T dZ) (into Zb).
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, p = e % kL;
    float a1 = 0.f, a2 = 0.f;
    for (int j = 0; j < kL; ++j) a1 += dZ[r * kLd + j] * Cm[p * kLd + j];
    for (int d = 0; d < Dh; ++d) a1 += dY[r * LdD + d] * W[p * LdD + d];
    X1[r * kLd + p] = a1;
    if (p < r)
      for (int q = 0; q < kL; ++q) a2 += Ti[q * kLd + r] * dZ[q * kLd + p];
    Zb[r * kLd + p] = a2;  // dC[r][p], r plays the row of C
  }
  __syncthreads();
  // Phase 3: dW += dC K + Tinv^T dY; dK += dC^T W; gram = W W^T (into dZ).
#pragma unroll
  for (int i = 0; i < NE; ++i) {
    const int e = tid + kThreads * i, r = e / Dh, d = e % Dh;
    float a1 = 0.f, a2 = 0.f;
    for (int j = 0; j < kL; ++j) {
      a1 += Zb[r * kLd + j] * K[j * LdD + d] + Ti[j * kLd + r] * dY[j * LdD + d];
      a2 += Zb[j * kLd + r] * W[j * LdD + d];
    }
    dWl[i] += a1;
    dKl[i] += a2;
  }
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, p = e % kL;
    float acc = 0.f;
    for (int d = 0; d < Dh; ++d) acc += W[r * LdD + d] * W[p * LdD + d];
    dZ[r * kLd + p] = acc;
  }
  __syncthreads();
  const float* gram = dZ;
  // Phase 4: R = M^{-T} dTinv, M = I + strictLower(D gram): back substitution in X1.
  for (int r = kL - 2; r >= 0; --r) {
    if (tid < kL) {
      const int c = tid;
      float acc = 0.f;
      for (int q = r + 1; q < kL; ++q) acc += bt[q] * gram[q * kLd + r] * X1[q * kLd + c];
      X1[r * kLd + c] -= acc;
    }
    __syncthreads();
  }
  // Phase 5: E = strictLower(-R Tinv^T) (into Cm); dbeta_r = R_rr + sum_{p<r} E_rp gram_rp.
  for (int e = tid; e < kL * kL; e += kThreads) {
    const int r = e / kL, p = e % kL;
    float acc = 0.f;
    if (p < r)
      for (int c = 0; c <= p; ++c) acc -= X1[r * kLd + c] * Ti[p * kLd + c];
    Cm[r * kLd + p] = acc;
  }
  __syncthreads();
  if (tid < kL) {
    const int r = tid;
    float acc = X1[r * kLd + r];
    for (int p = 0; p < r; ++p) acc += Cm[r * kLd + p] * gram[r * kLd + p];
    db[r] = acc;
  }
  __syncthreads();
  for (int e = tid; e < kL * kL; e += kThreads) Cm[e / kL * kLd + e % kL] *= bt[e / kL];  // dGram = D E
  __syncthreads();
  // Phase 6: dW += (dGram + dGram^T) W; write dk, dw, dbeta.
#pragma unroll
  for (int i = 0; i < NE; ++i) {
    const int e = tid + kThreads * i, r = e / Dh, d = e % Dh;
    float acc = 0.f;
    for (int p = 0; p < kL; ++p) acc += (Cm[r * kLd + p] + Cm[p * kLd + r]) * W[p * LdD + d];
    dWl[i] += acc;
    const int64_t t = k0 + r;
    if (t < T) {
      const int64_t gi = ((b * T + t) * H + h) * Dh + d;
      dw[gi] = dWl[i];
      if (is_bf16)
        static_cast<bf16*>(dk)[gi] = __float2bfloat16(dKl[i]);
      else
        static_cast<float*>(dk)[gi] = dKl[i];
    }
  }
  if (tid < kL && k0 + tid < T) dbeta[(b * T + k0 + tid) * H + h] = db[tid];
}

int factors_bwd_smem_bytes(int64_t Dh, bool dense) {
  return static_cast<int>((4 * kL * (Dh + 1) + 5 * kL * kLd + 2 * kL + (dense ? (kL + Dh) * (Dh + 1) : 0)) * 4);
}

int grid_1d(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 65535 * 16 ? (blocks < 1 ? 1 : blocks) : 65535 * 16);
}

}  // namespace

void launch_gate_prefix(double* gcum, const float* log_f, int64_t B, int64_t T, int64_t H, cudaStream_t s) {
  gate_prefix_kernel<<<static_cast<unsigned>(B * H), kThreads, 0, s>>>(gcum, log_f, T, H);
  SB_CUDA_CHECK_LAUNCH();
}

void launch_gate_grad(float* dlog_f, const float* dg, int64_t B, int64_t T, int64_t H, cudaStream_t s) {
  const int64_t Tp = (T + kL - 1) / kL * kL;
  gate_grad_kernel<<<static_cast<unsigned>(B * H), kThreads, 0, s>>>(dlog_f, dg, T, Tp, H);
  SB_CUDA_CHECK_LAUNCH();
}

void launch_delta(float* delta, const void* dout, const void* out, int64_t B, int64_t T, int64_t H, int64_t Dh,
                  bool bf16, cudaStream_t s) {
  delta_kernel<<<grid_1d(B * T * H, kThreads), kThreads, 0, s>>>(delta, dout, out, B, T, H, Dh, bf16);
  SB_CUDA_CHECK_LAUNCH();
}

void launch_acc_to_output(void* dst, const float* acc, int64_t B, int64_t T, int64_t H, int64_t Dh, bool bf16,
                          cudaStream_t s) {
  const int64_t Tp = (T + kL - 1) / kL * kL;
  acc_to_output_kernel<<<grid_1d(B * T * H * Dh / 2, kThreads), kThreads, 0, s>>>(dst, acc, B, T, Tp, H, Dh, bf16);
  SB_CUDA_CHECK_LAUNCH();
}

void launch_path_prep(float* kt, float* y, float* z, float* tinv, float* c, const void* k, const float* w,
                      const float* beta, int64_t B, int64_t T, int64_t H, int64_t Dh, bool bf16, cudaStream_t s) {
  const int nb = static_cast<int>((T + kL - 1) / kL);
  const int smem = prep_smem_bytes(Dh);
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    CUDA_CHECK(cudaFuncSetAttribute(prep_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    prep_kernel<D><<<static_cast<unsigned>(nb * B * H), kThreads, smem, s>>>(kt, y, z, tinv, c, k, w, beta, T,
                                                                                   H, nb, bf16, path_dense(D));
    SB_CUDA_CHECK_LAUNCH();
  });
}

void launch_path_factors_bwd(void* dk, float* dw, float* dbeta, const float* dkt_acc, const float* dy_acc,
                             const float* dz_acc, const float* dp_acc, const float* dk_acc, const float* dw_acc,
                             const float* tinv, const float* z, const float* y, const void* k, const float* w,
                             const float* beta, int64_t B, int64_t T, int64_t H, int64_t Dh, bool bf16,
                             cudaStream_t s) {
  const int nb = static_cast<int>((T + kL - 1) / kL);
  const bool dense = path_dense(Dh);
  const int smem = factors_bwd_smem_bytes(Dh, dense);
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    CUDA_CHECK(cudaFuncSetAttribute(factors_bwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    factors_bwd_kernel<D><<<static_cast<unsigned>(nb * B * H), kThreads, smem, s>>>(
        dk, dw, dbeta, dkt_acc, dy_acc, dz_acc, dp_acc, dk_acc, dw_acc, tinv, z, y, k, w, beta, T, H, nb, bf16,
        dense);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
