// test_path_wpath.cpp: the PaTH w path (causal conv3 -> SiLU -> L2 norm) and the beta op: tap
// order, unit rows, causality, finite-difference gradients, the clamp, and a gradient check of the
// composite u, z -> (w, beta) -> PaTH attention (Blockwise).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nn/path_attention.hpp"
#include "nn/path_wpath.hpp"
#include "path_test_util.hpp"

namespace {

using namespace sb::test;
using sb::nn::kPathWNormEps;

struct WPath {
  int64_t B = 2, T = 6, H = 2, Dh = 3;
  Vec u, wconv, bias;
  int64_t C() const { return H * Dh; }
  int64_t n() const { return B * T * C(); }
  Vec forward(Vec* conv = nullptr, bool with_bias = true) const {
    Vec w(n()), a(n());
    sb::nn::path_wpath_forward<double>(w.data(), a.data(), u.data(), wconv.data(),
                                       with_bias ? bias.data() : nullptr, B, T, H, Dh,
                                       kPathWNormEps);
    if (conv) *conv = a;
    return w;
  }
};

WPath make_wpath(uint64_t seed) {
  WPath p;
  p.u = randn(p.n(), seed);
  p.wconv = randn(p.C() * 3, seed + 1, 0.7);
  p.bias = randn(p.C(), seed + 2, 0.3);
  return p;
}

TEST(PathWPath, TapOrderIsOldestFirstAndCausal) {
  WPath p = make_wpath(3);
  std::fill(p.u.begin(), p.u.end(), 0.0);
  for (int64_t c = 0; c < p.C(); ++c) p.u[c] = 1.0;  // delta at t = 0 in batch 0
  Vec a;
  p.forward(&a);
  for (int64_t c = 0; c < p.C(); ++c) {
    EXPECT_DOUBLE_EQ(a[0 * p.C() + c], p.bias[c] + p.wconv[c * 3 + 2]);  // current token: tap 2
    EXPECT_DOUBLE_EQ(a[1 * p.C() + c], p.bias[c] + p.wconv[c * 3 + 1]);
    EXPECT_DOUBLE_EQ(a[2 * p.C() + c], p.bias[c] + p.wconv[c * 3 + 0]);  // two back: tap 0
    EXPECT_DOUBLE_EQ(a[3 * p.C() + c], p.bias[c]);
    EXPECT_DOUBLE_EQ(a[(p.T + 0) * p.C() + c], p.bias[c]);  // batch 1 untouched
  }
}

TEST(PathWPath, RowsAreUnitPerHead) {
  const WPath p = make_wpath(5);
  Vec a;
  const Vec w = p.forward(&a);
  for (int64_t r = 0; r < p.B * p.T * p.H; ++r) {
    double n = 0, hn = 0;
    for (int64_t i = 0; i < p.Dh; ++i) {
      n += w[r * p.Dh + i] * w[r * p.Dh + i];
      const double x = a[r * p.Dh + i], h = x / (1 + std::exp(-x));
      hn += h * h;
    }
    EXPECT_NEAR(n, hn / (hn + kPathWNormEps), 1e-14);  // eps inside the square root
    if (hn > 1e-2) EXPECT_NEAR(n, 1.0, 1e-3);
  }
}

TEST(PathWPath, GradientsMatchFiniteDifferences) {
  for (bool with_bias : {true, false}) {
    WPath p = make_wpath(11);
    const Vec R = randn(p.n(), 12);
    auto loss = [&]() {
      const Vec w = p.forward(nullptr, with_bias);
      double l = 0;
      for (size_t i = 0; i < R.size(); ++i) l += w[i] * R[i];
      return l;
    };
    Vec a;
    p.forward(&a, with_bias);
    Vec du(p.n(), 0.0), dwconv(p.C() * 3, 0.0), dbias(p.C(), 0.0);
    sb::nn::path_wpath_backward<double>(du.data(), dwconv.data(), dbias.data(), R.data(), a.data(),
                                        p.u.data(), p.wconv.data(), p.B, p.T, p.H, p.Dh,
                                        kPathWNormEps);
    EXPECT_LE(grad_error(loss, p.u.data(), du.data(), p.n()), 1e-6);
    EXPECT_LE(grad_error(loss, p.wconv.data(), dwconv.data(), p.C() * 3), 1e-6);
    if (with_bias) EXPECT_LE(grad_error(loss, p.bias.data(), dbias.data(), p.C()), 1e-6);
  }
}

TEST(PathBeta, RangeClampAndGradient) {
  Vec z = randn(40, 21, 2.0);
  const double beta_max = 1.9;  // 2 sigmoid(z) = 1.9 at z = log(19) ~ 2.944
  for (auto& x : z)
    if (std::abs(x - std::log(19.0)) < 0.05) x += 0.2;  // keep away from the kink
  z.push_back(5.0);                                     // surely clamped
  const int64_t n = static_cast<int64_t>(z.size());
  Vec beta(n), R = randn(n, 22);
  sb::nn::path_beta_forward<double>(beta.data(), z.data(), n, beta_max);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_GT(beta[i], 0.0);
    EXPECT_LE(beta[i], beta_max);
    EXPECT_NEAR(beta[i], std::min(2.0 / (1.0 + std::exp(-z[i])), beta_max), 1e-15);
  }
  Vec dz(n, 0.0);
  sb::nn::path_beta_backward<double>(dz.data(), R.data(), z.data(), n, beta_max);
  EXPECT_EQ(dz[n - 1], 0.0);  // clamped: zero gradient
  auto loss = [&]() {
    Vec b(n);
    sb::nn::path_beta_forward<double>(b.data(), z.data(), n, beta_max);
    double l = 0;
    for (int64_t i = 0; i < n; ++i) l += b[i] * R[i];
    return l;
  };
  EXPECT_LE(grad_error(loss, z.data(), dz.data(), n), 1e-6);
  // No clamp (beta_max = 2): large z still gives beta < 2 and a positive derivative.
  Vec b2(1), dz2(1, 0.0), one(1, 1.0), z2(1, 3.0);
  sb::nn::path_beta_forward<double>(b2.data(), z2.data(), 1, 2.0);
  sb::nn::path_beta_backward<double>(dz2.data(), one.data(), z2.data(), 1, 2.0);
  EXPECT_LT(b2[0], 2.0);
  EXPECT_GT(dz2[0], 0.0);
}

TEST(PathWPath, CompositeWithAttentionMatchesFiniteDifferences) {
  // u, z -> w = wpath(u), beta = 2 sigmoid(z) -> PaTH (Blockwise, gate on) -> sum(out * R).
  WPath p = make_wpath(31);
  p.T = 7;
  p.u = randn(p.n(), 31);
  PathInputs in = make_inputs(p.B, p.T, p.H, p.Dh, true, 32);
  Vec z = randn(in.ns(), 33);
  const Vec R = randn(in.nx(), 34);
  const int64_t block = 3;
  auto run = [&](PathOut* o) {
    Vec a;
    in.w = p.forward(&a);
    sb::nn::path_beta_forward<double>(in.beta.data(), z.data(), in.ns(), 2.0);
    *o = path_fwd(in, sb::nn::PathForm::Blockwise, block);
    return a;
  };
  auto loss = [&]() {
    PathOut o;
    run(&o);
    double l = 0;
    for (size_t i = 0; i < R.size(); ++i) l += o.out[i] * R[i];
    return l;
  };
  PathOut o;
  const Vec a = run(&o);
  const PathGrads g = path_bwd(in, o, R, sb::nn::PathForm::Blockwise, block);
  Vec du(p.n(), 0.0), dwconv(p.C() * 3, 0.0), dbias(p.C(), 0.0), dz(in.ns(), 0.0);
  sb::nn::path_wpath_backward<double>(du.data(), dwconv.data(), dbias.data(), g.dw.data(), a.data(),
                                      p.u.data(), p.wconv.data(), p.B, p.T, p.H, p.Dh,
                                      kPathWNormEps);
  sb::nn::path_beta_backward<double>(dz.data(), g.dbeta.data(), z.data(), in.ns(), 2.0);
  EXPECT_LE(grad_error(loss, p.u.data(), du.data(), p.n()), 1e-6);
  EXPECT_LE(grad_error(loss, p.wconv.data(), dwconv.data(), p.C() * 3), 1e-6);
  EXPECT_LE(grad_error(loss, p.bias.data(), dbias.data(), p.C()), 1e-6);
  EXPECT_LE(grad_error(loss, z.data(), dz.data(), in.ns()), 1e-6);
}

}  // namespace
