// test_ops_attention.cpp: RoPE and causal softmax attention (NoPE / RoPE / FoX) of
// src/nn/ops_attention: forward against an explicit complex rotation and an explicit T x T softmax
// written here, FoX-gate and causality properties, finite-difference gradients in double for every
// input, float vs double agreement, nullable gradients and batch splitting.
#include <gtest/gtest.h>

#include <complex>

#include "core/error.hpp"
#include "nn/ops_act.hpp"
#include "nn/ops_attention.hpp"
#include "ops_test_util.hpp"

namespace {

using namespace sb::nn;
using namespace sb::test;

struct Shape {
  int64_t B, T, H, Dh;
  int64_t n() const { return B * T * H * Dh; }
  int64_t g() const { return B * T * H; }
};

// Awkward small shapes, plus T = 70 which crosses the 64-row query block of the implementation.
const Shape kShapes[] = {{1, 1, 1, 4}, {2, 7, 2, 6}, {1, 13, 4, 16}, {4, 13, 1, 4}, {1, 70, 1, 4}};

// ---- RoPE --------------------------------------------------------------------------------------
TEST(Rope, ForwardIsTheComplexRotationOfHalfSplitPairs) {
  const Shape s{2, 7, 3, 6};
  const double theta = 500.0;
  const Vec x = randn(s.n(), 1);
  Vec out(s.n());
  rope_forward(out.data(), x.data(), s.B, s.T, s.H, s.Dh, theta);
  const int64_t half = s.Dh / 2;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t)
      for (int64_t h = 0; h < s.H; ++h) {
        const int64_t base = ((b * s.T + t) * s.H + h) * s.Dh;
        for (int64_t m = 0; m < half; ++m) {
          const double angle = t * std::pow(theta, -2.0 * m / s.Dh);
          const std::complex<double> z = std::complex<double>(x[base + m], x[base + m + half]) *
                                         std::polar(1.0, angle);
          EXPECT_NEAR(out[base + m], z.real(), 1e-13);
          EXPECT_NEAR(out[base + m + half], z.imag(), 1e-13);
        }
      }
  for (int64_t i = 0; i < s.H * s.Dh; ++i) EXPECT_EQ(out[i], x[i]);  // position 0 is unrotated
  Vec inplace = x;
  rope_forward(inplace.data(), inplace.data(), s.B, s.T, s.H, s.Dh, theta);
  EXPECT_EQ(inplace, out);
  VecF outf(s.n());
  rope_forward(outf.data(), to_float(x).data(), s.B, s.T, s.H, s.Dh, theta);
  EXPECT_LE(max_abs_diff(outf, out), 1e-5);
}

TEST(Rope, DotProductsDependOnlyOnRelativePosition) {
  const Shape s{1, 13, 1, 16};
  const Vec qv = randn(s.Dh, 2), kv = randn(s.Dh, 3);
  Vec q(s.n()), k(s.n());
  for (int64_t t = 0; t < s.T; ++t)
    for (int64_t d = 0; d < s.Dh; ++d) q[t * s.Dh + d] = qv[d], k[t * s.Dh + d] = kv[d];
  rope_forward(q.data(), q.data(), s.B, s.T, s.H, s.Dh);
  rope_forward(k.data(), k.data(), s.B, s.T, s.H, s.Dh);
  auto qk = [&](int64_t i, int64_t j) {
    double r = 0;
    for (int64_t d = 0; d < s.Dh; ++d) r += q[i * s.Dh + d] * k[j * s.Dh + d];
    return r;
  };
  for (int64_t i = 0; i + 5 < s.T; ++i)
    for (int64_t j = 0; j <= i; ++j) EXPECT_NEAR(qk(i, j), qk(i + 5, j + 5), 1e-12);
  EXPECT_GT(std::abs(qk(6, 0) - qk(6, 6)), 1e-3);  // but the relative position does matter
}

TEST(Rope, GradientMatchesFiniteDifferencesAndRejectsOddDh) {
  for (const Shape& s : kShapes) {
    Vec x = randn(s.n(), 4 + s.T);
    const Vec G = randn(s.n(), 5);
    auto loss = [&] {
      Vec out(s.n());
      rope_forward(out.data(), x.data(), s.B, s.T, s.H, s.Dh, 10000.0);
      return dot(out, G);
    };
    GradBuf dx(s.n(), 6);
    rope_backward(dx.data(), G.data(), s.B, s.T, s.H, s.Dh, 10000.0);
    EXPECT_LE(grad_error_acc(loss, x, dx), kGradTol) << s.T << " " << s.Dh;
  }
  Vec x(5), y(5);
  EXPECT_THROW(rope_forward(y.data(), x.data(), 1, 1, 1, 5), sb::Error);
}

// ---- softmax attention -------------------------------------------------------------------------
// Explicit per-row softmax over j <= i with the gate written as sum_{s=j+1..i} log_f_s.
void naive_attention(Vec& out, Vec& lse, const Vec& q, const Vec& k, const Vec& v, const Vec* log_f,
                     const Shape& s, double scale) {
  out.assign(s.n(), 0.0);
  lse.assign(s.g(), 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t h) { return ((b * s.T + t) * s.H + h) * s.Dh; };
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.T; ++i) {
        Vec sc(i + 1);
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < s.Dh; ++c) d += q[at(b, i, h) + c] * k[at(b, j, h) + c];
          sc[j] = scale * d;
          if (log_f)
            for (int64_t t = j + 1; t <= i; ++t) sc[j] += (*log_f)[(b * s.T + t) * s.H + h];
        }
        double mx = sc[0];
        for (double x : sc) mx = std::max(mx, x);
        double z = 0;
        for (double x : sc) z += std::exp(x - mx);
        lse[(b * s.H + h) * s.T + i] = mx + std::log(z);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < s.Dh; ++c) out[at(b, i, h) + c] += std::exp(sc[j] - mx) / z * v[at(b, j, h) + c];
      }
}

struct AttnInputs {
  Vec q, k, v, log_f;
  AttnInputs(const Shape& s, uint64_t seed)
      : q(randn(s.n(), seed)), k(randn(s.n(), seed + 1)), v(randn(s.n(), seed + 2)), log_f(s.g()) {
    const Vec z = randn(s.g(), seed + 3, 2.0);  // gate pre-activations; log_f = logsigmoid(z) < 0
    logsigmoid_forward(log_f.data(), z.data(), s.g());
  }
};

TEST(SoftmaxAttention, ForwardMatchesExplicitSoftmaxWithAndWithoutGate) {
  const Shape shapes[] = {{1, 1, 1, 4}, {2, 7, 2, 6}, {1, 13, 4, 16}, {1, 150, 2, 8}};
  for (const Shape& s : shapes)
    for (bool gated : {false, true}) {
      const AttnInputs in(s, 10 + s.T);
      const double scale = 1 / std::sqrt(static_cast<double>(s.Dh));
      const Vec* lf = gated ? &in.log_f : nullptr;
      Vec out(s.n()), lse(s.g()), ref_out, ref_lse;
      softmax_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(),
                                gated ? in.log_f.data() : nullptr, s.B, s.T, s.H, s.Dh, scale);
      naive_attention(ref_out, ref_lse, in.q, in.k, in.v, lf, s, scale);
      EXPECT_LE(max_abs_diff(out, ref_out), 1e-12) << s.T << " gated=" << gated;
      EXPECT_LE(max_abs_diff(lse, ref_lse), 1e-12) << s.T << " gated=" << gated;
      VecF outf(s.n()), lsef(s.g());
      softmax_attention_forward(outf.data(), lsef.data(), to_float(in.q).data(), to_float(in.k).data(),
                                to_float(in.v).data(), gated ? to_float(in.log_f).data() : nullptr, s.B, s.T,
                                s.H, s.Dh, scale);
      EXPECT_LE(max_abs_diff(outf, out), 1e-5) << s.T << " gated=" << gated;
      EXPECT_LE(max_abs_diff(lsef, lse), 1e-5) << s.T << " gated=" << gated;
    }
}

TEST(SoftmaxAttention, ZeroGateEqualsNoPeAndClosedGateAttendsToSelf) {
  const Shape s{2, 13, 2, 6};
  const AttnInputs in(s, 20);
  Vec nope(s.n()), fox(s.n()), lse(s.g());
  softmax_attention_forward<double>(nope.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), nullptr,
                                    s.B, s.T, s.H, s.Dh, 0.4);
  const Vec zeros(s.g(), 0.0);
  softmax_attention_forward(fox.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), zeros.data(), s.B,
                            s.T, s.H, s.Dh, 0.4);
  EXPECT_LE(max_abs_diff(fox, nope), 1e-14);
  const Vec closed(s.g(), -1e4);  // f ~ 0: everything before position i is forgotten
  softmax_attention_forward(fox.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), closed.data(), s.B,
                            s.T, s.H, s.Dh, 0.4);
  EXPECT_LE(max_abs_diff(fox, in.v), 1e-12);
}

TEST(SoftmaxAttention, FutureTokensDoNotChangeEarlierOutputs) {
  const Shape s{1, 70, 2, 4};
  const int64_t t0 = 40;  // inside the second query block's key range for rows >= 64
  for (bool gated : {false, true}) {
    AttnInputs a(s, 30);
    Vec out_a(s.n()), lse_a(s.g()), out_b(s.n()), lse_b(s.g());
    const double* lf = gated ? a.log_f.data() : nullptr;
    softmax_attention_forward(out_a.data(), lse_a.data(), a.q.data(), a.k.data(), a.v.data(), lf, s.B, s.T, s.H,
                              s.Dh, 0.5);
    for (int64_t t = t0; t < s.T; ++t)
      for (int64_t c = 0; c < s.H * s.Dh; ++c) {
        const int64_t i = t * s.H * s.Dh + c;
        a.q[i] += 3.0, a.k[i] -= 2.0, a.v[i] *= -5.0;
      }
    if (gated)
      for (int64_t i = t0 * s.H; i < s.g(); ++i) a.log_f[i] = -7.0;
    softmax_attention_forward(out_b.data(), lse_b.data(), a.q.data(), a.k.data(), a.v.data(), lf, s.B, s.T, s.H,
                              s.Dh, 0.5);
    const int64_t prefix = t0 * s.H * s.Dh;
    EXPECT_LE(max_abs_diff(Vec(out_a.begin(), out_a.begin() + prefix), Vec(out_b.begin(), out_b.begin() + prefix)),
              1e-13);
    EXPECT_GT(max_abs_diff(out_a, out_b), 0.1);  // the perturbation is visible from t0 on
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < t0; ++t) EXPECT_NEAR(lse_a[h * s.T + t], lse_b[h * s.T + t], 1e-13);
  }
}

TEST(SoftmaxAttention, GradientsMatchFiniteDifferences) {
  for (const Shape& s : kShapes)
    for (bool gated : {false, true}) {
      AttnInputs in(s, 40 + s.T);
      const Vec G = randn(s.n(), 41);
      const double scale = 0.7;
      const double* lf = gated ? in.log_f.data() : nullptr;
      Vec out(s.n()), lse(s.g());
      auto loss = [&] {
        softmax_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), lf, s.B, s.T,
                                  s.H, s.Dh, scale);
        return dot(out, G);
      };
      loss();
      GradBuf dq(s.n(), 42), dk(s.n(), 43), dv(s.n(), 44), df(s.g(), 45);
      softmax_attention_backward(dq.data(), dk.data(), dv.data(), df.data(), G.data(), in.q.data(), in.k.data(),
                                 in.v.data(), lf, out.data(), lse.data(), s.B, s.T, s.H, s.Dh, scale);
      const std::string tag = "T=" + std::to_string(s.T) + " Dh=" + std::to_string(s.Dh) + " gated=" +
                              std::to_string(gated);
      if (s.T > 1) {  // at T = 1 out = v exactly: dq = dk = 0
        EXPECT_LE(grad_error_acc(loss, in.q, dq), kGradTol) << tag;
        EXPECT_LE(grad_error_acc(loss, in.k, dk), kGradTol) << tag;
      } else {
        EXPECT_LE(max_abs(dq.delta()) + max_abs(dk.delta()), 1e-14) << tag;
      }
      EXPECT_LE(grad_error_acc(loss, in.v, dv), kGradTol) << tag;
      if (gated && s.T > 1) {
        EXPECT_LE(grad_error_acc(loss, in.log_f, df), kGradTol) << tag;
        for (int64_t b = 0; b < s.B; ++b)
          for (int64_t h = 0; h < s.H; ++h)  // log_f at t = 0 never enters a score
            EXPECT_EQ(df.buf[b * s.T * s.H + h], df.base[b * s.T * s.H + h]) << tag;
      } else {
        EXPECT_EQ(df.buf, df.base) << tag;  // no gate (or nothing to gate): dlog_f untouched
      }
    }
}

TEST(SoftmaxAttention, NullableGradientsFloatAgreementAndBatchSplitting) {
  const Shape s{3, 13, 2, 6};
  const AttnInputs in(s, 50);
  const Vec G = randn(s.n(), 51);
  const double scale = 0.4;
  Vec out(s.n()), lse(s.g());
  softmax_attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), in.log_f.data(), s.B,
                            s.T, s.H, s.Dh, scale);
  Vec dq(s.n()), dk(s.n()), dv(s.n()), df(s.g());
  softmax_attention_backward(dq.data(), dk.data(), dv.data(), df.data(), G.data(), in.q.data(), in.k.data(),
                             in.v.data(), in.log_f.data(), out.data(), lse.data(), s.B, s.T, s.H, s.Dh, scale);
  // Each gradient alone equals the same gradient computed together with the others.
  Vec* full[] = {&dq, &dk, &dv, &df};
  for (int which = 0; which < 4; ++which) {
    Vec only(which == 3 ? s.g() : s.n(), 0.0);
    double* p[4] = {nullptr, nullptr, nullptr, nullptr};
    p[which] = only.data();
    softmax_attention_backward(p[0], p[1], p[2], p[3], G.data(), in.q.data(), in.k.data(), in.v.data(),
                               in.log_f.data(), out.data(), lse.data(), s.B, s.T, s.H, s.Dh, scale);
    EXPECT_LE(max_abs_diff(only, *full[which]), 1e-14) << which;
  }
  // Float forward + backward agree with double.
  const VecF qf = to_float(in.q), kf = to_float(in.k), vf = to_float(in.v), lff = to_float(in.log_f),
             Gf = to_float(G);
  VecF outf(s.n()), lsef(s.g()), dqf(s.n()), dkf(s.n()), dvf(s.n()), dff(s.g());
  softmax_attention_forward(outf.data(), lsef.data(), qf.data(), kf.data(), vf.data(), lff.data(), s.B, s.T, s.H,
                            s.Dh, scale);
  softmax_attention_backward(dqf.data(), dkf.data(), dvf.data(), dff.data(), Gf.data(), qf.data(), kf.data(),
                             vf.data(), lff.data(), outf.data(), lsef.data(), s.B, s.T, s.H, s.Dh, scale);
  EXPECT_LE(max_abs_diff(outf, out), 1e-5);
  EXPECT_LE(max_abs_diff(dqf, dq), 1e-4 * std::max(1.0, max_abs(dq)));
  EXPECT_LE(max_abs_diff(dkf, dk), 1e-4 * std::max(1.0, max_abs(dk)));
  EXPECT_LE(max_abs_diff(dvf, dv), 1e-4 * std::max(1.0, max_abs(dv)));
  EXPECT_LE(max_abs_diff(dff, df), 1e-4 * std::max(1.0, max_abs(df)));
  // Calling once per batch element (B = 1, offset pointers) gives the same forward and backward.
  Vec out1(s.n()), lse1(s.g()), dq1(s.n());
  const int64_t per = s.T * s.H * s.Dh;
  for (int64_t b = 0; b < s.B; ++b) {
    softmax_attention_forward(out1.data() + b * per, lse1.data() + b * s.H * s.T, in.q.data() + b * per,
                              in.k.data() + b * per, in.v.data() + b * per, in.log_f.data() + b * s.T * s.H, 1,
                              s.T, s.H, s.Dh, scale);
    softmax_attention_backward<double>(dq1.data() + b * per, nullptr, nullptr, nullptr, G.data() + b * per,
                                       in.q.data() + b * per, in.k.data() + b * per, in.v.data() + b * per,
                                       in.log_f.data() + b * s.T * s.H, out1.data() + b * per,
                                       lse1.data() + b * s.H * s.T, 1, s.T, s.H, s.Dh, scale);
  }
  EXPECT_EQ(out1, out);
  EXPECT_EQ(lse1, lse);
  EXPECT_LE(max_abs_diff(dq1, dq), 1e-14);
}

}  // namespace
