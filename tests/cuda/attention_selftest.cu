// attention_selftest.cu: checks the warp-level tensor-core building blocks of kernels/attention/common/tiles.cuh on
// the device: one warp computes C = A[16:32, :] B (A 32 x 64, B 64 x 64) through every operand
// source / layout combination the kernels use (shared-memory A row-major or transposed, register
// A with a sign, B stored [n][k] or [k][n]), plain or split precision, and the host compares with
// a double-precision product (attention_mma_selftest, attention_selftest.hpp); and the warpgroup
// (wgmma) building blocks the same way (attention_wgmma_selftest).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention/common/tiles.cuh"
#include "kernels/attention/common/wgmma_sm90.cuh"
#include "kernels/attention/attention.hpp"
#include "kernels/common/cuda_check.hpp"
#include "tests/cuda/attention_selftest.hpp"

namespace sb::cuda {
namespace {

using detail::bf16;
using detail::BL;
using detail::Carve;
using detail::Tile;

constexpr int kM = 32, kK = 64, kN = 64, kCases = 6;

__global__ void selftest_kernel(float* out,          // [kCases, 16, kN]
                                const float* a,      // [kM, kK]
                                const float* at,     // [kK, kM] = a^T
                                const float* b,      // [kK, kN]
                                const float* bt,     // [kN, kK] = b^T
                                bool split) {
  extern __shared__ __align__(16) unsigned char smem[];
  Carve cv{smem, 0};
  const Tile Amk = cv.tile(kM, kK, split), Akm = cv.tile(kK, kM, split);
  const Tile Bkn = cv.tile(kK, kN, split), Bnk = cv.tile(kN, kK, split);
  const int lane = threadIdx.x;
  detail::load_tile(Amk, kM, kK, a, kK, false, kM, lane, 32);
  detail::load_tile(Akm, kK, kM, at, kM, false, kK, lane, 32);
  detail::load_tile(Bkn, kK, kN, b, kN, false, kK, lane, 32);
  detail::load_tile(Bnk, kN, kK, bt, kK, false, kN, lane, 32);
  __syncthreads();
  float areg[kK / 8][4];
  detail::load_frag_global(areg, a, kK, false, 16, kM, lane);
  for (int c = 0; c < kCases; ++c) {
    float acc[kN / 8][4];
    detail::zero(acc);
    switch (c) {
      case 0: detail::mma_sA<kN / 8, false, BL::NK>(acc, Amk, 16, 0, kK / 16, Bnk, 0, 0, split, lane); break;
      case 1: detail::mma_sA<kN / 8, true, BL::KN>(acc, Akm, 16, 0, kK / 16, Bkn, 0, 0, split, lane); break;
      case 2: detail::mma_sA<kN / 8, false, BL::KN>(acc, Amk, 16, 0, kK / 16, Bkn, 0, 0, split, lane); break;
      case 3: detail::mma_sA<kN / 8, true, BL::NK>(acc, Akm, 16, 0, kK / 16, Bnk, 0, 0, split, lane); break;
      case 4: detail::mma_rA<kK / 16, kN / 8, BL::NK>(acc, areg, 1.f, Bnk, 0, 0, split, lane); break;
      default: detail::mma_rA<kK / 16, kN / 8, BL::KN>(acc, areg, -1.f, Bkn, 0, 0, split, lane); break;
    }
    detail::store_frag_global(out + c * 16 * kN, kN, false, 0, 16, acc, 1.f, lane);
  }
}

constexpr int kWgM = 64, kWgK = 128, kWgN = 128, kWgCases = 4;

// One warpgroup: C = A B (A 64 x 128, B 128 x 128, bf16) four ways: A and B^T K-major from
// shared memory; A from registers, B MN-major; A^T and B MN-major from shared memory (n64 per
// panel, and n32 per half panel). Each case covers all of C and eight k-tiles (two swizzle panels
// along K for the K-major operands).
__global__ void wgmma_selftest_kernel(float* out,     // [kWgCases, kWgM, kWgN]
                                      const bf16* a,  // [kWgM, kWgK]
                                      const bf16* at,  // [kWgK, kWgM] = a^T
                                      const bf16* b,   // [kWgK, kWgN]
                                      const bf16* bt) {  // [kWgN, kWgK] = b^T
#if SB_WGMMA
  using namespace detail;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* const sA = align1024(smem);
  unsigned char* const sAt = sA + sw_bytes(kWgM, kWgK);
  unsigned char* const sB = sAt + sw_bytes(kWgK, kWgM);
  unsigned char* const sBt = sB + sw_bytes(kWgK, kWgN);
  const int tid = threadIdx.x, lane = tid & 31, r0 = 16 * (tid >> 5);
  sw_copy_async(sA, kWgM, kWgK, a, kWgK, kWgM, tid, 128);
  sw_copy_async(sAt, kWgK, kWgM, at, kWgM, kWgK, tid, 128);
  sw_copy_async(sB, kWgK, kWgN, b, kWgN, kWgK, tid, 128);
  sw_copy_async(sBt, kWgN, kWgK, bt, kWgK, kWgN, tid, 128);
  cp_async_commit();
  cp_async_wait<0>();
  fence_async_smem();
  __syncthreads();
  float areg[kWgK / 8][4];
  load_frag_global(areg, a, kWgK, true, r0, kWgM, lane);
#pragma unroll
  for (int c = 0; c < kWgCases; ++c)
#pragma unroll
    for (int np = 0; np < kWgN / 64; ++np) {
      float acc[8][4];
      zero(acc);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < kWgK / 16; ++kk) {
        if (c == 0) {
          wgmma_ss<0, 0>(acc, desc_kmajor(sA, kWgM, 0, kk), desc_kmajor(sBt, kWgN, 64 * np, kk));
        } else if (c == 1) {
          uint32_t ah[4], al[4];
          pack_a(ah, al, areg, kk, 1.f, false);
          wgmma_rs<1>(acc, ah, desc_mnmajor(sB, kWgK, 64 * np, kk));
        } else if (c == 2) {
          wgmma_ss<1, 1>(acc, desc_mnmajor(sAt, kWgK, 0, kk), desc_mnmajor(sB, kWgK, 64 * np, kk));
        }
      }
      wg_commit();
      wg_wait<0>();
      wg_hold(acc);
      if (c == 3) {  // two n32 products per panel, B starting 0 or 32 columns into it
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float a32[4][4];
          zero(a32);
          wg_fence();
#pragma unroll
          for (int kk = 0; kk < kWgK / 16; ++kk)
            wgmma_ss<1, 1>(a32, desc_mnmajor(sAt, kWgK, 0, kk), desc_mnmajor(sB, kWgK, 64 * np + 32 * half, kk));
          wg_commit();
          wg_wait<0>();
          wg_hold(a32);
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[4 * half + j][e] = a32[j][e];
        }
      }
      store_frag_global(out + c * kWgM * kWgN + 64 * np, kWgN, false, r0, kWgM, acc, 1.f, lane);
    }
#endif
}

}  // namespace

double attention_mma_selftest(bool split) {
  std::mt19937_64 gen(split ? 7 : 8);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto round_bf16 = [](float x) { return __bfloat162float(__float2bfloat16(x)); };
  std::vector<float> a(kM * kK), at(kK * kM), b(kK * kN), bt(kN * kK);
  for (auto& x : a) x = split ? dist(gen) : round_bf16(dist(gen));  // plain: exact bf16 inputs
  for (auto& x : b) x = split ? dist(gen) : round_bf16(dist(gen));
  for (int i = 0; i < kM; ++i)
    for (int k = 0; k < kK; ++k) at[k * kM + i] = a[i * kK + k];
  for (int k = 0; k < kK; ++k)
    for (int j = 0; j < kN; ++j) bt[j * kK + k] = b[k * kN + j];
  float* dev[5] = {};
  const size_t sizes[5] = {kCases * 16 * kN, a.size(), at.size(), b.size(), bt.size()};
  for (int i = 0; i < 5; ++i) CUDA_CHECK(cudaMalloc(&dev[i], sizes[i] * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dev[1], a.data(), a.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dev[2], at.data(), at.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dev[3], b.data(), b.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dev[4], bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dev[0], 0xFF, sizes[0] * 4));
  Carve cv;
  for (int i = 0; i < 4; ++i) cv.tile(64, 64, split);
  CUDA_CHECK(cudaFuncSetAttribute(selftest_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cv.off));
  selftest_kernel<<<1, 32, cv.off>>>(dev[0], dev[1], dev[2], dev[3], dev[4], split);
  SB_CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(sizes[0]);
  CUDA_CHECK(cudaMemcpy(out.data(), dev[0], out.size() * 4, cudaMemcpyDeviceToHost));
  for (float* p : dev) CUDA_CHECK(cudaFree(p));
  double worst = 0;
  for (int c = 0; c < kCases; ++c) {
    const double sign = c == 5 ? -1.0 : 1.0;
    double diff = 0, norm = 0;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < kN; ++j) {
        double ref = 0;
        for (int k = 0; k < kK; ++k) ref += static_cast<double>(a[(16 + i) * kK + k]) * b[k * kN + j];
        ref *= sign;
        const double got = out[c * 16 * kN + i * kN + j];
        diff += (got - ref) * (got - ref);
        norm += ref * ref;
      }
    const double err = std::sqrt(diff / norm);
    worst = std::isfinite(err) ? std::max(worst, err) : INFINITY;
  }
  return worst;
}

double attention_wgmma_selftest() {
  if (!softmax_attention_uses_wgmma(64, DType::BF16)) return -1.0;
  std::mt19937_64 gen(9);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<bf16> a(kWgM * kWgK), at(kWgK * kWgM), b(kWgK * kWgN), bt(kWgN * kWgK);
  for (auto& x : a) x = __float2bfloat16(dist(gen));
  for (auto& x : b) x = __float2bfloat16(dist(gen));
  for (int i = 0; i < kWgM; ++i)
    for (int k = 0; k < kWgK; ++k) at[k * kWgM + i] = a[i * kWgK + k];
  for (int k = 0; k < kWgK; ++k)
    for (int j = 0; j < kWgN; ++j) bt[j * kWgK + k] = b[k * kWgN + j];
  float* out = nullptr;
  bf16* dev[4] = {};
  const std::vector<bf16>* host[4] = {&a, &at, &b, &bt};
  CUDA_CHECK(cudaMalloc(&out, kWgCases * kWgM * kWgN * sizeof(float)));
  CUDA_CHECK(cudaMemset(out, 0xFF, kWgCases * kWgM * kWgN * sizeof(float)));
  for (int i = 0; i < 4; ++i) {
    CUDA_CHECK(cudaMalloc(&dev[i], host[i]->size() * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpy(dev[i], host[i]->data(), host[i]->size() * sizeof(bf16), cudaMemcpyHostToDevice));
  }
  const int smem = 1024 + detail::sw_bytes(kWgM, kWgK) * 2 + detail::sw_bytes(kWgK, kWgN) * 2;
  CUDA_CHECK(cudaFuncSetAttribute(wgmma_selftest_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_selftest_kernel<<<1, 128, smem>>>(out, dev[0], dev[1], dev[2], dev[3]);
  SB_CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got(kWgCases * kWgM * kWgN);
  CUDA_CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(out));
  for (bf16* p : dev) CUDA_CHECK(cudaFree(p));
  double worst = 0;
  for (int c = 0; c < kWgCases; ++c) {
    double diff = 0, norm = 0;
    for (int i = 0; i < kWgM; ++i)
      for (int j = 0; j < kWgN; ++j) {
        double ref = 0;
        for (int k = 0; k < kWgK; ++k)
          ref += static_cast<double>(__bfloat162float(a[i * kWgK + k])) * __bfloat162float(b[k * kWgN + j]);
        const double e = got[c * kWgM * kWgN + i * kWgN + j] - ref;
        diff += e * e;
        norm += ref * ref;
      }
    const double err = std::sqrt(diff / norm);
    worst = std::isfinite(err) ? std::max(worst, err) : INFINITY;
  }
  return worst;
}

}  // namespace sb::cuda
