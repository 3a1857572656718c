// test_ops.cpp: the dense, activation and loss ops of src/nn (ops_basic, ops_act, ops_loss):
// forward against naive independent formulas, finite-difference gradients in double for every
// input and parameter (loss = sum(out * G), random G), float vs double agreement, error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "nn/ops_act.hpp"
#include "nn/ops_basic.hpp"
#include "nn/ops_loss.hpp"
#include "ops_test_util.hpp"

namespace {

using namespace sb::nn;
using namespace sb::test;

const int64_t kRows[] = {1, 7, 13};
const int64_t kDims[] = {4, 6, 16};

// ---- embedding ---------------------------------------------------------------------------------
TEST(Embedding, ForwardCopiesRowsAndBackwardAccumulatesRepeats) {
  const int64_t V = 5, D = 3, N = 4;
  const Vec wte = randn(V * D, 1);
  const int32_t ids[N] = {2, 0, 2, 4};
  Vec out(N * D);
  embedding_forward(out.data(), ids, wte.data(), N, V, D);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(out[n * D + d], wte[ids[n] * D + d]);
  const Vec dout = randn(N * D, 2);
  GradBuf dwte(V * D, 3);
  embedding_backward(dwte.data(), dout.data(), ids, N, V, D);
  const Vec d = dwte.delta();
  for (int64_t c = 0; c < D; ++c) {
    EXPECT_NEAR(d[2 * D + c], dout[0 * D + c] + dout[2 * D + c], 1e-14);
    EXPECT_NEAR(d[0 * D + c], dout[1 * D + c], 1e-14);
    EXPECT_NEAR(d[1 * D + c], 0.0, 1e-14);  // unused row untouched
    EXPECT_NEAR(d[4 * D + c], dout[3 * D + c], 1e-14);
  }
}

TEST(Embedding, GradientMatchesFiniteDifferences) {
  const int64_t V = 6, D = 4, N = 13;
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>((n * 5 + 1) % V);
  Vec wte = randn(V * D, 4);
  const Vec G = randn(N * D, 5);
  auto loss = [&] {
    Vec out(N * D);
    embedding_forward(out.data(), ids.data(), wte.data(), N, V, D);
    return dot(out, G);
  };
  GradBuf dwte(V * D, 6);
  embedding_backward(dwte.data(), G.data(), ids.data(), N, V, D);
  EXPECT_LE(grad_error_acc(loss, wte, dwte), kGradTol);
}

TEST(Position, ForwardAddsRowTAndGradientMatchesFiniteDifferences) {
  const int64_t B = 3, T = 5, D = 4, rows = 7;  // a table longer than T: rows T .. 6 stay unused
  Vec wpe = randn(rows * D, 8);
  const Vec x = randn(B * T * D, 9), G = randn(B * T * D, 10);
  Vec out = x;
  position_forward(out.data(), wpe.data(), B, T, D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d)
        EXPECT_EQ(out[(b * T + t) * D + d], x[(b * T + t) * D + d] + wpe[t * D + d]);
  auto loss = [&] {
    Vec o = x;
    position_forward(o.data(), wpe.data(), B, T, D);
    return dot(o, G);
  };
  GradBuf dwpe(rows * D, 11);
  position_backward(dwpe.data(), G.data(), B, T, D);
  EXPECT_LE(grad_error_acc(loss, wpe, dwpe), kGradTol);
  for (int64_t i = T * D; i < rows * D; ++i) EXPECT_EQ(dwpe.buf[i], dwpe.base[i]);
}

TEST(Embedding, RejectsOutOfRangeIds) {
  const Vec wte = randn(3 * 2, 7);
  Vec out(2 * 2);
  const int32_t bad_hi[2] = {0, 3}, bad_lo[2] = {-1, 0};
  EXPECT_THROW(embedding_forward(out.data(), bad_hi, wte.data(), 2, 3, 2), sb::Error);
  EXPECT_THROW(embedding_forward(out.data(), bad_lo, wte.data(), 2, 3, 2), sb::Error);
}

// ---- linear ------------------------------------------------------------------------------------
TEST(Linear, ForwardMatchesNaiveLoopsWithAndWithoutBias) {
  const int64_t N = 7, I = 6, O = 5;
  const Vec x = randn(N * I, 10), w = randn(O * I, 11), b = randn(O, 12);
  Vec out(N * O), out_nb(N * O);
  linear_forward(out.data(), x.data(), w.data(), b.data(), N, I, O);
  linear_forward<double>(out_nb.data(), x.data(), w.data(), nullptr, N, I, O);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i) s += x[n * I + i] * w[o * I + i];
      EXPECT_NEAR(out_nb[n * O + o], s, 1e-12);
      EXPECT_NEAR(out[n * O + o], s + b[o], 1e-12);
    }
  VecF outf(N * O);
  linear_forward(outf.data(), to_float(x).data(), to_float(w).data(), to_float(b).data(), N, I, O);
  EXPECT_LE(max_abs_diff(outf, out), 1e-5);
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  for (int64_t N : kRows)
    for (int64_t I : kDims)
      for (bool with_bias : {true, false}) {
        const int64_t O = I + 3;
        Vec x = randn(N * I, 20 + N), w = randn(O * I, 21 + I), b = randn(O, 22);
        const Vec G = randn(N * O, 23);
        const double* bias = with_bias ? b.data() : nullptr;
        auto loss = [&] {
          Vec out(N * O);
          linear_forward(out.data(), x.data(), w.data(), bias, N, I, O);
          return dot(out, G);
        };
        GradBuf dx(N * I, 24), dw(O * I, 25), db(O, 26);
        linear_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, G.data(), x.data(), w.data(),
                        N, I, O);
        EXPECT_LE(grad_error_acc(loss, x, dx), kGradTol) << N << " " << I;
        EXPECT_LE(grad_error_acc(loss, w, dw), kGradTol) << N << " " << I;
        if (with_bias) {
          EXPECT_LE(grad_error_acc(loss, b, db), kGradTol) << N << " " << I;
        }
        // nullptr gradient outputs are skipped and do not change the others.
        GradBuf dw_only(O * I, 25);
        linear_backward<double>(nullptr, dw_only.data(), nullptr, G.data(), x.data(), w.data(), N, I, O);
        EXPECT_EQ(dw_only.buf, dw.buf);
      }
}

// ---- RMSNorm / LayerNorm -----------------------------------------------------------------------
TEST(RmsNorm, ForwardMatchesFormula) {
  const int64_t N = 7, D = 6;
  const Vec x = randn(N * D, 30), w = randn(D, 31);
  Vec out(N * D), out_nw(N * D), rstd(N), rstd2(N);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, D, 1e-6);
  rmsnorm_forward<double>(out_nw.data(), rstd2.data(), x.data(), nullptr, N, D, 1e-6);
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0;
    for (int64_t d = 0; d < D; ++d) ms += x[n * D + d] * x[n * D + d] / D;
    const double r = 1 / std::sqrt(ms + 1e-6);
    EXPECT_NEAR(rstd[n], r, 1e-12);
    double ms_out = 0;
    for (int64_t d = 0; d < D; ++d) {
      EXPECT_NEAR(out[n * D + d], x[n * D + d] * r * w[d], 1e-12);
      ms_out += out_nw[n * D + d] * out_nw[n * D + d] / D;
    }
    EXPECT_NEAR(ms_out, 1.0, 1e-5);  // unit RMS without a gain (up to eps)
  }
  VecF outf(N * D), rstdf(N);
  rmsnorm_forward(outf.data(), rstdf.data(), to_float(x).data(), to_float(w).data(), N, D, 1e-6);
  EXPECT_LE(max_abs_diff(outf, out), 1e-5);
}

TEST(RmsNorm, GradientsMatchFiniteDifferences) {
  for (int64_t N : kRows)
    for (int64_t D : kDims)
      for (bool with_weight : {true, false}) {
        Vec x = randn(N * D, 40 + D), w = randn(D, 41);
        const Vec G = randn(N * D, 42);
        const double* wp = with_weight ? w.data() : nullptr;
        Vec out(N * D), rstd(N);
        auto loss = [&] {
          rmsnorm_forward(out.data(), rstd.data(), x.data(), wp, N, D, 1e-5);
          return dot(out, G);
        };
        loss();
        GradBuf dx(N * D, 43), dw(D, 44);
        rmsnorm_backward(dx.data(), dw.data(), G.data(), x.data(), wp, rstd.data(), N, D);
        EXPECT_LE(grad_error_acc(loss, x, dx), kGradTol) << N << " " << D;
        if (with_weight) {
          EXPECT_LE(grad_error_acc(loss, w, dw), kGradTol) << N << " " << D;
        } else {
          EXPECT_EQ(dw.buf, dw.base);  // no gain: dweight untouched
        }
      }
}

TEST(LayerNorm, ForwardHasZeroMeanUnitVarianceThenAffine) {
  const int64_t N = 13, D = 16;
  const Vec x = randn(N * D, 50, 3.0), w = randn(D, 51), b = randn(D, 52);
  Vec out(N * D), plain(N * D), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, D, 1e-5);
  layernorm_forward<double>(plain.data(), mean.data(), rstd.data(), x.data(), nullptr, nullptr, N, D, 1e-5);
  for (int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int64_t d = 0; d < D; ++d) m += x[n * D + d] / D;
    for (int64_t d = 0; d < D; ++d) v += (x[n * D + d] - m) * (x[n * D + d] - m) / D;
    EXPECT_NEAR(mean[n], m, 1e-12);
    EXPECT_NEAR(rstd[n], 1 / std::sqrt(v + 1e-5), 1e-12);
    double pm = 0, pv = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double y = (x[n * D + d] - m) / std::sqrt(v + 1e-5);
      EXPECT_NEAR(plain[n * D + d], y, 1e-12);
      EXPECT_NEAR(out[n * D + d], y * w[d] + b[d], 1e-12);
      pm += plain[n * D + d] / D;
      pv += plain[n * D + d] * plain[n * D + d] / D;
    }
    EXPECT_NEAR(pm, 0.0, 1e-12);
    EXPECT_NEAR(pv, 1.0, 1e-5);
  }
  VecF outf(N * D), meanf(N), rstdf(N);
  layernorm_forward(outf.data(), meanf.data(), rstdf.data(), to_float(x).data(), to_float(w).data(),
                    to_float(b).data(), N, D, 1e-5);
  EXPECT_LE(max_abs_diff(outf, out), 1e-5);
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  for (int64_t N : kRows)
    for (int64_t D : kDims)
      for (bool affine : {true, false}) {
        Vec x = randn(N * D, 60 + N), w = randn(D, 61), b = randn(D, 62);
        const Vec G = randn(N * D, 63);
        const double* wp = affine ? w.data() : nullptr;
        const double* bp = affine ? b.data() : nullptr;
        Vec out(N * D), mean(N), rstd(N);
        auto loss = [&] {
          layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), wp, bp, N, D, 1e-5);
          return dot(out, G);
        };
        loss();
        GradBuf dx(N * D, 64), dw(D, 65), db(D, 66);
        layernorm_backward(dx.data(), dw.data(), affine ? db.data() : nullptr, G.data(), x.data(), wp,
                           mean.data(), rstd.data(), N, D);
        EXPECT_LE(grad_error_acc(loss, x, dx), kGradTol) << N << " " << D;
        if (affine) {
          EXPECT_LE(grad_error_acc(loss, w, dw), kGradTol) << N << " " << D;
          EXPECT_LE(grad_error_acc(loss, b, db), kGradTol) << N << " " << D;
        }
      }
}

// ---- residual ----------------------------------------------------------------------------------
TEST(Residual, ForwardAddsInPlaceAndBackwardFansOut) {
  const int64_t n = 13;
  Vec a = randn(n, 70), b = randn(n, 71);
  Vec out(n);
  residual_forward(out.data(), a.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  Vec inplace = a;
  residual_forward(inplace.data(), inplace.data(), b.data(), n);  // out aliases inp1
  EXPECT_EQ(inplace, out);
  const Vec G = randn(n, 72);
  auto loss = [&] {
    residual_forward(out.data(), a.data(), b.data(), n);
    return dot(out, G);
  };
  GradBuf da(n, 73), db(n, 74);
  residual_backward(da.data(), db.data(), G.data(), n);
  EXPECT_LE(grad_error_acc(loss, a, da), kGradTol);
  EXPECT_LE(grad_error_acc(loss, b, db), kGradTol);
  GradBuf acc(n, 75);
  add_scaled(acc.data(), G.data(), -0.5, n);
  const Vec d = acc.delta();
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(d[i], -0.5 * G[i], 1e-14);
}

// ---- activations -------------------------------------------------------------------------------
using Fwd = void (*)(double*, const double*, int64_t);
using Bwd = void (*)(double*, const double*, const double*, int64_t);
using FwdF = void (*)(float*, const float*, int64_t);

struct Activation {
  const char* name;
  Fwd fwd;
  Bwd bwd;
  FwdF fwd_f;
  double (*ref)(double);
};

double silu_ref(double x) { return x / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double logsigmoid_ref(double x) { return -std::log1p(std::exp(-x)); }

const Activation kActivations[] = {
    {"silu", silu_forward<double>, silu_backward<double>, silu_forward<float>, silu_ref},
    {"gelu", gelu_forward<double>, gelu_backward<double>, gelu_forward<float>, gelu_ref},
    {"sigmoid", sigmoid_forward<double>, sigmoid_backward<double>, sigmoid_forward<float>, sigmoid_ref},
    {"logsigmoid", logsigmoid_forward<double>, logsigmoid_backward<double>, logsigmoid_forward<float>,
     logsigmoid_ref},
};

TEST(Activations, ForwardMatchesReferenceAndFloat) {
  const Vec x = randn(64, 80, 4.0);
  for (const auto& a : kActivations) {
    Vec out(x.size());
    a.fwd(out.data(), x.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], a.ref(x[i]), 1e-13) << a.name << " x=" << x[i];
    VecF outf(x.size());
    a.fwd_f(outf.data(), to_float(x).data(), static_cast<int64_t>(x.size()));
    EXPECT_LE(max_abs_diff(outf, out), 1e-5) << a.name;
  }
}

TEST(Activations, GradientsMatchFiniteDifferences) {
  for (const auto& a : kActivations)
    for (int64_t n : {1, 7, 13}) {
      Vec x = randn(n, 81 + n, 3.0);
      const Vec G = randn(n, 82);
      auto loss = [&] {
        Vec out(n);
        a.fwd(out.data(), x.data(), n);
        return dot(out, G);
      };
      GradBuf dx(n, 83);
      a.bwd(dx.data(), G.data(), x.data(), n);
      EXPECT_LE(grad_error_acc(loss, x, dx), kGradTol) << a.name << " n=" << n;
    }
}

TEST(Activations, KnownValuesAndExtremeInputs) {
  const Vec x = {1.0, -1.0, 0.0, -1000.0, 1000.0};
  Vec g(5), s(5), ls(5);
  gelu_forward(g.data(), x.data(), 5);
  EXPECT_NEAR(g[0], 0.8413447460685429, 1e-15);  // exact erf GELU, not the tanh form (0.841192)
  EXPECT_NEAR(g[1], -0.15865525393145707, 1e-15);
  sigmoid_forward(s.data(), x.data(), 5);
  EXPECT_EQ(s[2], 0.5);
  EXPECT_EQ(s[3], 0.0);
  EXPECT_EQ(s[4], 1.0);
  logsigmoid_forward(ls.data(), x.data(), 5);
  EXPECT_NEAR(ls[2], -std::log(2.0), 1e-15);
  EXPECT_EQ(ls[3], -1000.0);
  EXPECT_EQ(ls[4], 0.0);
  const VecF xf = to_float(x);
  VecF lsf(5), sf(5), dlsf(5, 0.0f);
  const VecF ones(5, 1.0f);
  logsigmoid_forward(lsf.data(), xf.data(), 5);
  sigmoid_forward(sf.data(), xf.data(), 5);
  logsigmoid_backward(dlsf.data(), ones.data(), xf.data(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(std::isfinite(lsf[i]) && std::isfinite(sf[i]) && std::isfinite(dlsf[i])) << i;
  }
  EXPECT_EQ(lsf[3], -1000.0f);
  EXPECT_EQ(dlsf[3], 1.0f);
  EXPECT_EQ(dlsf[4], 0.0f);
}

TEST(SwiGlu, ForwardSplitsGateAndUpAndGradientsMatch) {
  for (int64_t N : kRows)
    for (int64_t F : {1, 3, 8}) {
      Vec x = randn(N * 2 * F, 90 + F, 2.0);
      const Vec G = randn(N * F, 91);
      Vec out(N * F);
      swiglu_forward(out.data(), x.data(), N, F);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t f = 0; f < F; ++f)
          EXPECT_NEAR(out[n * F + f], silu_ref(x[n * 2 * F + f]) * x[n * 2 * F + F + f], 1e-13);
      VecF outf(N * F);
      swiglu_forward(outf.data(), to_float(x).data(), N, F);
      EXPECT_LE(max_abs_diff(outf, out), 1e-5);
      auto loss = [&] {
        swiglu_forward(out.data(), x.data(), N, F);
        return dot(out, G);
      };
      GradBuf dx(N * 2 * F, 92);
      swiglu_backward(dx.data(), G.data(), x.data(), N, F);
      EXPECT_LE(grad_error_acc(loss, x, dx), kGradTol) << N << " " << F;
    }
}

// ---- cross-entropy and accuracy ----------------------------------------------------------------
TEST(CrossEntropy, ForwardMatchesNaiveLogSoftmaxOverLabelledRows) {
  const int64_t N = 7, V = 5;
  const Vec logits = randn(N * V, 100, 2.0);
  const std::vector<int32_t> labels = {3, -100, 0, 4, -100, 1, 2};
  Vec losses(N, 9.0), lse(N);
  const LossSum r = crossentropy_forward(losses.data(), lse.data(), logits.data(), labels.data(), N, V);
  double sum = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (labels[n] < 0) {
      EXPECT_EQ(losses[n], 0.0);
      continue;
    }
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(logits[n * V + v]);
    const double ref = -std::log(std::exp(logits[n * V + labels[n]]) / z);
    EXPECT_NEAR(losses[n], ref, 1e-13);
    EXPECT_NEAR(lse[n], std::log(z), 1e-13);
    sum += ref;
  }
  EXPECT_EQ(r.count, 5);
  EXPECT_NEAR(r.loss_sum, sum, 1e-12);
  VecF lf(N), lsef(N);
  const LossSum rf = crossentropy_forward(lf.data(), lsef.data(), to_float(logits).data(), labels.data(), N, V);
  EXPECT_EQ(rf.count, 5);
  EXPECT_NEAR(rf.loss_sum, sum, 1e-5);
}

TEST(CrossEntropy, StableForHugeLogitsInFloat) {
  const int64_t V = 4;
  const VecF logits = {1000.f, 999.f, -1000.f, 998.f};
  const VecF shifted = {2.f, 1.f, -1998.f, 0.f};
  const int32_t label = 1;
  float loss = 0, lse = 0, loss2 = 0, lse2 = 0;
  crossentropy_forward(&loss, &lse, logits.data(), &label, 1, V);
  crossentropy_forward(&loss2, &lse2, shifted.data(), &label, 1, V);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, loss2, 1e-6);
  EXPECT_NEAR(lse, 1000.f + lse2 - 2.f, 1e-3);
  VecF d(V, 0.f);
  crossentropy_backward<float>(d.data(), nullptr, logits.data(), &label, 1, V, 1.0);
  float total = 0;
  for (float x : d) total += x;
  EXPECT_NEAR(total, 0.f, 1e-6);  // softmax - onehot sums to zero
  EXPECT_LT(d[1], 0.f);
}

TEST(CrossEntropy, GradientsMatchFiniteDifferences) {
  for (int64_t N : kRows)
    for (int64_t V : {2, 5, 16}) {
      Vec logits = randn(N * V, 110 + V, 2.0);
      std::vector<int32_t> labels(N);
      for (int64_t n = 0; n < N; ++n) labels[n] = (n % 3 == 1) ? -100 : static_cast<int32_t>((n * 7) % V);
      const Vec G = randn(N, 111);
      Vec losses(N), lse(N);
      auto weighted = [&] {
        crossentropy_forward<double>(losses.data(), nullptr, logits.data(), labels.data(), N, V);
        return dot(losses, G);
      };
      weighted();
      GradBuf dl(N * V, 112);
      crossentropy_backward(dl.data(), G.data(), logits.data(), labels.data(), N, V, 1.0);
      EXPECT_LE(grad_error_acc(weighted, logits, dl), kGradTol) << N << " " << V;
      // The mean loss: dloss_scale = 1 / count, no per-position weights.
      double count = 0;
      auto mean = [&] {
        const LossSum r = crossentropy_forward(losses.data(), lse.data(), logits.data(), labels.data(), N, V);
        count = static_cast<double>(r.count);
        return r.count ? r.loss_sum / r.count : 0.0;
      };
      mean();
      GradBuf dm(N * V, 113);
      crossentropy_backward<double>(dm.data(), nullptr, logits.data(), labels.data(), N, V,
                                    count > 0 ? 1.0 / count : 0.0);
      if (count > 0) {
        EXPECT_LE(grad_error_acc(mean, logits, dm), kGradTol) << N << " " << V;
      }
      for (int64_t n = 0; n < N; ++n) {  // ignored rows keep their previous contents
        if (labels[n] >= 0) continue;
        for (int64_t v = 0; v < V; ++v) EXPECT_EQ(dm.buf[n * V + v], dm.base[n * V + v]);
      }
    }
}

TEST(CrossEntropy, RejectsOutOfRangeLabels) {
  const Vec logits = randn(2 * 3, 120);
  Vec losses(2), lse(2);
  const int32_t bad[2] = {0, 3}, neg[2] = {-1, 0};
  EXPECT_THROW(crossentropy_forward(losses.data(), lse.data(), logits.data(), bad, 2, 3), sb::Error);
  EXPECT_THROW(crossentropy_forward(losses.data(), lse.data(), logits.data(), neg, 2, 3), sb::Error);
}

TEST(Accuracy, CountsArgmaxHitsOnScoredPositionsWithFirstIndexTies) {
  const int64_t V = 3;
  const Vec logits = {
      0.1, 0.9, 0.3,   // argmax 1
      2.0, 2.0, 1.0,   // tie 0/1 -> 0
      -1., -2., -0.5,  // argmax 2
      5.0, 0.0, 0.0,   // argmax 0
  };
  const std::vector<int32_t> labels = {1, 1, 2, -100};
  std::vector<uint8_t> correct(4, 7);
  AccuracyCount a = argmax_accuracy(correct.data(), logits.data(), labels.data(), nullptr, 4, V);
  EXPECT_EQ(a.count, 3);
  EXPECT_EQ(a.correct, 2);
  EXPECT_EQ(correct, (std::vector<uint8_t>{1, 0, 1, 0}));
  const std::vector<uint8_t> mask = {0, 1, 1, 0};
  a = argmax_accuracy<double>(nullptr, logits.data(), labels.data(), mask.data(), 4, V);
  EXPECT_EQ(a.count, 2);
  EXPECT_EQ(a.correct, 1);
  const VecF lf = to_float(logits);
  a = argmax_accuracy<float>(nullptr, lf.data(), labels.data(), mask.data(), 4, V);
  EXPECT_EQ(a.correct, 1);
  const std::vector<uint8_t> bad_mask = {0, 0, 0, 1};  // scores an unlabelled position
  EXPECT_THROW(argmax_accuracy<double>(nullptr, logits.data(), labels.data(), bad_mask.data(), 4, V),
               sb::Error);
}

}  // namespace
