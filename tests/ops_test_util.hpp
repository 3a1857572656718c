// ops_test_util.hpp: small helpers shared by test_ops.cpp and test_ops_attention.cpp: dot products,
// float copies, and GradBuf, a gradient buffer pre-filled with random values so every gradient
// check also proves that backward ACCUMULATES (+=) instead of overwriting.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.hpp"

namespace sb::test {

using Vec = std::vector<double>;
using VecF = std::vector<float>;

inline double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline VecF to_float(const Vec& v) { return VecF(v.begin(), v.end()); }

// Largest |a - b| over matching entries.
template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

inline double max_abs(const Vec& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

// A gradient output holding random "previous" contents; delta() is what backward added.
struct GradBuf {
  Vec base, buf;
  GradBuf(int64_t n, uint64_t seed) : base(randn(n, seed)), buf(base) {}
  double* data() { return buf.data(); }
  Vec delta() const {
    Vec d(buf.size());
    for (size_t i = 0; i < buf.size(); ++i) d[i] = buf[i] - base[i];
    return d;
  }
};

// grad_error for a gradient accumulated into a GradBuf.
inline double grad_error_acc(const std::function<double()>& loss, Vec& x, const GradBuf& g) {
  const Vec d = g.delta();
  return grad_error(loss, x.data(), d.data(), static_cast<int64_t>(x.size()));
}

inline constexpr double kGradTol = 1e-6;

}  // namespace sb::test
