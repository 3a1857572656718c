// attention_selftest.cu: checks the warp-level tensor-core building blocks of attn_common.cuh on
// the device: one warp computes C = A[16:32, :] B (A 32 x 64, B 64 x 64) through every operand
// source / layout combination the kernels use (shared-memory A row-major or transposed, register
// A with a sign, B stored [n][k] or [k][n]), plain or split precision, and the host compares with
// a double-precision product (attention_mma_selftest in attention_cuda.hpp).
#include <cmath>
#include <random>
#include <vector>

#include "kernels/attn_common.cuh"
#include "kernels/attention_cuda.hpp"
#include "kernels/cuda_check.hpp"

namespace sb::cuda {
namespace {

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

}  // namespace sb::cuda
