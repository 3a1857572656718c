// test_stats.cpp: incomplete beta and its inverse, Clopper-Pearson intervals against known
// values, eval accumulators, and the JSON / metrics.jsonl / summary.json writers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "tasks/task.hpp"
#include "train/metrics_log.hpp"
#include "train/stats.hpp"

namespace sb {
namespace {

double binomial_tail(int a, int b, double x) {  // I_x(a, b) for integers = P(Bin(a+b-1, x) >= a)
  const int n = a + b - 1;
  double sum = 0;
  for (int j = a; j <= n; ++j)
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(j + 1.0) - std::lgamma(n - j + 1.0)) * std::pow(x, j) *
           std::pow(1 - x, n - j);
  return sum;
}

TEST(IncompleteBeta, ClosedForms) {
  for (double x : {0.0, 1e-9, 0.01, 0.3, 0.5, 0.77, 0.999, 1.0}) {
    EXPECT_NEAR(incomplete_beta(1, 1, x), x, 1e-15);
    EXPECT_NEAR(incomplete_beta(3.5, 1, x), std::pow(x, 3.5), 1e-14);
    EXPECT_NEAR(incomplete_beta(1, 7, x), 1 - std::pow(1 - x, 7), 1e-14);
  }
  for (double a : {0.5, 2.0, 40.0, 3000.0}) EXPECT_NEAR(incomplete_beta(a, a, 0.5), 0.5, 1e-12) << a;
  for (auto [a, b] : {std::pair{2, 3}, {5, 6}, {1, 100}, {17, 4}, {50, 50}})
    for (double x : {0.01, 0.2, 0.5, 0.9})
      EXPECT_NEAR(incomplete_beta(a, b, x), binomial_tail(a, b, x), 1e-12) << a << " " << b << " " << x;
  EXPECT_THROW(incomplete_beta(0, 1, 0.5), Error);
  EXPECT_THROW(incomplete_beta(1, 1, 1.5), Error);
}

TEST(IncompleteBeta, InverseRoundTrips) {
  for (auto [a, b] : {std::pair{1.0, 1.0}, {0.5, 0.5}, {1.0, 1e6}, {3.0, 999998.0}, {5.0, 6.0}, {1e5, 2e5}, {200.0, 1.0}})
    for (double p : {1e-12, 0.025, 0.3, 0.5, 0.975, 1 - 1e-9}) {
      const double x = inverse_incomplete_beta(a, b, p);
      ASSERT_GE(x, 0.0);
      ASSERT_LE(x, 1.0);
      // Either I(x) = p closely, or the root lies within 2e-15 of x (the documented absolute
      // accuracy; near 1 the spacing of doubles limits how close I(x) can get to p).
      const double up = x + 2e-15, down = x - 2e-15;
      const bool close = std::fabs(incomplete_beta(a, b, x) - p) <= 1e-9 * std::max(p, 1e-3);
      const bool best = incomplete_beta(a, b, std::max(down, 0.0)) <= p && p <= incomplete_beta(a, b, std::min(up, 1.0));
      EXPECT_TRUE(close || best) << a << " " << b << " " << p << " -> " << x;
    }
  EXPECT_EQ(inverse_incomplete_beta(2, 3, 0), 0.0);
  EXPECT_EQ(inverse_incomplete_beta(2, 3, 1), 1.0);
  EXPECT_THROW(inverse_incomplete_beta(2, 3, -0.1), Error);
}

TEST(ClopperPearson, KnownValues) {
  Interval r = clopper_pearson(0, 10);
  EXPECT_EQ(r.lo, 0.0);
  EXPECT_NEAR(r.hi, 0.30850, 1e-4);
  EXPECT_NEAR(r.hi, 1 - std::pow(0.025, 1.0 / 10), 1e-12);
  r = clopper_pearson(5, 10);
  EXPECT_NEAR(r.lo, 0.18709, 1e-4);
  EXPECT_NEAR(r.hi, 0.81291, 1e-4);
  r = clopper_pearson(1, 100);
  EXPECT_NEAR(r.lo, 0.000253, 1e-4);
  EXPECT_NEAR(r.lo, 0.00025317, 1e-7);
  EXPECT_NEAR(r.hi, 0.05446, 1e-4);
  r = clopper_pearson(10, 10);
  EXPECT_NEAR(r.lo, std::pow(0.025, 1.0 / 10), 1e-12);
  EXPECT_EQ(r.hi, 1.0);
  r = clopper_pearson(0, 0);
  EXPECT_EQ(r.lo, 0.0);
  EXPECT_EQ(r.hi, 1.0);
  // 99% interval, k = 2 of 20, and 95% for 3 of 1000 (from direct binomial sums, 1e-8).
  r = clopper_pearson(2, 20, 0.99);
  EXPECT_NEAR(r.lo, 0.00529515, 1e-8);
  EXPECT_NEAR(r.hi, 0.38712526, 1e-8);
  r = clopper_pearson(3, 1000);
  EXPECT_NEAR(r.lo, 0.00061910, 1e-8);
  EXPECT_NEAR(r.hi, 0.00874202, 1e-8);
}

// The defining property, checked with an independent binomial sum: at the lower bound
// P(X >= k) = alpha/2, at the upper bound P(X <= k) = alpha/2.
TEST(ClopperPearson, DefiningTailProbabilities) {
  for (auto [k, n] : {std::pair{1, 3}, {4, 9}, {7, 60}, {30, 150}, {149, 150}})
    for (double conf : {0.9, 0.95, 0.999}) {
      const Interval r = clopper_pearson(k, n, conf);
      const double half_alpha = (1 - conf) / 2;
      EXPECT_NEAR(binomial_tail(k, n - k + 1, r.lo), half_alpha, 1e-10) << k << "/" << n;       // P(X >= k)
      EXPECT_NEAR(1 - binomial_tail(k + 1, n - k, r.hi), half_alpha, 1e-10) << k << "/" << n;   // P(X <= k)
    }
}

TEST(ClopperPearson, ZeroErrorsAndSymmetry) {
  for (int64_t n : {1, 2, 7, 100, 1000, 123457, 1000000, 100000000}) {
    const Interval r = clopper_pearson(0, n);
    const double expected = -std::expm1(std::log(0.025) / static_cast<double>(n));  // 1 - 0.025^(1/n)
    EXPECT_NEAR(r.hi, expected, 1e-8 * expected) << n;  // FMA (-march=native) moves the last digits
    for (int64_t k : {int64_t{1}, n / 3, n - 1}) {
      if (k < 0 || k > n) continue;
      const Interval a = clopper_pearson(k, n), b = clopper_pearson(n - k, n);
      EXPECT_NEAR(a.lo, 1 - b.hi, 1e-9) << k << "/" << n;
      EXPECT_LE(a.lo, static_cast<double>(k) / n);
      EXPECT_GE(a.hi, static_cast<double>(k) / n);
    }
  }
  EXPECT_THROW(clopper_pearson(3, 2), Error);
  EXPECT_THROW(clopper_pearson(-1, 2), Error);
  EXPECT_THROW(clopper_pearson(1, 2, 1.0), Error);
}

TEST(EvalCounts, TokenAndSequenceAccuracy) {
  const int32_t X = kIgnoreLabel;
  // Two sequences of T = 4: the first all right on its 2 scored positions, the second wrong at one.
  const int32_t pred[8] = {1, 2, 3, 4, 1, 2, 3, 4};
  const int32_t labels[8] = {1, 9, 3, X, 1, 2, 0, X};
  const uint8_t mask[8] = {1, 0, 1, 0, 1, 1, 1, 0};
  EvalCounts c;
  c.add_batch(pred, labels, mask, 2, 4);
  EXPECT_EQ(c.scored, 5);
  EXPECT_EQ(c.correct, 4);
  EXPECT_EQ(c.errors(), 1);
  EXPECT_EQ(c.sequences, 2);
  EXPECT_EQ(c.sequences_correct, 1);
  EXPECT_DOUBLE_EQ(c.token_accuracy(), 0.8);
  EXPECT_DOUBLE_EQ(c.error_rate(), 0.2);
  EXPECT_DOUBLE_EQ(c.sequence_accuracy(), 0.5);
  EXPECT_TRUE(std::isnan(c.mean_loss()));
  c.add_loss(6.0, 4);
  EXPECT_DOUBLE_EQ(c.mean_loss(), 1.5);
  EXPECT_NEAR(c.error_interval().hi, clopper_pearson(1, 5).hi, 0);

  EvalCounts d;
  const uint8_t none[4] = {0, 0, 0, 0};
  d.add_sequence(pred, labels, none, 4);  // nothing scored: vacuously correct
  EXPECT_EQ(d.sequences_correct, 1);
  EXPECT_TRUE(std::isnan(d.token_accuracy()));
  d.add_loss(2.0, 4);
  c.merge(d);
  EXPECT_EQ(c.sequences, 3);
  EXPECT_EQ(c.sequences_correct, 2);
  EXPECT_EQ(c.scored, 5);
  EXPECT_DOUBLE_EQ(c.mean_loss(), 1.0);
  EXPECT_TRUE(std::isnan(EvalCounts{}.sequence_accuracy()));
}

// ---- JSON and metrics files -------------------------------------------------------------------

TEST(Json, EscapingAndNumbers) {
  EXPECT_EQ(json_quote("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  EXPECT_EQ(json_quote("ünï"), "\"ünï\"");
  EXPECT_EQ(json_number(0.1), "0.1");
  EXPECT_EQ(json_number(3e-4), "0.0003");
  EXPECT_EQ(json_number(1e-20), "1e-20");
  EXPECT_EQ(json_number(NAN), "null");
  EXPECT_EQ(json_number(-INFINITY), "null");
  JsonObject inner;
  inner.add("x", 1.5).add("ok", true);
  JsonObject j;
  j.add("step", int64_t{12}).add("name", "val").add("n", 3u).add("inner", inner).add("v", std::vector<double>{1, NAN});
  EXPECT_EQ(j.str(), R"({"step": 12, "name": "val", "n": 3, "inner": {"x": 1.5, "ok": true}, "v": [1, null]})");
  EvalCounts c;
  c.scored = 10, c.correct = 10, c.sequences = 2, c.sequences_correct = 2;
  const std::string e = eval_json(c).str();
  EXPECT_NE(e.find("\"errors\": 0"), std::string::npos) << e;
  EXPECT_NE(e.find("\"error_ci95\": [0, 0.3084971"), std::string::npos) << e;
  EXPECT_NE(e.find("\"loss\": null"), std::string::npos) << e;
}

TEST(MetricsLog, AppendsFlushedLinesAndTruncates) {
  const std::string dir = std::string(SB_TEST_TMP) + "/metrics";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/metrics.jsonl";
  {
    MetricsLog log(path, /*truncate=*/true);
    for (int s : {10, 20, 30}) log.write(JsonObject().add("step", s).add("loss", 1.0 / s));
    EXPECT_EQ(read_file(path), "{\"step\": 10, \"loss\": 0.1}\n{\"step\": 20, \"loss\": 0.05}\n"
                               "{\"step\": 30, \"loss\": 0.03333333333333333}\n");  // flushed already
  }
  {
    MetricsLog log(path);  // appends
    log.write(JsonObject().add("event", "resume"));
  }
  MetricsLog::truncate_after_step(path, 20);
  EXPECT_EQ(read_file(path), "{\"step\": 10, \"loss\": 0.1}\n{\"step\": 20, \"loss\": 0.05}\n{\"event\": \"resume\"}\n");
  MetricsLog::truncate_after_step(dir + "/absent.jsonl", 5);  // no file: nothing to do
  EXPECT_FALSE(std::filesystem::exists(dir + "/absent.jsonl"));
  EXPECT_THROW(MetricsLog(dir + "/no/such/dir/m.jsonl"), Error);

  write_summary(dir + "/summary.json", JsonObject().add("final_step", 30).add("val", eval_json(EvalCounts{})));
  const std::string summary = read_file(dir + "/summary.json");
  EXPECT_EQ(summary.substr(0, 17), "{\"final_step\": 30");
  EXPECT_EQ(summary.back(), '\n');
}

}  // namespace
}  // namespace sb
