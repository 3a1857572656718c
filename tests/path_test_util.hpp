// path_test_util.hpp: shared fixtures of the PaTH tests: random inputs in the [B, T, H, Dh] layout,
// forward/backward wrappers returning vectors, and a plain causal softmax attention reference.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gradcheck.hpp"
#include "nn/path_attention.hpp"

namespace sb::test {

using Vec = std::vector<double>;

struct PathInputs {
  int64_t B = 1, T = 1, H = 1, Dh = 4;
  bool gate = false;
  Vec q, k, v, w, beta, log_f;
  const double* log_f_ptr() const { return gate ? log_f.data() : nullptr; }
  int64_t nx() const { return B * T * H * Dh; }
  int64_t ns() const { return B * T * H; }
};

// q, k, v ~ N(0, 1); w unit rows; beta uniform in [lo, hi]; log_f = log sigmoid(N(1, 1)).
inline PathInputs make_inputs(int64_t B, int64_t T, int64_t H, int64_t Dh, bool gate, uint64_t seed,
                              double beta_lo = 0.05, double beta_hi = 1.95) {
  PathInputs in;
  in.B = B, in.T = T, in.H = H, in.Dh = Dh, in.gate = gate;
  in.q = randn(in.nx(), seed + 1);
  in.k = randn(in.nx(), seed + 2);
  in.v = randn(in.nx(), seed + 3);
  in.w = randn(in.nx(), seed + 4);
  for (int64_t r = 0; r < in.ns(); ++r) {
    double n = 0;
    for (int64_t i = 0; i < Dh; ++i) n += in.w[r * Dh + i] * in.w[r * Dh + i];
    for (int64_t i = 0; i < Dh; ++i) in.w[r * Dh + i] /= std::sqrt(n);
  }
  std::mt19937_64 gen(seed + 5);
  std::uniform_real_distribution<double> unif(beta_lo, beta_hi);
  in.beta.resize(in.ns());
  for (auto& b : in.beta) b = unif(gen);
  in.log_f = randn(in.ns(), seed + 6);
  for (auto& f : in.log_f) f = -std::log1p(std::exp(-(f + 1.0)));
  return in;
}

struct PathOut {
  Vec out, lse;
};
struct PathGrads {
  Vec dq, dk, dv, dw, dbeta, dlog_f;
};

inline PathOut path_fwd(const PathInputs& in, nn::PathForm form, int64_t block) {
  PathOut o{Vec(in.nx()), Vec(in.ns())};
  nn::path_attention_forward<double>(o.out.data(), o.lse.data(), in.q.data(), in.k.data(),
                                     in.v.data(), in.w.data(), in.beta.data(), in.log_f_ptr(), in.B,
                                     in.T, in.H, in.Dh, 1.0 / std::sqrt(double(in.Dh)), form, block,
                                     nullptr);
  return o;
}

inline PathGrads path_bwd(const PathInputs& in, const PathOut& o, const Vec& dout,
                          nn::PathForm form, int64_t block) {
  PathGrads g{Vec(in.nx()), Vec(in.nx()), Vec(in.nx()), Vec(in.nx()), Vec(in.ns()), Vec(in.ns())};
  nn::path_attention_backward<double>(g.dq.data(), g.dk.data(), g.dv.data(), g.dw.data(),
                                      g.dbeta.data(), g.dlog_f.data(), dout.data(), in.q.data(),
                                      in.k.data(), in.v.data(), in.w.data(), in.beta.data(),
                                      in.log_f_ptr(), o.out.data(), o.lse.data(), in.B, in.T, in.H,
                                      in.Dh, 1.0 / std::sqrt(double(in.Dh)), form, block, nullptr);
  return g;
}

inline double max_abs_diff(const Vec& a, const Vec& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Causal softmax attention with explicit logits: logit(b, h, i, j) for j <= i, written plainly.
template <class Logit>
Vec softmax_attention(const PathInputs& in, Logit logit) {
  const int64_t T = in.T, H = in.H, Dh = in.Dh;
  Vec out(in.nx(), 0.0);
  for (int64_t b = 0; b < in.B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        Vec s(i + 1);
        double mx = -1e300, l = 0;
        for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, s[j] = logit(b, h, i, j));
        for (int64_t j = 0; j <= i; ++j) l += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < Dh; ++d)
            out[((b * T + i) * H + h) * Dh + d] += s[j] / l * in.v[((b * T + j) * H + h) * Dh + d];
      }
  return out;
}

}  // namespace sb::test
