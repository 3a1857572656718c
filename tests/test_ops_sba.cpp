// test_ops_sba.cpp: causal stick-breaking attention of src/nn/ops_sba: forward against the
// stick-breaking products written out key by key here, the remainder identity (weights + remainder
// = 1), causality, large logits, finite-difference gradients in double (every coordinate on small
// shapes, random directions on T = 113 / 257 up to Dh = 128), accumulation, nullable gradients,
// float vs double and batch splitting.
#include <gtest/gtest.h>

#include <string>

#include "nn/ops_sba.hpp"
#include "ops_test_util.hpp"

namespace {

using namespace sb::nn;
using namespace sb::test;

struct Shape {
  int64_t B, T, H, Dh;
  int64_t n() const { return B * T * H * Dh; }
};
std::string tag(const Shape& s, bool rem) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
         " Dh=" + std::to_string(s.Dh) + (rem ? " remainder" : " no remainder");
}

// A_ij = sigmoid(z_ij) prod_{j<l<i} (1 - sigmoid(z_il)) multiplied out, r_i = prod_{j<i} (1 - sigmoid(z_ij)).
Vec naive_sba(const Vec& q, const Vec& k, const Vec& v, const Shape& s, double scale, bool remainder) {
  Vec out(s.n(), 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t h) { return ((b * s.T + t) * s.H + h) * s.Dh; };
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.T; ++i) {
        Vec beta(i);
        for (int64_t j = 0; j < i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < s.Dh; ++c) d += q[at(b, i, h) + c] * k[at(b, j, h) + c];
          beta[j] = sig(scale * d);
        }
        double rem = 1;
        for (int64_t j = 0; j < i; ++j) {
          double a = beta[j];
          for (int64_t l = j + 1; l < i; ++l) a *= 1 - beta[l];
          rem *= 1 - beta[j];
          for (int64_t c = 0; c < s.Dh; ++c) out[at(b, i, h) + c] += a * v[at(b, j, h) + c];
        }
        if (remainder)
          for (int64_t c = 0; c < s.Dh; ++c) out[at(b, i, h) + c] += rem * v[at(b, i, h) + c];
      }
  return out;
}

struct Inputs {
  Vec q, k, v;
  Inputs(const Shape& s, uint64_t seed) : q(randn(s.n(), seed)), k(randn(s.n(), seed + 1)), v(randn(s.n(), seed + 2)) {}
};

TEST(SbaAttention, ForwardMatchesTheStickBreakingProducts) {
  const Shape shapes[] = {{1, 1, 1, 16}, {2, 7, 2, 6}, {1, 70, 2, 16}, {1, 113, 1, 32}, {1, 257, 1, 16}};
  for (const Shape& s : shapes)
    for (bool rem : {true, false}) {
      const Inputs in(s, 10 + s.T);
      const double scale = 1 / std::sqrt(static_cast<double>(s.Dh));
      Vec out(s.n());
      sba_attention_forward(out.data(), in.q.data(), in.k.data(), in.v.data(), s.B, s.T, s.H, s.Dh, scale, rem);
      EXPECT_LE(max_abs_diff(out, naive_sba(in.q, in.k, in.v, s, scale, rem)), 1e-12) << tag(s, rem);
      VecF outf(s.n());
      sba_attention_forward(outf.data(), to_float(in.q).data(), to_float(in.k).data(), to_float(in.v).data(), s.B,
                            s.T, s.H, s.Dh, scale, rem);
      EXPECT_LE(max_abs_diff(outf, out), 1e-5) << tag(s, rem);
    }
}

// v = 1 everywhere: out_i = sum_j A_ij (+ r_i), so 1 with the remainder and 1 - r_i without; position
// 0 has no keys (out = v_0 with the remainder, 0 without). Large logits (scale 30) stay finite.
TEST(SbaAttention, WeightsAndRemainderSumToOne) {
  const Shape s{2, 70, 2, 8};
  const Inputs in(s, 30);
  const Vec ones(s.n(), 1.0);
  for (double scale : {0.35, 30.0}) {
    Vec with(s.n()), without(s.n());
    sba_attention_forward(with.data(), in.q.data(), in.k.data(), ones.data(), s.B, s.T, s.H, s.Dh, scale, true);
    sba_attention_forward(without.data(), in.q.data(), in.k.data(), ones.data(), s.B, s.T, s.H, s.Dh, scale, false);
    EXPECT_LE(max_abs_diff(with, ones), 1e-13) << scale;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t c = 0; c < s.H * s.Dh; ++c) EXPECT_EQ(without[b * s.T * s.H * s.Dh + c], 0.0);
    double lo = 1, hi = 0;
    for (double x : without) {
      ASSERT_TRUE(std::isfinite(x));
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
    EXPECT_GE(lo, 0.0);
    EXPECT_LE(hi, 1.0 + 1e-13);
    const Vec ref = naive_sba(in.q, in.k, in.v, s, scale, true);
    Vec out(s.n());
    sba_attention_forward(out.data(), in.q.data(), in.k.data(), in.v.data(), s.B, s.T, s.H, s.Dh, scale, true);
    EXPECT_LE(max_abs_diff(out, ref), 1e-11) << scale;
  }
}

// A key whose score is far above every other takes the whole stick from the queries after it,
// unless a nearer key takes it first: with k_j = big * q_i only for j = i - 2, query i reads v_{i-2}
// when key i - 1 scores low.
TEST(SbaAttention, NearestConfidentKeyTakesTheStick) {
  const Shape s{1, 3, 1, 4};
  Vec q = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
  Vec k = {40, 0, 0, 0, -40, 0, 0, 0, 0, 0, 0, 0};  // key 0 scores +40 with every query, key 1 -40
  const Vec v = randn(s.n(), 5);
  Vec out(s.n());
  sba_attention_forward(out.data(), q.data(), k.data(), v.data(), s.B, s.T, s.H, s.Dh, 1.0, true);
  for (int64_t c = 0; c < 4; ++c) {
    EXPECT_NEAR(out[8 + c], v[c], 1e-12);  // query 2: key 1 passes (beta ~ 0), key 0 takes everything
    EXPECT_NEAR(out[4 + c], v[c], 1e-12);  // query 1: key 0 takes everything
    EXPECT_EQ(out[c], v[c]);               // query 0: no keys, the remainder 1 weights v_0
  }
}

TEST(SbaAttention, FutureTokensDoNotChangeEarlierOutputs) {
  const Shape s{1, 70, 2, 4};
  const int64_t t0 = 40;
  for (bool rem : {true, false}) {
    Inputs a(s, 40);
    Vec out_a(s.n()), out_b(s.n());
    sba_attention_forward(out_a.data(), a.q.data(), a.k.data(), a.v.data(), s.B, s.T, s.H, s.Dh, 0.5, rem);
    for (int64_t i = t0 * s.H * s.Dh; i < s.n(); ++i) a.q[i] += 3.0, a.k[i] -= 2.0, a.v[i] *= -5.0;
    sba_attention_forward(out_b.data(), a.q.data(), a.k.data(), a.v.data(), s.B, s.T, s.H, s.Dh, 0.5, rem);
    const int64_t prefix = t0 * s.H * s.Dh;
    EXPECT_EQ(Vec(out_a.begin(), out_a.begin() + prefix), Vec(out_b.begin(), out_b.begin() + prefix));
    EXPECT_GT(max_abs_diff(out_a, out_b), 0.1);
  }
}

// Every coordinate by central differences (small shapes; T = 70 crosses the 64-row query block).
TEST(SbaAttention, GradientsMatchFiniteDifferences) {
  const Shape shapes[] = {{1, 1, 1, 4}, {2, 7, 2, 6}, {1, 13, 3, 16}, {1, 70, 1, 4}};
  for (const Shape& s : shapes)
    for (bool rem : {true, false}) {
      Inputs in(s, 50 + s.T);
      const Vec G = randn(s.n(), 51);
      const double scale = 0.7;
      Vec out(s.n());
      auto loss = [&] {
        sba_attention_forward(out.data(), in.q.data(), in.k.data(), in.v.data(), s.B, s.T, s.H, s.Dh, scale, rem);
        return dot(out, G);
      };
      GradBuf dq(s.n(), 52), dk(s.n(), 53), dv(s.n(), 54);
      sba_attention_backward(dq.data(), dk.data(), dv.data(), G.data(), in.q.data(), in.k.data(), in.v.data(), s.B,
                             s.T, s.H, s.Dh, scale, rem);
      if (s.T > 1) {
        EXPECT_LE(grad_error_acc(loss, in.q, dq), kGradTol) << tag(s, rem);
        EXPECT_LE(grad_error_acc(loss, in.k, dk), kGradTol) << tag(s, rem);
      } else {  // no keys: q and k do not enter the output
        EXPECT_EQ(dq.buf, dq.base);
        EXPECT_EQ(dk.buf, dk.base);
      }
      if (s.T > 1 || rem) EXPECT_LE(grad_error_acc(loss, in.v, dv), kGradTol) << tag(s, rem);
    }
}

// Directional derivatives on the long shapes: (L(x + e u) - L(x - e u)) / 2e = grad . u for random u,
// per input, with head dims 16 .. 128 and several heads and batch elements.
TEST(SbaAttention, GradientsAlongRandomDirectionsOnLongSequences) {
  const Shape shapes[] = {{1, 113, 2, 64}, {2, 257, 1, 16}, {1, 257, 1, 128}, {1, 113, 1, 32}};
  for (const Shape& s : shapes)
    for (bool rem : {true, false}) {
      Inputs in(s, 60 + s.T + s.Dh);
      const Vec G = randn(s.n(), 61);
      const double scale = 1 / std::sqrt(static_cast<double>(s.Dh));
      Vec dq(s.n(), 0.0), dk(s.n(), 0.0), dv(s.n(), 0.0), out(s.n());
      sba_attention_backward(dq.data(), dk.data(), dv.data(), G.data(), in.q.data(), in.k.data(), in.v.data(), s.B,
                             s.T, s.H, s.Dh, scale, rem);
      auto loss = [&] {
        sba_attention_forward(out.data(), in.q.data(), in.k.data(), in.v.data(), s.B, s.T, s.H, s.Dh, scale, rem);
        return dot(out, G);
      };
      Vec* inputs[] = {&in.q, &in.k, &in.v};
      const Vec* grads[] = {&dq, &dk, &dv};
      for (int which = 0; which < 3; ++which)
        for (uint64_t dir = 0; dir < 2; ++dir) {
          const Vec u = randn(s.n(), 70 + dir + 3 * which);
          Vec& x = *inputs[which];
          const Vec saved = x;
          const double e = 1e-5;
          for (int64_t i = 0; i < s.n(); ++i) x[i] = saved[i] + e * u[i];
          const double up = loss();
          for (int64_t i = 0; i < s.n(); ++i) x[i] = saved[i] - e * u[i];
          const double down = loss();
          x = saved;
          const double numeric = (up - down) / (2 * e), analytic = dot(*grads[which], u);
          EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
              << tag(s, rem) << " input " << which << " direction " << dir;
        }
    }
}

TEST(SbaAttention, NullableGradientsFloatAgreementAndBatchSplitting) {
  const Shape s{3, 70, 2, 8};
  const Inputs in(s, 80);
  const Vec G = randn(s.n(), 81);
  const double scale = 0.4;
  for (bool rem : {true, false}) {
    Vec dq(s.n(), 0.0), dk(s.n(), 0.0), dv(s.n(), 0.0);
    sba_attention_backward(dq.data(), dk.data(), dv.data(), G.data(), in.q.data(), in.k.data(), in.v.data(), s.B,
                           s.T, s.H, s.Dh, scale, rem);
    Vec* full[] = {&dq, &dk, &dv};
    for (int which = 0; which < 3; ++which) {  // each gradient alone equals the same one computed with the others
      Vec only(s.n(), 0.0);
      double* p[3] = {nullptr, nullptr, nullptr};
      p[which] = only.data();
      sba_attention_backward(p[0], p[1], p[2], G.data(), in.q.data(), in.k.data(), in.v.data(), s.B, s.T, s.H, s.Dh,
                             scale, rem);
      EXPECT_EQ(only, *full[which]) << which;
    }
    const VecF qf = to_float(in.q), kf = to_float(in.k), vf = to_float(in.v), Gf = to_float(G);
    VecF dqf(s.n(), 0.f), dkf(s.n(), 0.f), dvf(s.n(), 0.f);
    sba_attention_backward(dqf.data(), dkf.data(), dvf.data(), Gf.data(), qf.data(), kf.data(), vf.data(), s.B, s.T,
                           s.H, s.Dh, scale, rem);
    EXPECT_LE(max_abs_diff(dqf, dq), 1e-4 * std::max(1.0, max_abs(dq)));
    EXPECT_LE(max_abs_diff(dkf, dk), 1e-4 * std::max(1.0, max_abs(dk)));
    EXPECT_LE(max_abs_diff(dvf, dv), 1e-4 * std::max(1.0, max_abs(dv)));
    Vec out(s.n()), out1(s.n()), dk1(s.n(), 0.0);
    sba_attention_forward(out.data(), in.q.data(), in.k.data(), in.v.data(), s.B, s.T, s.H, s.Dh, scale, rem);
    const int64_t per = s.T * s.H * s.Dh;
    for (int64_t b = 0; b < s.B; ++b) {
      sba_attention_forward(out1.data() + b * per, in.q.data() + b * per, in.k.data() + b * per,
                            in.v.data() + b * per, 1, s.T, s.H, s.Dh, scale, rem);
      sba_attention_backward<double>(nullptr, dk1.data() + b * per, nullptr, G.data() + b * per,
                                     in.q.data() + b * per, in.k.data() + b * per, in.v.data() + b * per, 1, s.T, s.H,
                                     s.Dh, scale, rem);
    }
    EXPECT_EQ(out1, out);
    EXPECT_EQ(dk1, dk);
  }
}

}  // namespace
