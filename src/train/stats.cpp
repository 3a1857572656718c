// stats.cpp: incomplete beta and its inverse, Clopper-Pearson intervals, eval accumulators.
#include "train/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/error.hpp"

namespace sb {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// lgamma(x) - [(x - 1/2) ln x - x + ln(2 pi)/2] for x >= 10 (Stirling series, error < 1e-13).
double stirling_correction(double x) {
  const double r = 1 / x, r2 = r * r;
  return r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 * (1.0 / 1680 - r2 / 1188))));
}

// ln B(a, b). Plain lgamma differences lose ~1e-16 * lgamma(a + b) absolute accuracy, which is
// too much for large n (e.g. 0 errors in 1e8 trials); large arguments use Stirling-form
// differences that cancel analytically.
double log_beta(double a, double b) {
  const double small = std::min(a, b), large = std::max(a, b), sum = a + b;
  if (large < 10) return std::lgamma(a) + std::lgamma(b) - std::lgamma(sum);
  if (small < 10) {  // lgamma(small) + [lgamma(large) - lgamma(sum)]
    return std::lgamma(small) - (large - 0.5) * std::log1p(small / large) - small * std::log(sum) + small +
           stirling_correction(large) - stirling_correction(sum);
  }
  return 0.5 * std::log(2 * std::numbers::pi) + (a - 0.5) * std::log(a / sum) + (b - 0.5) * std::log(b / sum) -
         0.5 * std::log(sum) + stirling_correction(a) + stirling_correction(b) - stirling_correction(sum);
}

// Continued fraction for I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double beta_continued_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300, eps = 1e-16;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 100000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < eps) break;
  }
  return h;
}

// Density of Beta(a, b) at x in (0, 1).
double beta_density(double a, double b, double x) {
  return std::exp((a - 1) * std::log(x) + (b - 1) * std::log1p(-x) - log_beta(a, b));
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || !(x >= 0 && x <= 1)) fail("incomplete_beta: need a, b > 0 and x in [0, 1] (a={}, b={}, x={})", a, b, x);
  if (x == 0) return 0;
  if (x == 1) return 1;
  const double log_front = a * std::log(x) + b * std::log1p(-x) - log_beta(a, b);
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * beta_continued_fraction(a, b, x) / a;
  return 1 - std::exp(log_front) * beta_continued_fraction(b, a, 1 - x) / b;
}

double inverse_incomplete_beta(double a, double b, double p) {
  if (!(a > 0) || !(b > 0) || !(p >= 0 && p <= 1)) fail("inverse_incomplete_beta: need a, b > 0 and p in [0, 1] (a={}, b={}, p={})", a, b, p);
  if (p == 0) return 0;
  if (p == 1) return 1;
  // I_x(a, b) increases in x: keep a bracket [lo, hi] around the root and take Newton steps
  // while they stay inside it; otherwise bisect (geometrically when the bracket nears 0).
  double lo = 0, hi = 1, x = a / (a + b);
  for (int iter = 0; iter < 400; ++iter) {
    const double f = incomplete_beta(a, b, x) - p;
    if (f == 0) return x;
    (f < 0 ? lo : hi) = x;
    if (hi - lo <= 1e-15 * hi) return 0.5 * (lo + hi);
    const double dx = f / beta_density(a, b, x);
    double next = x - dx;
    if (std::isfinite(next) && next > lo && next < hi) {
      if (std::fabs(dx) <= 1e-15 * x) return next;
    } else if (lo > 0 && hi / lo > 1e3) {
      next = std::sqrt(lo * hi);
    } else if (lo == 0 && hi < 1e-3) {
      next = hi * 1e-3;
    } else {
      next = 0.5 * (lo + hi);
    }
    x = next;
  }
  return x;
}

Interval clopper_pearson(int64_t k, int64_t n, double confidence) {
  if (n < 0 || k < 0 || k > n) fail("clopper_pearson: need 0 <= k <= n (k={}, n={})", k, n);
  if (!(confidence > 0 && confidence < 1)) fail("clopper_pearson: confidence must be in (0, 1), got {}", confidence);
  if (n == 0) return {0, 1};
  const double alpha = 1 - confidence;
  const double kd = static_cast<double>(k), nd = static_cast<double>(n);
  Interval r;
  r.lo = k == 0 ? 0.0 : inverse_incomplete_beta(kd, nd - kd + 1, alpha / 2);
  r.hi = k == n ? 1.0 : inverse_incomplete_beta(kd + 1, nd - kd, 1 - alpha / 2);
  return r;
}

void EvalCounts::add_sequence(const int32_t* predictions, const int32_t* labels, const uint8_t* score_mask, int64_t T) {
  bool all_right = true;
  for (int64_t t = 0; t < T; ++t) {
    if (!score_mask[t]) continue;
    const bool right = predictions[t] == labels[t];
    ++scored;
    correct += right;
    all_right = all_right && right;
  }
  ++sequences;
  sequences_correct += all_right;
}

void EvalCounts::add_batch(const int32_t* predictions, const int32_t* labels, const uint8_t* score_mask, int64_t B,
                           int64_t T) {
  for (int64_t b = 0; b < B; ++b) add_sequence(predictions + b * T, labels + b * T, score_mask + b * T, T);
}

void EvalCounts::merge(const EvalCounts& o) {
  scored += o.scored;
  correct += o.correct;
  sequences += o.sequences;
  sequences_correct += o.sequences_correct;
  loss_sum += o.loss_sum;
  loss_tokens += o.loss_tokens;
}

double EvalCounts::token_accuracy() const { return scored ? static_cast<double>(correct) / static_cast<double>(scored) : kNaN; }
double EvalCounts::sequence_accuracy() const {
  return sequences ? static_cast<double>(sequences_correct) / static_cast<double>(sequences) : kNaN;
}
double EvalCounts::error_rate() const { return scored ? static_cast<double>(errors()) / static_cast<double>(scored) : kNaN; }
double EvalCounts::mean_loss() const { return loss_tokens ? loss_sum / static_cast<double>(loss_tokens) : kNaN; }
Interval EvalCounts::error_interval(double confidence) const { return clopper_pearson(errors(), scored, confidence); }
Interval EvalCounts::sequence_error_interval(double confidence) const {
  return clopper_pearson(sequences - sequences_correct, sequences, confidence);
}

}  // namespace sb
