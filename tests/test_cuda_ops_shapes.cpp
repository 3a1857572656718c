// test_cuda_ops_shapes.cpp: the row kernels of kernels/ops/ (cross-entropy and argmax, RMSNorm /
// LayerNorm, the PaTH w path, embedding, bias, a narrow weight gradient) against the CPU reference at
// the training shapes (32768 rows, the runner's reduce scratch) and awkward ones (1, 7, 113 rows; D
// 16 .. 1024; V 2 .. 1500; T 1 .. 257), on both sides of every kernel switch (vectorised / fallback,
// warp / block rows, fused / per-row w path), plus run-to-run bitwise determinism. Skips without a
// device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#ifndef STATEBENCH_HAVE_CUDA
TEST(CudaOpsShapes, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#else
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_ops_test_util.hpp"
#include "kernels/ops/ops.hpp"
#include "model/cuda/blas.hpp"
#include "nn/ops_basic.hpp"
#include "nn/ops_loss.hpp"
#include "nn/path_wpath.hpp"

namespace sb {
namespace {

using namespace test_cuda;

constexpr int64_t kRunnerScratch = cuda::kReduceChunks * 4096;  // Blas::reduce_scratch()

// Tolerance of a parameter gradient, a float sum of n terms of order 1 (both sides round).
double sum_atol(int64_t n) { return 1e-4 + 1e-6 * static_cast<double>(n); }

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << ": runs differ";
}

// V <= 64, 256, 1024: one warp per row holding 2, 8, 32 logits a lane; 1500: one block per row.
TEST_F(CudaOps, CrossEntropyRowShapes) {
  for (int64_t M : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{32768}})
    for (int64_t V : {2, 5, 64, 65, 257, 1000, 1500}) {
      if (M * V > (int64_t{1} << 24)) continue;
      SCOPED_TRACE(fmt::format("M {} V {}", M, V));
      auto logits = randn(M * V, 33, 3.f);
      std::mt19937 gen(static_cast<uint32_t>(M * 7 + V));
      std::vector<int32_t> labels(M);
      for (auto& l : labels) l = static_cast<int32_t>(gen() % V);
      if (V > 2) logits[V - 1] = logits[1] = 50.f;  // a tie in row 0: argmax must be index 1
      if (M > 1) std::fill(logits.begin() + V, logits.begin() + 2 * V, -7.f);  // row 1 all equal: argmax 0
      std::vector<float> losses(M), dl(M * V, 0.f);
      const nn::LossSum ls = nn::crossentropy_forward(losses.data(), static_cast<float*>(nullptr), logits.data(),
                                                      labels.data(), M, V);
      nn::crossentropy_backward(dl.data(), static_cast<const float*>(nullptr), logits.data(), labels.data(), M, V,
                                0.125);
      Dev<float> d_logits(logits), d_losses(M), d_dl(M * V);
      Dev<int32_t> d_labels(labels), d_arg(M);
      Dev<double> d_sum(cuda::crossentropy_sum_doubles(M));
      cuda::crossentropy_forward_cuda(d_losses.p, d_sum.p, d_logits.p, d_labels.p, M, V, s);
      cuda::crossentropy_backward_cuda(d_dl.p, d_logits.p, d_labels.p, M, V, 0.125f, s);
      cuda::argmax_rows_cuda(d_arg.p, d_logits.p, M, V, s);
      const auto got_losses = d_losses.host(), got_dl = d_dl.host();
      const double sum = d_sum.host()[0];
      expect_close(got_losses, losses, 1e-5, 1e-5, "crossentropy losses");
      EXPECT_NEAR(sum, ls.loss_sum, 1e-5 * (1 + std::fabs(ls.loss_sum)));
      expect_close(got_dl, dl, 1e-5, 1e-7, "crossentropy backward");
      const auto arg = d_arg.host();
      for (int64_t m = 0; m < M; ++m) {
        const float* row = logits.data() + m * V;
        ASSERT_EQ(arg[m], std::max_element(row, row + V) - row) << "argmax row " << m;
      }
      // a second run: the same bits
      cuda::crossentropy_forward_cuda(d_losses.p, d_sum.p, d_logits.p, d_labels.p, M, V, s);
      cuda::crossentropy_backward_cuda(d_dl.p, d_logits.p, d_labels.p, M, V, 0.125f, s);
      expect_bitwise(d_losses.host(), got_losses, "crossentropy losses");
      expect_bitwise(d_dl.host(), got_dl, "crossentropy backward");
      EXPECT_EQ(d_sum.host()[0], sum);
      EXPECT_EQ(d_sum.host()[1], 0.0);  // the block count left at 0
    }
}

// D % 4 == 0 up to 1024: float4 rows in registers (D = 100: 25 groups, a partial warp); D = 102, 1030:
// column loops. With the runner's scratch the weight gradients are fused into the backward.
TEST_F(CudaOps, NormRowShapes) {
  Dev<float> partials(static_cast<size_t>(kRunnerScratch));
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{32768}})
    for (int64_t D : {16, 100, 102, 128, 1024, 1030})
      for (bool use_scratch : {false, true}) {
        if (N * D > (int64_t{1} << 22)) continue;
        SCOPED_TRACE(fmt::format("N {} D {} scratch {}", N, D, use_scratch));
        const cuda::ReduceScratch scratch = use_scratch ? cuda::ReduceScratch{partials.p, kRunnerScratch}
                                                        : cuda::ReduceScratch{};
        const auto x = randn(N * D, 11, 2.f), g = randn(D, 12), bias = randn(D, 13), dy = randn(N * D, 14);
        const auto dg0 = randn(D, 15), db0 = randn(D, 16);
        Dev<float> d_x(x), d_g(g), d_b(bias), d_dy(dy), d_out(N * D), d_mean(N), d_rstd(N), d_dx(N * D);
        std::vector<float> out(N * D), mean(N), rstd(N), dx(N * D, 0.f), dg = dg0, db = db0;
        for (int norm = 0; norm < 2; ++norm) {
          const bool ln = norm == 1;
          const char* name = ln ? "layernorm" : "rmsnorm";
          std::fill(dx.begin(), dx.end(), 0.f), dg = dg0, db = db0;
          Dev<float> d_dg(dg0), d_db(db0), d_dg2(dg0), d_db2(db0), d_dx2(N * D);
          auto run = [&](float* dxp, float* dgp, float* dbp) {
            if (ln)
              cuda::layernorm_backward_cuda(dxp, dgp, dbp, d_dy.p, d_x.p, d_g.p, d_mean.p, d_rstd.p, N, D, s, scratch);
            else
              cuda::rmsnorm_backward_cuda(dxp, dgp, d_dy.p, d_x.p, d_g.p, d_rstd.p, N, D, s, scratch);
          };
          if (ln) {
            nn::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), g.data(), bias.data(), N, D);
            nn::layernorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), g.data(), mean.data(),
                                   rstd.data(), N, D);
            cuda::layernorm_forward_cuda(d_out.p, d_mean.p, d_rstd.p, d_x.p, d_g.p, d_b.p, N, D, 1e-5, s);
          } else {
            nn::rmsnorm_forward(out.data(), rstd.data(), x.data(), g.data(), N, D);
            nn::rmsnorm_backward(dx.data(), dg.data(), dy.data(), x.data(), g.data(), rstd.data(), N, D);
            cuda::rmsnorm_forward_cuda(d_out.p, d_rstd.p, d_x.p, d_g.p, N, D, 1e-6, s);
          }
          expect_close(d_out.host(), out, 1e-5, 1e-5, std::string(name) + " forward");
          expect_close(d_rstd.host(), rstd, 1e-5, 0, std::string(name) + " rstd");
          if (ln) expect_close(d_mean.host(), mean, 1e-5, 1e-6, "layernorm mean");
          run(d_dx.p, d_dg.p, d_db.p);
          const auto got_dx = d_dx.host(), got_dg = d_dg.host(), got_db = d_db.host();
          expect_close(got_dx, dx, 1e-4, 1e-5, std::string(name) + " dinp");
          expect_close(got_dg, dg, 1e-4, sum_atol(N), std::string(name) + " dweight");
          if (ln) expect_close(got_db, db, 1e-5, sum_atol(N), "layernorm dbias");
          run(d_dx2.p, d_dg2.p, d_db2.p);  // a second run: the same bits
          expect_bitwise(d_dx2.host(), got_dx, std::string(name) + " dinp");
          expect_bitwise(d_dg2.host(), got_dg, std::string(name) + " dweight");
          if (ln) expect_bitwise(d_db2.host(), got_db, "layernorm dbias");
          // dinp alone (no parameter gradient): the per-row launch, the same values
          run(d_dx2.p, nullptr, nullptr);
          expect_bitwise(d_dx2.host(), got_dx, std::string(name) + " dinp without dweight");
        }
      }
}

// Dh = 4 .. 128 with H Dh <= 1024: the fused kernels (C = 1024 at H 8 Dh 128); Dh = 12 (not a power of
// two groups), 256 (a head wider than a warp's float4s): the per-row kernels. The runner's scratch, a
// small one (few row chunks) and none (the per-row kernels' sums; the fused kernel keeps its partial
// sums in da_scratch); du or the parameter gradients alone.
TEST_F(CudaOps, PathWPathShapes) {
  Dev<float> partials(static_cast<size_t>(kRunnerScratch));
  struct Shape {
    int64_t B, H, Dh;
  };
  for (int64_t T : {int64_t{1}, int64_t{7}, int64_t{32}, int64_t{257}})
    for (const Shape& sh : {Shape{3, 1, 4}, Shape{2, 2, 16}, Shape{3, 4, 32}, Shape{2, 3, 64}, Shape{2, 8, 128},
                            Shape{2, 3, 12}, Shape{2, 1, 256}, Shape{1024, 4, 32}})
      for (int64_t floats : {kRunnerScratch, int64_t{3000}, int64_t{0}}) {
        const int64_t B = sh.B, H = sh.H, Dh = sh.Dh, C = H * Dh, n = B * T * C;
        if (B > 3 && T != 32) continue;  // the a5_l32 shape: B 1024, T 32, H 4, Dh 32
        const bool bias = floats != 3000;
        SCOPED_TRACE(fmt::format("B {} T {} H {} Dh {} scratch {} bias {}", B, T, H, Dh, floats, bias));
        const cuda::ReduceScratch scratch = floats ? cuda::ReduceScratch{partials.p, floats} : cuda::ReduceScratch{};
        const auto u = randn(n, 25), wc = randn(C * 3, 26, 0.5f), cb = randn(C, 27, 0.3f), dw = randn(n, 28);
        const auto dwc0 = randn(C * 3, 29), dcb0 = randn(C, 30);
        std::vector<float> w(n), conv(n), du(n, 0.f), dwc = dwc0, dcb = dcb0;
        nn::path_wpath_forward(w.data(), conv.data(), u.data(), wc.data(), bias ? cb.data() : nullptr, B, T, H, Dh,
                               1e-6f);
        nn::path_wpath_backward(du.data(), dwc.data(), bias ? dcb.data() : nullptr, dw.data(), conv.data(), u.data(),
                                wc.data(), B, T, H, Dh, 1e-6f);
        Dev<float> d_u(u), d_wc(wc), d_cb(cb), d_dw(dw), d_w(n), d_du(n), d_da(n);
        Dev<float> d_dwc(dwc0), d_dcb(dcb0), d_dwc2(dwc0), d_dcb2(dcb0), d_du2(n);
        const float* cbp = bias ? d_cb.p : nullptr;
        cuda::path_wpath_forward_cuda(d_w.p, d_u.p, d_wc.p, cbp, B, T, H, Dh, 1e-6f, s);
        expect_close(d_w.host(), w, 1e-5, 1e-5, "wpath w");
        cuda::path_wpath_backward_cuda(d_du.p, d_dwc.p, bias ? d_dcb.p : nullptr, d_da.p, d_dw.p, d_u.p, d_wc.p, cbp, B,
                                       T, H, Dh, 1e-6f, s, scratch);
        const auto got_du = d_du.host(), got_dwc = d_dwc.host(), got_dcb = d_dcb.host();
        expect_close(got_du, du, 1e-4, 1e-4, "wpath du");
        expect_close(got_dwc, dwc, 1e-4, sum_atol(B * T), "wpath dwconv");
        if (bias) expect_close(got_dcb, dcb, 1e-4, sum_atol(B * T), "wpath dbias");
        else expect_bitwise(got_dcb, dcb0, "wpath dbias untouched");
        // du alone, then the parameter gradients alone: the same bits as together
        cuda::path_wpath_backward_cuda(d_du2.p, nullptr, nullptr, d_da.p, d_dw.p, d_u.p, d_wc.p, cbp, B, T, H, Dh,
                                       1e-6f, s, scratch);
        expect_bitwise(d_du2.host(), got_du, "wpath du alone");
        cuda::path_wpath_backward_cuda(nullptr, d_dwc2.p, bias ? d_dcb2.p : nullptr, d_da.p, d_dw.p, d_u.p, d_wc.p, cbp,
                                       B, T, H, Dh, 1e-6f, s, scratch);
        expect_bitwise(d_dwc2.host(), got_dwc, "wpath dwconv alone");
        if (bias) expect_bitwise(d_dcb2.host(), got_dcb, "wpath dbias alone");
      }
}

// Four columns a thread where D (O) % 4 == 0 and the pointers are 16-byte aligned; else one.
TEST_F(CudaOps, EmbeddingAndBiasRowShapes) {
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{32768}})
    for (int64_t D : {6, 16, 100, 128}) {
      SCOPED_TRACE(fmt::format("N {} D {}", N, D));
      const int64_t V = 61;
      std::mt19937 gen(static_cast<uint32_t>(N + D));
      std::vector<int32_t> ids(N);
      for (auto& i : ids) i = static_cast<int32_t>(gen() % V);
      const auto wte = randn(V * D, 1), bias = randn(D, 2);
      std::vector<float> out(N * D);
      nn::embedding_forward(out.data(), ids.data(), wte.data(), N, V, D);
      Dev<int32_t> d_ids(ids);
      Dev<float> d_wte(wte), d_out(N * D), d_bias(bias);
      cuda::embedding_forward_cuda(d_out.p, d_ids.p, d_wte.p, N, V, D, s);
      expect_close(d_out.host(), out, 0, 0, "embedding forward");
      cuda::add_bias_cuda(d_out.p, d_bias.p, N, D, s);
      for (int64_t i = 0; i < N * D; ++i) out[i] += bias[i % D];
      expect_close(d_out.host(), out, 0, 0, "add bias");
      const auto flat = randn(N * D - 1, 3);  // one row of N D - 1 from an odd offset: the one-column kernel
      Dev<float> d_flat(flat);
      cuda::add_bias_cuda(d_out.p + 1, d_flat.p, 1, N * D - 1, s);
      for (int64_t i = 1; i < N * D; ++i) out[i] += flat[i - 1];
      expect_close(d_out.host(), out, 0, 0, "add bias, odd offset");
    }
}

// A narrow product's weight gradient (O <= kNarrowOut: fp32 column sums) against a double reference,
// through linear_backward_cuda in every precision (fp32 exact products even where the GEMMs would
// round to bf16), one chunk and the runner's scratch chunks, added to what is there; same bits twice.
TEST_F(CudaOps, NarrowWeightGradRowShapes) {
  for (auto prec : {cuda::MatmulPrecision::fp32, cuda::MatmulPrecision::bf16}) {
    cuda::Blas blas(prec, s);
    for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{512}, int64_t{32768}})
      for (auto [I, O] : {std::pair<int64_t, int64_t>{64, 5}, {130, 1}, {33, 16}}) {
        SCOPED_TRACE(fmt::format("precision {} N {} I {} O {}", static_cast<int>(prec), N, I, O));
        const auto x = randn(N * I, 41), dy = randn(N * O, 42), dw0 = randn(O * I, 43);
        std::vector<float> want(O * I);
        for (int64_t o = 0; o < O; ++o)
          for (int64_t i = 0; i < I; ++i) {
            double acc = dw0[o * I + i];
            for (int64_t n = 0; n < N; ++n) acc += static_cast<double>(dy[n * O + o]) * x[n * I + i];
            want[o * I + i] = static_cast<float>(acc);
          }
        Dev<float> d_x(x), d_dy(dy), d_dw(dw0), d_w(O * I);
        cuda::linear_backward_cuda(blas, nullptr, d_dw.p, nullptr, d_dy.p, d_x.p, d_w.p, N, I, O, false);
        const auto got = d_dw.host();
        expect_close(got, want, 1e-5, sum_atol(N), "narrow dweight");
        Dev<float> d_dw2(dw0);
        cuda::linear_backward_cuda(blas, nullptr, d_dw2.p, nullptr, d_dy.p, d_x.p, d_w.p, N, I, O, false);
        expect_bitwise(d_dw2.host(), got, "narrow dweight");
      }
  }
}

}  // namespace
}  // namespace sb
#endif
