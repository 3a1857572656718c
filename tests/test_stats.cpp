// test_stats.cpp: incomplete beta and its inverse, Clopper-Pearson intervals against known
// values, eval accumulators, metrics.jsonl, and summary.json (RunSummary) written, read back and
// round-tripped over the committed results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "tasks/task.hpp"
#include "io/json.hpp"
#include "train/metrics_log.hpp"
#include "train/run_summary.hpp"
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

TEST(RunSummary, EvalFromCountsNumbersAndEscaping) {
  EvalCounts c;
  c.scored = 10, c.correct = 10, c.sequences = 2, c.sequences_correct = 2;
  const Json e = EvalSummary::from_counts(c, "val", 16, 2);
  EXPECT_EQ(e["errors"], 0);
  EXPECT_EQ(e["error_ci95"][0], 0.0);
  EXPECT_NEAR(e["error_ci95"][1].get<double>(), 0.3084971, 1e-7);
  EXPECT_TRUE(e["loss"].is_null());  // nothing was summed: NaN is written as null
  EXPECT_EQ(e["split"], "val");
  const std::vector<std::string> keys{"token_accuracy", "sequence_accuracy", "scored", "errors", "error_rate",
                                      "error_ci95", "sequences", "sequence_errors", "sequence_error_ci95", "loss",
                                      "split", "length", "examples"};
  std::vector<std::string> got;
  for (const auto& [k, v] : e.items()) got.push_back(k);
  EXPECT_EQ(got, keys);  // docs/run-format.md's order

  // Strings are escaped, numbers keep round-trip precision, NaN becomes null.
  RunSummary s;
  s.status = "diverged";
  s.message = "a\"b\\c\nd\te\x01 \xc3\xbcn";
  s.lr = 3e-4;
  s.wall_seconds = 1e-20;
  s.tokens_per_second = 1998793.4170812864;
  s.final_train_loss = NAN;
  s.steps = 12;
  const std::string text = Json(s).dump();
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_NE(text.find(R"("message":"a\"b\\c\nd\te\u0001 )"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("lr":0.0003)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("wall_seconds":1e-20)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("final_train_loss":null)"), std::string::npos) << text;
  const RunSummary back = parse_run_summary(text);
  EXPECT_EQ(back.message, s.message);
  EXPECT_EQ(back.lr, s.lr);
  EXPECT_EQ(back.tokens_per_second, s.tokens_per_second);
  EXPECT_TRUE(std::isnan(*back.final_train_loss));
  EXPECT_EQ(back.steps, 12);
  EXPECT_FALSE(back.task.has_value());  // absent fields stay unknown
}

TEST(RunSummary, ReaderIsLenientButNamesWrongTypes) {
  const RunSummary s = parse_run_summary(
      R"({"status": "early_stopped", "seed": "3", "lr": "0.001", "model": {"n_layers": 2.0, "init": {"std": 0.02}},
          "task_params": {"length": 32, "group": "A5"}, "eval": {"val": {"token_accuracy": 0.75, "sequence_accuracy": null}}})");
  EXPECT_EQ(s.seed, 3);
  EXPECT_EQ(s.lr, 0.001);
  EXPECT_EQ(s.model->n_layers, 2);
  EXPECT_EQ(s.task_params, (std::vector<std::pair<std::string, std::string>>{{"length", "32"}, {"group", "A5"}}));
  ASSERT_NE(s.find_eval("val"), nullptr);
  EXPECT_EQ(s.find_eval("val")->number("token_accuracy"), 0.75);
  EXPECT_FALSE(s.find_eval("val")->number("sequence_accuracy").has_value());
  EXPECT_EQ(s.find_eval("val")->scored, -1);
  auto error = [](const std::string& text) {
    try {
      parse_run_summary(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(R"({"model": {"n_layers": "two"}})").find("'model.n_layers': expected an integer"), std::string::npos);
  EXPECT_NE(error(R"({"eval": {"val": {"errors": 1.5}}})").find("'eval.val.errors'"), std::string::npos);
  EXPECT_NE(error("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error(R"({"status": "completed", "eval": {)").find("not valid JSON (parse error at line 1"), std::string::npos);
}

// Every committed summary (a line of a study's cells.jsonl.gz: {"id", "summary"}) loads, and writing
// it again gives the same JSON (same keys in the same order, same values): the format is unchanged.
TEST(RunSummary, CommittedSummariesRoundTrip) {
  const std::filesystem::path results = std::filesystem::path(SB_SOURCE_DIR) / "results";
  if (!std::filesystem::exists(results)) GTEST_SKIP() << "no results/";
  size_t n = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(results)) {
    if (entry.path().filename() != "cells.jsonl.gz") continue;
    std::istringstream lines(read_file_gzip(entry.path().string()));
    for (std::string line; std::getline(lines, line);) {
      const Json original = parse_json(line).at("summary");
      const Json again = parse_run_summary(original.dump());
      ASSERT_EQ(again, original) << entry.path();
      EXPECT_EQ(again.dump(), original.dump()) << entry.path();  // key order too
      ++n;
    }
  }
  EXPECT_GT(n, 500u);  // every committed cell (548 when this was written)
}

TEST(MetricsLog, AppendsFlushedLinesAndTruncatesForResume) {
  const std::string dir = std::string(SB_TEST_TMP) + "/metrics";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/metrics.jsonl";
  {
    MetricsLog log(path, /*truncate=*/true);
    for (int s : {10, 20, 30}) log.write(Json{{"kind", "train"}, {"step", s}, {"loss", 1.0 / s}});
    EXPECT_EQ(read_file(path), "{\"kind\":\"train\",\"step\":10,\"loss\":0.1}\n{\"kind\":\"train\",\"step\":20,\"loss\":0.05}\n"
                               "{\"kind\":\"train\",\"step\":30,\"loss\":0.03333333333333333}\n");  // flushed already
  }
  write_file_atomic(path, "{\"kind\":\"train\",\"step\":10,\"loss\":0.1}\n{\"kind\":\"eval\",\"step\":10,\"eval\":{\"v\":1}}\n"
                          "{\"kind\":\"train\",\"step\":20,\"loss\":0.05}\n");
  {
    MetricsLog log(path);  // appends
    log.write(Json{{"kind", "eval"}, {"step", 20}, {"eval", Json{{"v", 2}}}});
    log.write(Json{{"kind", "train"}, {"step", 30}, {"loss", 0.5}});
  }
  {
    MetricsLog log(path);  // appends
    log.write(Json{{"event", "resume"}});
  }
  write_file_atomic(path, read_file(path) + "{\"kind\":\"train\",\"st");  // a line torn by a crash
  // Resuming at step 20: its train line stays, its eval line goes (the resumed run evaluates again);
  // the last eval kept is returned (the one at 10).
  const Json last = MetricsLog::truncate_for_resume(path, 20);
  EXPECT_EQ(read_file(path), "{\"kind\":\"train\",\"step\":10,\"loss\":0.1}\n{\"kind\":\"eval\",\"step\":10,\"eval\":{\"v\":1}}\n"
                             "{\"kind\":\"train\",\"step\":20,\"loss\":0.05}\n{\"event\":\"resume\"}\n");
  EXPECT_EQ(last, (Json{{"v", 1}}));
  EXPECT_TRUE(MetricsLog::truncate_for_resume(dir + "/absent.jsonl", 5).is_null());  // no file: nothing to do
  EXPECT_FALSE(std::filesystem::exists(dir + "/absent.jsonl"));
  EXPECT_THROW(MetricsLog(dir + "/no/such/dir/m.jsonl"), Error);

  RunSummary s;
  s.status = "completed";
  s.steps = 30;
  s.eval.emplace_back("val", EvalSummary::from_counts(EvalCounts{}, "val", 8, 0));
  write_run_summary(dir + "/summary.json", s);
  const std::string summary = read_file(dir + "/summary.json");
  EXPECT_EQ(summary.substr(0, 20), "{\"status\":\"completed");
  EXPECT_EQ(summary.back(), '\n');
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 1);
  EXPECT_EQ(read_run_summary(dir + "/summary.json").steps, 30);
}

}  // namespace
}  // namespace sb
