// test_cuda_ops_bf16.cpp: the bf16-activation ops (kernels/ops/ops_bf16.hpp) bit for bit against bf16 of
// their fp32 ops on the same inputs (the fused SwiGLU forward and down backward, each a product too,
// against the CPU in double), the linear layer on bf16 operands (model/cuda/blas.hpp's
// typed overloads) against the CPU layer on the same bf16-exact values, the column packing of
// kernels/ops/pack.hpp and the row gathers / scatters (exact). Skips with a message when built without
// CUDA or when no device is present.
#include <fmt/format.h>
#include <gtest/gtest.h>

#ifndef STATEBENCH_HAVE_CUDA
TEST(CudaOpsBf16, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#else
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "cuda_ops_test_util.hpp"
#include "model/cuda/blas.hpp"
#include "kernels/ops/ops_bf16.hpp"
#include "kernels/ops/ops.hpp"
#include "kernels/ops/pack.hpp"
#include "nn/ops_basic.hpp"

namespace sb {
namespace {

using namespace test_cuda;

// ---- bf16 ops (kernels/ops/ops_bf16.hpp): every output is bit for bit bf16(the fp32 op on the same inputs) ----
std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  std::transform(v.begin(), v.end(), b.begin(), [](float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); });
  return b;
}
std::vector<float> widen(const std::vector<uint16_t>& b) {
  std::vector<float> v(b.size());
  std::transform(b.begin(), b.end(), v.begin(), [](uint16_t u) { return __bfloat162float(__ushort_as_bfloat16(u)); });
  return v;
}

// got == bf16(want) bit for bit (reports the first mismatch). Returns how many got differ from the
// unrounded want: > 0 proves the op rounds.
size_t expect_bf16_of(const std::vector<uint16_t>& got, const std::vector<float>& want, const std::string& what) {
  if (got.size() != want.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " values, expected " << want.size();
    return 0;
  }
  const auto w = to_bf16(want);
  const size_t i = std::mismatch(got.begin(), got.end(), w.begin()).first - got.begin();
  EXPECT_EQ(i, got.size()) << what << ": first mismatch at element " << i << ": 0x" << std::hex << got[i]
                           << ", bf16(" << want[i] << ") = 0x" << w[i];
  const auto g = widen(got);
  size_t rounded = 0;
  for (size_t k = 0; k < g.size(); ++k) rounded += g[k] != want[k];
  return rounded;
}

// The norms read the fp32 residual stream: unrounded inputs; the saved statistics equal the fp32 op's.
// Shapes: the row kernels (D % 4 == 0 up to 1024, float4 groups held in registers; D = 102, 1030:
// column loops) at 1 .. 32768 rows; the last case also writes to an odd (2-byte aligned) bf16 output.
TEST_F(CudaOps, Bf16NormsEqualRoundedFp32) {
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{257}, int64_t{32768}})
    for (int64_t D : {16, 64, 100, 102, 128, 1024, 1030}) {
      if (N * D > (int64_t{1} << 23)) continue;
      const auto x = randn(N * D, 11, 2.f), g = randn(D, 12), bias = randn(D, 13);
      Dev<float> d_x(x), d_g(g), d_b(bias), d_out(N * D), d_mean(N), d_rstd(N), d_mean16(N), d_rstd16(N);
      Dev<uint16_t> d_out16(N * D);
      const std::string shape = " N " + std::to_string(N) + " D " + std::to_string(D);
      cuda::rmsnorm_forward_cuda(d_out.p, d_rstd.p, d_x.p, d_g.p, N, D, 1e-6, s);
      cuda::rmsnorm_forward_bf16_cuda(d_out16.p, d_rstd16.p, d_x.p, d_g.p, N, D, 1e-6, s);
      EXPECT_GT(expect_bf16_of(d_out16.host(), d_out.host(), "rmsnorm" + shape), 0u) << "not rounded?";
      expect_close(d_rstd16.host(), d_rstd.host(), 0, 0, "rmsnorm rstd" + shape);
      cuda::layernorm_forward_cuda(d_out.p, d_mean.p, d_rstd.p, d_x.p, d_g.p, d_b.p, N, D, 1e-5, s);
      cuda::layernorm_forward_bf16_cuda(d_out16.p, d_mean16.p, d_rstd16.p, d_x.p, d_g.p, d_b.p, N, D, 1e-5, s);
      EXPECT_GT(expect_bf16_of(d_out16.host(), d_out.host(), "layernorm" + shape), 0u) << "not rounded?";
      expect_close(d_mean16.host(), d_mean.host(), 0, 0, "layernorm mean" + shape);
      expect_close(d_rstd16.host(), d_rstd.host(), 0, 0, "layernorm rstd" + shape);
      Dev<uint16_t> d_odd(N * D + 1);  // output at an odd element: scalar stores, the same values
      cuda::layernorm_forward_bf16_cuda(d_odd.p + 1, d_mean16.p, d_rstd16.p, d_x.p, d_g.p, d_b.p, N, D, 1e-5, s);
      const auto odd = d_odd.host();
      expect_bf16_of(std::vector<uint16_t>(odd.begin() + 1, odd.end()), d_out.host(), "layernorm odd output" + shape);
    }
}

// The norm backwards on a bf16 dout (the products' bf16 d(h)) equal the fp32 ones on dout widened,
// bit for bit: dinp (overwritten and accumulated), its bf16 copy, dweight and dbias; with the
// reduce scratch (sums fused into the row kernel, D <= 768) and without it (column sums), at the
// float4-group kernels and the column loops (D = 102, 1030).
TEST_F(CudaOps, Bf16DoutNormBackwardsEqualFp32OnWidened) {
  Dev<float> d_scratch(int64_t{1} << 20);
  const cuda::ReduceScratch with{d_scratch.p, int64_t{1} << 20};
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{257}, int64_t{32768}})
    for (int64_t D : {16, 102, 128, 1030})
      for (bool fused : {true, false}) {
        if (N * D > (int64_t{1} << 23)) continue;
        const std::string what = fmt::format("N {} D {}{}", N, D, fused ? "" : " unfused");
        const cuda::ReduceScratch scratch = fused ? with : cuda::ReduceScratch{};
        const auto x = randn(N * D, 21, 2.f), g = randn(D, 22), bias = randn(D, 23), prev = randn(N * D, 24);
        const auto dyb = to_bf16(randn(N * D, 25));
        Dev<float> d_x(x), d_g(g), d_b(bias), d_mean(N), d_rstd(N), d_out(N * D), d_dy(widen(dyb));
        Dev<uint16_t> d_dyb(dyb);
        for (bool ln : {false, true}) {
          if (ln) cuda::layernorm_forward_cuda(d_out.p, d_mean.p, d_rstd.p, d_x.p, d_g.p, d_b.p, N, D, 1e-5, s);
          else cuda::rmsnorm_forward_cuda(d_out.p, d_rstd.p, d_x.p, d_g.p, N, D, 1e-6, s);
          for (bool acc : {false, true}) {
            Dev<float> dx32(prev), dx16(prev), dg32(D), dg16(D), db32(D), db16(D);
            Dev<uint16_t> c32(N * D), c16(N * D);
            if (ln) {
              cuda::layernorm_backward_cuda(dx32.p, dg32.p, db32.p, d_dy.p, d_x.p, d_g.p, d_mean.p, d_rstd.p, N, D, s,
                                            scratch, acc, c32.p);
              cuda::layernorm_backward_bf16_cuda(dx16.p, dg16.p, db16.p, d_dyb.p, d_x.p, d_g.p, d_mean.p, d_rstd.p, N,
                                                 D, s, scratch, acc, c16.p);
            } else {
              cuda::rmsnorm_backward_cuda(dx32.p, dg32.p, d_dy.p, d_x.p, d_g.p, d_rstd.p, N, D, s, scratch, acc, c32.p);
              cuda::rmsnorm_backward_bf16_cuda(dx16.p, dg16.p, d_dyb.p, d_x.p, d_g.p, d_rstd.p, N, D, s, scratch, acc,
                                               c16.p);
            }
            const std::string w = what + (ln ? " layernorm" : " rmsnorm") + (acc ? " accumulate" : "");
            expect_close(dx16.host(), dx32.host(), 0, 0, w + " dinp");
            EXPECT_EQ(c16.host(), c32.host()) << w << " dinp bf16";
            expect_close(dg16.host(), dg32.host(), 0, 0, w + " dweight");
            expect_close(db16.host(), db32.host(), 0, 0, w + " dbias");
            EXPECT_NE(dg32.host(), std::vector<float>(D, 0.f)) << w << ": no weight gradient";
          }
        }
      }
}

// n = 2^21 + 5: more elements than one pass of the grid-stride kernels; 4096 and 2^21 + 8: eight
// elements per thread (fp32: four).
TEST_F(CudaOps, Bf16ActivationsEqualRoundedFp32) {
  for (int64_t n : {int64_t{4099}, int64_t{4096}, (int64_t{1} << 21) + 5, (int64_t{1} << 21) + 8}) {
    auto x = randn(n, 17, 4.f);
    x[0] = 0.f, x[1] = 60.f, x[2] = -60.f, x[3] = 1e-3f;
    const auto xb = to_bf16(x), dyb = to_bf16(randn(n, 18));
    Dev<float> d_x(widen(xb)), d_dy(widen(dyb)), d_out(n), d_dx(n);
    Dev<uint16_t> d_xb(xb), d_dyb(dyb), d_out16(n), d_dx16(n);
    for (cuda::Act act : {cuda::Act::silu, cuda::Act::gelu, cuda::Act::sigmoid, cuda::Act::logsigmoid}) {
      const std::string what = "act " + std::to_string(static_cast<int>(act)) + " n " + std::to_string(n);
      cuda::act_forward_cuda(act, d_out.p, d_x.p, n, s);
      cuda::act_forward_bf16_cuda(act, d_out16.p, d_xb.p, n, s);
      EXPECT_GT(expect_bf16_of(d_out16.host(), d_out.host(), what + " forward"), 0u) << "not rounded?";
      cuda::act_backward_cuda(act, d_dx.p, d_dy.p, d_x.p, n, s);
      cuda::act_backward_bf16_cuda(act, d_dx16.p, d_dyb.p, d_xb.p, n, s);
      const auto dx = d_dx.host();
      EXPECT_GT(expect_bf16_of(d_dx16.host(), dx, what + " backward"), 0u) << "not rounded?";
      Dev<uint16_t> d_io(dyb);  // dinp == dout
      cuda::act_backward_bf16_cuda(act, d_io.p, d_io.p, d_xb.p, n, s);
      expect_bf16_of(d_io.host(), dx, what + " backward in place");
    }
  }
}

// F = 40, 64: eight columns per thread; F = 37 and the pointers one element off 16 bytes: the scalar kernels.
TEST_F(CudaOps, Bf16SwigluEqualsRoundedFp32) {
  for (int64_t N : kTs)
    for (int64_t F : {37, 40, 64})
      for (int64_t off : {0, 1}) {
        if (off == 1 && N != 113) continue;
        const auto gb = to_bf16(randn(N * 2 * F, 19, 3.f)), dyb = to_bf16(randn(N * F, 20));
        Dev<float> d_g(widen(gb)), d_dy(widen(dyb)), d_out(N * F), d_dg(N * 2 * F);
        cuda::swiglu_forward_cuda(d_out.p, d_g.p, N, F, s);
        cuda::swiglu_backward_cuda(d_dg.p, d_dy.p, d_g.p, N, F, s);
        const auto shifted = [&](const std::vector<uint16_t>& v) {  // `off` zeros, then v
          std::vector<uint16_t> w(off, 0);
          w.insert(w.end(), v.begin(), v.end());
          return w;
        };
        Dev<uint16_t> d_gb(shifted(gb)), d_dyb(shifted(dyb)), d_out16(off + N * F), d_dg16(off + N * 2 * F);
        cuda::swiglu_forward_bf16_cuda(d_out16.p + off, d_gb.p + off, N, F, s);
        cuda::swiglu_backward_bf16_cuda(d_dg16.p + off, d_dyb.p + off, d_gb.p + off, N, F, s);
        const auto out16 = d_out16.host(), dg16 = d_dg16.host();
        const std::string what = "swiglu N " + std::to_string(N) + " F " + std::to_string(F) + " offset " +
                                 std::to_string(off);
        EXPECT_GT(expect_bf16_of({out16.begin() + off, out16.end()}, d_out.host(), what + " forward"), 0u);
        EXPECT_GT(expect_bf16_of({dg16.begin() + off, dg16.end()}, d_dg.host(), what + " backward"), 0u);
      }
}

// The SwiGLU MLP's down-projection d(input) and SwiGLU backward in one kernel, against the CPU in
// double on the same bf16 values (ds = dout w_down, then the SwiGLU gradient), within the output's
// bf16 rounding: rows past a tile's end (N = 1, 7, 113, 257), K in one to eight chunks. Shapes it
// does not take are refused.
TEST_F(CudaOps, SwigluDownBackwardTracksDouble) {
  const std::pair<int64_t, int64_t> shapes[] = {{64, 64}, {128, 512}, {256, 192}, {512, 128}};
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{257}, int64_t{4096}})
    for (auto [D, F] : shapes) {
      const auto dyb = to_bf16(randn(N * D, 31)), wdb = to_bf16(randn(D * F, 32, 1.f / std::sqrt(float(D))));
      const auto gb = to_bf16(randn(N * 2 * F, 33, 2.f));
      Dev<uint16_t> d_dy(dyb), d_w(wdb), d_g(gb), d_dg(N * 2 * F);
      ASSERT_TRUE(cuda::swiglu_down_backward_fits(D, F, {d_dy.p, d_w.p, d_g.p, d_dg.p}));
      cuda::swiglu_down_backward_bf16_cuda(d_dg.p, d_dy.p, d_w.p, d_g.p, N, D, F, s);
      const auto got = widen(d_dg.host());
      const auto dy = widen(dyb), wd = widen(wdb), g = widen(gb);
      double worst = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t f = 0; f < F; ++f) {
          double ds = 0;
          for (int64_t k = 0; k < D; ++k) ds += double(dy[n * D + k]) * wd[k * F + f];
          const double x = g[n * 2 * F + f], u = g[n * 2 * F + F + f], sg = 1 / (1 + std::exp(-x));
          const double want[2] = {ds * u * sg * (1 + x * (1 - sg)), ds * x * sg};
          for (int h = 0; h < 2; ++h) {
            const double err = std::fabs(got[n * 2 * F + h * F + f] - want[h]) / (4e-3 * std::fabs(want[h]) + 1e-4);
            worst = std::max(worst, err);
          }
        }
      EXPECT_LE(worst, 1.0) << "N " << N << " D " << D << " F " << F;
    }
  Dev<uint16_t> d(64 * 256);
  EXPECT_FALSE(cuda::swiglu_down_backward_fits(96, 64, {d.p}));
  EXPECT_FALSE(cuda::swiglu_down_backward_fits(64, 64, {d.p + 1}));
  EXPECT_THROW(cuda::swiglu_down_backward_bf16_cuda(d.p, d.p, d.p, d.p, 1, 64, 40, s), Error);
  EXPECT_TRUE(cuda::swiglu_down_backward_pays(32768, 128, 512, 132));    // a5_l32's MLP: 4096 tiles
  EXPECT_FALSE(cuda::swiglu_down_backward_pays(1664, 64, 256, 132));     // below a wave (4 a SM)
  EXPECT_FALSE(cuda::swiglu_down_backward_pays(49152, 256, 1024, 132));  // D = 256: the product's share grows
}

// The SwiGLU MLP's input product and SwiGLU in one kernel, against the CPU in double on the same bf16
// values: g = h w^T within its bf16 rounding, and s is swiglu_forward_bf16_cuda of the g it stored,
// bit for bit. Rows past a tile's end (N = 1, 7, 113, 257) and a CTA's several row tiles (4096), K in
// one and two chunks; shapes it does not take (D > 128) are refused.
TEST_F(CudaOps, SwigluUpForwardTracksDouble) {
  const std::pair<int64_t, int64_t> shapes[] = {{64, 64}, {128, 512}, {64, 192}, {128, 1024}};
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{257}, int64_t{4096}})
    for (auto [D, F] : shapes) {
      const auto hb = to_bf16(randn(N * D, 41)), wb = to_bf16(randn(2 * F * D, 42, 2.f / std::sqrt(float(D))));
      Dev<uint16_t> d_h(hb), d_w(wb), d_g(N * 2 * F), d_s(N * F), d_s2(N * F);
      ASSERT_TRUE(cuda::swiglu_up_forward_fits(D, F, {d_h.p, d_w.p, d_g.p, d_s.p}));
      cuda::swiglu_up_forward_bf16_cuda(d_g.p, d_s.p, d_h.p, d_w.p, N, D, F, s);
      cuda::swiglu_forward_bf16_cuda(d_s2.p, d_g.p, N, F, s);
      const auto got = widen(d_g.host());
      const auto h = widen(hb), w = widen(wb);
      double worst = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < 2 * F; ++j) {
          double want = 0;
          for (int64_t k = 0; k < D; ++k) want += double(h[n * D + k]) * w[j * D + k];
          worst = std::max(worst, std::fabs(got[n * 2 * F + j] - want) / (4e-3 * std::fabs(want) + 1e-4));
        }
      EXPECT_LE(worst, 1.0) << "N " << N << " D " << D << " F " << F;
      EXPECT_EQ(d_s.host(), d_s2.host()) << "N " << N << " D " << D << " F " << F;
    }
  Dev<uint16_t> d(64 * 256);
  EXPECT_FALSE(cuda::swiglu_up_forward_fits(96, 64, {d.p}));
  EXPECT_FALSE(cuda::swiglu_up_forward_fits(256, 64, {d.p}));
  EXPECT_FALSE(cuda::swiglu_up_forward_fits(64, 64, {d.p + 1}));
  EXPECT_THROW(cuda::swiglu_up_forward_bf16_cuda(d.p, d.p, d.p, d.p, 1, 64, 40, s), Error);
  EXPECT_TRUE(cuda::swiglu_up_forward_pays(32768, 128, 512, 132));    // a5_l32's MLP: 4096 tiles
  EXPECT_FALSE(cuda::swiglu_up_forward_pays(1664, 64, 256, 132));     // below a wave (2 a SM)
  EXPECT_FALSE(cuda::swiglu_up_forward_pays(49152, 256, 1024, 132));  // D = 256
}

TEST_F(CudaOps, Bf16RopeEqualsRoundedFp32) {
  for (int64_t T : kTs)
    for (int64_t Dh : {12, 16, 32, 64, 128}) {  // 12: a pair a thread, else four
      const int64_t B = 2, H = 3, n = B * T * H * Dh;
      Dev<float> d_cs(T * Dh);
      cuda::rope_table_cuda(d_cs.p, T, Dh, 10000.0, s);
      for (bool backward : {false, true}) {
        // The forward reads fp32 rows (unrounded), the backward bf16 ones.
        const auto x = backward ? widen(to_bf16(randn(n, 24))) : randn(n, 23);
        const auto xb = to_bf16(x);
        Dev<float> d_x(x), d_y(n);
        Dev<uint16_t> d_xb(xb), d_yb(n);
        const std::string what = std::string("rope ") + (backward ? "backward" : "forward") + " T " +
                                 std::to_string(T) + " Dh " + std::to_string(Dh);
        if (backward) {
          cuda::rope_backward_cuda(d_y.p, d_x.p, d_cs.p, B, T, H, Dh, s);
          cuda::rope_backward_bf16_cuda(d_yb.p, d_xb.p, d_cs.p, B, T, H, Dh, s);
        } else {
          cuda::rope_forward_cuda(d_y.p, d_x.p, d_cs.p, B, T, H, Dh, s);
          cuda::rope_forward_bf16_cuda(d_yb.p, d_x.p, d_cs.p, B, T, H, Dh, s);
        }
        const auto y = d_y.host();
        const size_t rounded = expect_bf16_of(d_yb.host(), y, what);
        if (!backward || T > 1) {  // the backward at t = 0 is the identity on bf16 values
          EXPECT_GT(rounded, 0u) << what << ": not rounded?";
        }
        if (backward) {
          cuda::rope_backward_bf16_cuda(d_xb.p, d_xb.p, d_cs.p, B, T, H, Dh, s);  // in place
          expect_bf16_of(d_xb.host(), y, what + " in place");
        }
      }
    }
}

// Empty sizes launch nothing; RoPE rejects shapes it cannot run, as the fp32 version does.
TEST_F(CudaOps, Bf16EmptySizesAndRopeShapeErrors) {
  EXPECT_NO_THROW(cuda::rmsnorm_forward_bf16_cuda(nullptr, nullptr, nullptr, nullptr, 0, 64, 1e-6, s));
  EXPECT_NO_THROW(
      cuda::layernorm_forward_bf16_cuda(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 64, 1e-5, s));
  EXPECT_NO_THROW(cuda::act_forward_bf16_cuda(cuda::Act::gelu, nullptr, nullptr, 0, s));
  EXPECT_NO_THROW(cuda::act_backward_bf16_cuda(cuda::Act::gelu, nullptr, nullptr, nullptr, 0, s));
  EXPECT_NO_THROW(cuda::swiglu_forward_bf16_cuda(nullptr, nullptr, 0, 64, s));
  EXPECT_NO_THROW(cuda::swiglu_backward_bf16_cuda(nullptr, nullptr, nullptr, 7, 0, s));
  EXPECT_NO_THROW(cuda::rope_forward_bf16_cuda(nullptr, nullptr, nullptr, 0, 5, 2, 64, s));
  EXPECT_NO_THROW(cuda::rope_backward_bf16_cuda(nullptr, nullptr, nullptr, 2, 0, 2, 64, s));
  EXPECT_ANY_THROW(cuda::rope_forward_bf16_cuda(nullptr, nullptr, nullptr, 1, 1, 1, 15, s));    // odd Dh
  EXPECT_ANY_THROW(cuda::rope_backward_bf16_cuda(nullptr, nullptr, nullptr, 1, 1, 1, 2050, s));  // Dh > 2048
  CUDA_CHECK(cudaDeviceSynchronize());
}

// out = x W^T and its gradients with bf16 x, W, dy (fp32 accumulation) against the CPU layer on the
// same bf16-exact values: fp32 outputs agree to fp32 summation error, bf16 outputs to one rounding.
// Mixed operand types, a bias on a bf16 output and accumulating into one are errors.
TEST_F(CudaOps, LinearOnBf16Operands) {
  cuda::Blas blas(cuda::MatmulPrecision::bf16, s);
  for (int64_t N : kTs)
    for (auto [I, O] : {std::pair<int64_t, int64_t>{16, 48}, {130, 7}, {64, 257}}) {
      const auto xb = to_bf16(randn(N * I, 4)), wb = to_bf16(randn(O * I, 5, 0.2f)), dyb = to_bf16(randn(N * O, 7));
      const auto x = widen(xb), w = widen(wb), dy = widen(dyb), b = randn(O, 6);
      auto dx = randn(N * I, 8), dw = randn(O * I, 9);
      std::vector<float> y(N * O), dx0(N * I, 0.f);
      nn::linear_forward(y.data(), x.data(), w.data(), b.data(), N, I, O);
      Dev<uint16_t> d_xb(xb), d_wb(wb), d_dyb(dyb), d_y16(N * O), d_dx16(N * I);
      Dev<float> d_b(b), d_y(N * O), d_dx(dx), d_dw(dw);
      cuda::linear_forward_cuda(blas, cuda::f32_target(d_y.p), cuda::bf16_operand(d_xb.p), cuda::bf16_operand(d_wb.p),
                                d_b.p, N, I, O);
      expect_close(d_y.host(), y, 1e-4, 1e-4, "bf16 linear, fp32 out");
      nn::linear_forward(y.data(), x.data(), w.data(), static_cast<const float*>(nullptr), N, I, O);
      cuda::linear_forward_cuda(blas, cuda::bf16_target(d_y16.p), cuda::bf16_operand(d_xb.p),
                                cuda::bf16_operand(d_wb.p), nullptr, N, I, O);
      expect_close(widen(d_y16.host()), y, 1.0 / 256, 1e-5, "bf16 linear, bf16 out");
      // The residual form (fp32 out = residual + product; cuBLASLt's epilogue on bf16 operands).
      const auto res = randn(N * O, 11, 3.f);
      Dev<float> d_res(res);
      cuda::linear_forward_residual_cuda(blas, d_y.p, cuda::bf16_operand(d_xb.p), cuda::bf16_operand(d_wb.p), d_res.p,
                                         N, I, O);
      for (int64_t i = 0; i < N * O; ++i) y[i] += res[i];
      expect_close(d_y.host(), y, 1e-4, 1e-4, "bf16 linear, fp32 residual out");
      // Backward: dinp accumulated into fp32, then overwritten in bf16; dweight accumulated.
      nn::linear_backward(dx.data(), dw.data(), static_cast<float*>(nullptr), dy.data(), x.data(), w.data(), N, I, O);
      cuda::linear_backward_cuda(blas, cuda::f32_target(d_dx.p), d_dw.p, cuda::bf16_operand(d_dyb.p),
                                 cuda::bf16_operand(d_xb.p), cuda::bf16_operand(d_wb.p), N, I, O, true);
      expect_close(d_dx.host(), dx, 1e-4, 1e-4, "bf16 linear dinp (accumulated)");
      expect_close(d_dw.host(), dw, 1e-4, 1e-4, "bf16 linear dweight");
      nn::linear_backward(dx0.data(), static_cast<float*>(nullptr), static_cast<float*>(nullptr), dy.data(), x.data(),
                          w.data(), N, I, O);
      cuda::linear_backward_cuda(blas, cuda::bf16_target(d_dx16.p), nullptr, cuda::bf16_operand(d_dyb.p),
                                 cuda::bf16_operand(d_xb.p), cuda::bf16_operand(d_wb.p), N, I, O, false);
      expect_close(widen(d_dx16.host()), dx0, 1.0 / 256, 1e-5, "bf16 linear dinp (bf16, overwritten)");
    }
  Dev<float> f(64);
  Dev<uint16_t> h(64);
  EXPECT_THROW(cuda::linear_forward_residual_cuda(blas, f.p, cuda::bf16_operand(h.p), cuda::f32_operand(f.p), f.p, 4,
                                                  4, 4),
               Error);
  EXPECT_THROW(cuda::linear_forward_cuda(blas, cuda::f32_target(f.p), cuda::bf16_operand(h.p), cuda::f32_operand(f.p),
                                         nullptr, 4, 4, 4),
               Error);
  EXPECT_THROW(cuda::linear_forward_cuda(blas, cuda::bf16_target(h.p), cuda::bf16_operand(h.p),
                                         cuda::bf16_operand(h.p), f.p, 4, 4, 4),
               Error);
  EXPECT_THROW(cuda::linear_backward_cuda(blas, cuda::bf16_target(h.p), nullptr, cuda::bf16_operand(h.p),
                                          cuda::bf16_operand(h.p), cuda::bf16_operand(h.p), 4, 4, 4, true),
               Error);
}

// Parts of 16 bf16, 8 fp32, 3 fp32 and 5 bf16 columns packed into rows of 40 (bf16: fp32 parts
// rounded; the pad zeroed over a poisoned buffer; eight-column groups where aligned, single columns
// elsewhere), fp32 parts into fp32 rows, over row counts past the grid's 65535; then one flat row
// (the runner's weight packing), add_segments, and one row of 20000 columns.
TEST_F(CudaOps, PackColumnsAndAddSegments) {
  for (int64_t rows : {1, 7, 113, 70001}) {
    const int64_t widths[] = {16, 8, 3, 5}, ld = 40;
    std::vector<std::vector<float>> src;
    for (int p = 0; p < 4; ++p) src.push_back(randn(rows * widths[p], 1 + p));
    Dev<uint16_t> d_a(to_bf16(src[0])), d_d(to_bf16(src[3])), dst(std::vector<uint16_t>(rows * ld, 0x7fc0));  // NaN
    Dev<float> d_b(src[1]), d_c(src[2]), d_a32(src[0]), dst32(std::vector<float>(rows * ld, NAN));
    const cuda::PackPart parts[] = {{d_a.p, 16, false}, {d_b.p, 8, true}, {d_c.p, 3, true}, {d_d.p, 5, false}};
    cuda::pack_columns_cuda(dst.p, false, ld, parts, 4, rows, s);
    const cuda::PackPart parts32[] = {{d_a32.p, 16, true}, {d_b.p, 8, true}, {d_c.p, 3, true}};
    cuda::pack_columns_cuda(dst32.p, true, ld, parts32, 3, rows, s);
    const auto got = dst.host();
    const auto got32 = dst32.host();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0, p = 0, begin = 0; j < ld; ++j) {
        while (p < 4 && j >= begin + widths[p]) begin += widths[p++];
        const float want = p < 4 ? src[p][r * widths[p] + j - begin] : 0.f;
        ASSERT_EQ(got[r * ld + j], to_bf16({want})[0]) << "rows " << rows << " r " << r << " column " << j;
        const float want32 = p < 3 ? want : 0.f;
        ASSERT_EQ(got32[r * ld + j], want32) << "fp32, rows " << rows << " r " << r << " column " << j;
      }
  }
  // One flat row: [3 x 40 | 2 x 40 | pad] fp32 (a [KP, D] weight block), then its sum split back.
  const auto w1 = randn(120, 4), w2 = randn(80, 5), g = randn(256, 6);
  Dev<float> d_w1(w1), d_w2(w2), flat(std::vector<float>(256, NAN)), d_g(g);
  const cuda::PackPart wp[] = {{d_w1.p, 120, true}, {d_w2.p, 80, true}};
  cuda::pack_columns_cuda(flat.p, true, 256, wp, 2, 1, s);
  const auto f = flat.host();
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(f[i], i < 120 ? w1[i] : i < 200 ? w2[i - 120] : 0.f) << i;
  const cuda::AddSegment segs[] = {{d_w1.p, 120}, {d_w2.p, 80}};
  cuda::add_segments_cuda(d_g.p, segs, 2, s);
  const auto s1 = d_w1.host(), s2 = d_w2.host();
  for (int64_t i = 0; i < 120; ++i) ASSERT_EQ(s1[i], w1[i] + g[i]) << i;
  for (int64_t i = 0; i < 80; ++i) ASSERT_EQ(s2[i], w2[i] + g[120 + i]) << i;
  // A segment with null data skips its stretch of the source (the runner's folded PaTH weight).
  const cuda::AddSegment skip_first[] = {{nullptr, 120}, {d_w2.p, 80}};
  cuda::add_segments_cuda(d_g.p, skip_first, 2, s);
  const auto s3 = d_w2.host();
  for (int64_t i = 0; i < 80; ++i) ASSERT_EQ(s3[i], s2[i] + g[120 + i]) << i;
  // A wide row with a part not in 8-column groups (a column a thread): [9000 | 7001 | pad] of 20000.
  const auto u1 = randn(9000, 7), u2 = randn(7001, 8);
  Dev<float> d_u1(u1), d_u2(u2), wide_row(std::vector<float>(20000, NAN));
  const cuda::PackPart up[] = {{d_u1.p, 9000, true}, {d_u2.p, 7001, true}};
  cuda::pack_columns_cuda(wide_row.p, true, 20000, up, 2, 1, s);
  const auto wr = wide_row.host();
  for (int64_t i = 0; i < 20000; ++i) ASSERT_EQ(wr[i], i < 9000 ? u1[i] : i < 16001 ? u2[i - 9000] : 0.f) << i;
  // A part marked in place (its producer wrote it into the rows) is left as it is; the others and the
  // pad are written around it: [16 in place | 8 | pad] of 32, over many rows and one.
  for (int64_t rows : {113, 1}) {
    std::vector<uint16_t> pre(rows * 32);
    for (size_t i = 0; i < pre.size(); ++i) pre[i] = static_cast<uint16_t>(i * 7919u);
    const auto b = randn(rows * 8, 9);
    Dev<uint16_t> dst(pre);
    Dev<float> d_b(b);
    const cuda::PackPart parts[] = {{nullptr, 16, false, true}, {d_b.p, 8, true}};
    cuda::pack_columns_cuda(dst.p, false, 32, parts, 2, rows, s);
    const auto got = dst.host();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 32; ++j) {
        const uint16_t want = j < 16 ? pre[r * 32 + j] : j < 24 ? to_bf16({b[r * 8 + j - 16]})[0] : uint16_t{0};
        ASSERT_EQ(got[r * 32 + j], want) << "in place, r " << r << " column " << j;
      }
  }
  // Misuse throws: a bf16 part into fp32 rows, parts wider than the rows, no parts.
  Dev<uint16_t> h(64);
  const cuda::PackPart bad16[] = {{h.p, 4, false}}, wide[] = {{h.p, 40, false}};
  EXPECT_THROW(cuda::pack_columns_cuda(flat.p, true, 8, bad16, 1, 1, s), Error);
  EXPECT_THROW(cuda::pack_columns_cuda(h.p, false, 32, wide, 1, 1, s), Error);
  EXPECT_THROW(cuda::pack_columns_cuda(h.p, false, 32, wide, 0, 1, s), Error);
  EXPECT_THROW(cuda::add_segments_cuda(d_g.p, segs, 9, s), Error);
}

// Rows gathered by an index (padding rows -1: zeros) and expanded back over every row (zeros off
// the rows, written over a poisoned output), one tensor or two in one launch (an fp32 one with fp32
// or bf16 bits), exact.
TEST_F(CudaOps, GatherAndExpandRows) {
  const int64_t N = 113, D = 24;
  const std::vector<int32_t> rows = {0, 5, 6, 112, 40, -1, -1};  // -1: padding
  const int64_t Mr = static_cast<int64_t>(rows.size());
  std::vector<int32_t> row_of(N, -1);
  for (int64_t m = 0; m < Mr; ++m)
    if (rows[m] >= 0) row_of[rows[m]] = static_cast<int32_t>(m);
  const auto x = randn(N * D, 34);
  Dev<float> d_x(x), d_g(std::vector<float>(Mr * D, 7.f)), d_back(std::vector<float>(N * D, 7.f));  // 7: not written
  Dev<int32_t> d_rows(rows), d_row_of(row_of);
  cuda::gather_rows_cuda(d_g.p, d_x.p, D, nullptr, nullptr, 0, false, d_rows.p, Mr, s);
  cuda::expand_rows_cuda(d_back.p, d_g.p, D, nullptr, nullptr, 0, false, d_row_of.p, N, s);
  std::vector<float> expect(N * D, 0.f), gathered(Mr * D, 0.f);
  for (int64_t m = 0; m < Mr; ++m) {
    if (rows[m] < 0) continue;
    std::copy_n(x.data() + rows[m] * D, D, expect.data() + rows[m] * D);
    std::copy_n(x.data() + rows[m] * D, D, gathered.data() + m * D);
  }
  expect_close(d_g.host(), gathered, 0, 0, "gather rows (padding rows zero)");
  expect_close(d_back.host(), expect, 0, 0, "gather + expand rows");
  // With a second tensor y in the same launch, fp32 or bf16 bits (Db = 5: a column a thread, 8: four).
  auto check_pair = [&](auto y, bool bf, int64_t Db) {
    using T = typename decltype(y)::value_type;
    std::vector<T> yg(Mr * Db, T(0)), yback(N * Db, T(0));
    for (int64_t m = 0; m < Mr; ++m)
      if (rows[m] >= 0)
        for (int64_t c = 0; c < Db; ++c) yg[m * Db + c] = yback[rows[m] * Db + c] = y[rows[m] * Db + c];
    Dev<T> d_y(y), d_yg(std::vector<T>(Mr * Db, T(7))), d_yback(std::vector<T>(N * Db, T(7)));
    Dev<float> d_g2(std::vector<float>(Mr * D, 7.f)), d_back2(std::vector<float>(N * D, 7.f));
    cuda::gather_rows_cuda(d_g2.p, d_x.p, D, d_yg.p, d_y.p, Db, bf, d_rows.p, Mr, s);
    cuda::expand_rows_cuda(d_back2.p, d_g2.p, D, d_yback.p, d_yg.p, Db, bf, d_row_of.p, N, s);
    const std::string what = fmt::format(" (bf16 {}, Db {})", bf, Db);
    expect_close(d_g2.host(), gathered, 0, 0, "gather rows, the fp32 tensor" + what);
    expect_close(d_back2.host(), expect, 0, 0, "expand rows, the fp32 tensor" + what);
    EXPECT_EQ(d_yg.host(), yg) << "gather rows, the second tensor" << what;
    EXPECT_EQ(d_yback.host(), yback) << "expand rows, the second tensor" << what;
  };
  std::vector<uint16_t> bits(N * 8);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i * 7919u + 1);
  for (int64_t Db : {5, 8}) {
    check_pair(randn(N * Db, 36), false, Db);
    check_pair(std::vector<uint16_t>(bits.begin(), bits.begin() + N * Db), true, Db);
  }
}

}  // namespace
}  // namespace sb
#endif
