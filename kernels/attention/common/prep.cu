// prep.cu: the small kernels around the fused attention kernels: per-head prefix sums of the
// forget gate (double), delta = rowsum(dout * out), the accumulator -> output conversions and
// dlog_f from the prefix-sum gradient. (The PaTH block factors are in kernels/attention/path/path_factors.cu.)
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/internal.hpp"
#include "kernels/common/cuda_check.hpp"

namespace sb::cuda::detail {
namespace {

constexpr int kThreads = 256;

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

// delta[bh, t] = dout[b, t, h, :] . out[b, t, h, :]: Dh / 8 consecutive threads per row (a power
// of two dividing 32), 8 elements each by 16-byte (bf16) or 2 x 16-byte (fp32) loads, summed by
// shuffles; coalesced across a warp. The grid-stride loop advances whole warps (shuffles).
__global__ void delta_kernel(float* delta, const void* dout, const void* out, int64_t B, int64_t T, int64_t H,
                             int64_t Dh, bool is_bf16) {
  const int lanes = static_cast<int>(Dh / 8);
  const int64_t rows = B * T * H, total = rows * lanes, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = blockIdx.x * static_cast<int64_t>(blockDim.x) + (threadIdx.x & ~31); base < total;
       base += stride) {
    const int64_t gid = base + (threadIdx.x & 31), r = gid / lanes, e0 = r * Dh + (gid % lanes) * 8;
    float acc = 0.f;
    if (r < rows) {
      if (is_bf16) {
        const uint4 a = *reinterpret_cast<const uint4*>(static_cast<const bf16*>(dout) + e0);
        const uint4 o = *reinterpret_cast<const uint4*>(static_cast<const bf16*>(out) + e0);
        const uint32_t av[4] = {a.x, a.y, a.z, a.w}, ov[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&av[i]));
          const float2 y = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ov[i]));
          acc += x.x * y.x + x.y * y.y;
        }
      } else {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const float4 x = *reinterpret_cast<const float4*>(static_cast<const float*>(dout) + e0 + 4 * i);
          const float4 y = *reinterpret_cast<const float4*>(static_cast<const float*>(out) + e0 + 4 * i);
          acc += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
        }
      }
    }
    for (int off = lanes / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (r < rows && gid % lanes == 0) {
      const int64_t h = r % H, t = (r / H) % T, b = r / (H * T);
      delta[(b * H + h) * T + t] = acc;
    }
  }
}

// dst[b, t, h, :] = acc[lb * Tp + t, :] for t < T and the group's heads bh = bh0 + lb (acc: [nbh,
// Tp, Dh], walked in its own order; dst [B, T, H, Dh], fp32 or bf16; both 16-byte aligned): 8
// elements per thread (two 16-byte loads; one 16-byte bf16 or two fp32 stores), one set of 64-bit
// index divisions per 8 elements.
__global__ void acc_to_output_kernel(void* dst, const float* acc, int64_t T, int64_t Tp, int64_t H, int64_t Dh,
                                     int64_t bh0, int64_t nbh, bool is_bf16) {
  const int64_t per_row = Dh / 8, n = nbh * T * per_row;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / per_row, d = (e - r * per_row) * 8, lb = r / T, t = r - lb * T;
    const int64_t bh = bh0 + lb, b = bh / H, h = bh - b * H, o = ((b * T + t) * H + h) * Dh + d;
    const float4* src = reinterpret_cast<const float4*>(acc + (lb * Tp + t) * Dh + d);
    const float4 x = src[0], y = src[1];
    if (is_bf16) {
      *reinterpret_cast<uint4*>(static_cast<bf16*>(dst) + o) =
          make_uint4(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w), pack_bf16(y.x, y.y), pack_bf16(y.z, y.w));
    } else {
      float4* q = reinterpret_cast<float4*>(static_cast<float*>(dst) + o);
      q[0] = x, q[1] = y;
    }
  }
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
  delta_kernel<<<grid_1d(B * T * H * (Dh / 8), kThreads), kThreads, 0, s>>>(delta, dout, out, B, T, H, Dh, bf16);
  SB_CUDA_CHECK_LAUNCH();
}

void launch_acc_to_output(void* dst, const float* acc, int64_t B, int64_t T, int64_t H, int64_t Dh, int64_t bh0,
                          int64_t nbh, bool bf16, cudaStream_t s) {
  check_head_group(bh0, nbh, B * H, "attention accumulator conversion: bad group of heads");
  const int64_t Tp = (T + kL - 1) / kL * kL;
  acc_to_output_kernel<<<grid_1d(nbh * T * Dh / 8, kThreads), kThreads, 0, s>>>(dst, acc, T, Tp, H, Dh, bh0, nbh,
                                                                               bf16);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace sb::cuda::detail
