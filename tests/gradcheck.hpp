// gradcheck.hpp: finite-difference gradient checking in double, shared by the op and model tests.
// relative_error() compares a whole analytic gradient with central differences, norm-wise:
// ||analytic - numeric|| / max(||analytic||, ||numeric||, tiny).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace sb::test {

// Central-difference gradient of loss() with respect to x[0..n), perturbing x in place.
inline std::vector<double> numeric_grad(const std::function<double()>& loss, double* x, int64_t n,
                                        double eps = 1e-5) {
  std::vector<double> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double up = loss();
    x[i] = saved - eps;
    const double down = loss();
    x[i] = saved;
    g[static_cast<size_t>(i)] = (up - down) / (2 * eps);
  }
  return g;
}

inline double relative_error(const double* analytic, const std::vector<double>& numeric) {
  double diff = 0, na = 0, nn = 0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    diff += (analytic[i] - numeric[i]) * (analytic[i] - numeric[i]);
    na += analytic[i] * analytic[i];
    nn += numeric[i] * numeric[i];
  }
  return std::sqrt(diff) / std::max({std::sqrt(na), std::sqrt(nn), 1e-300});
}

// Checks d loss / d x against `analytic` (same length n); returns the norm-wise relative error.
inline double grad_error(const std::function<double()>& loss, double* x, const double* analytic, int64_t n,
                         double eps = 1e-5) {
  return relative_error(analytic, numeric_grad(loss, x, n, eps));
}

inline std::vector<double> randn(int64_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace sb::test
