// test_mqar.cpp: the mqar task against an independent brute-force validator of Zoology's MQAR
// (layout, distinct keys/values, one query per key, labels, score mask, token ranges), the
// distribution of the drawn gaps (first and second draw vs the exact power law), query order,
// random filler, the shared samplers of recall_sampling, and every configuration error.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tasks/recall_sampling.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

using Kv = std::map<std::string, std::string>;

std::unique_ptr<Task> make(const Kv& params) {
  TaskRegistry registry;
  register_builtin_tasks(registry);
  return registry.create("mqar", params);
}

// Draws example `index` straight from sample() (no split partition), for distribution checks.
Example draw(const Task& task, uint64_t index) {
  const auto T = static_cast<size_t>(task.seq_len());
  Example ex{std::vector<int32_t>(T), std::vector<int32_t>(T), std::vector<uint8_t>(T)};
  Rng rng(0x5EEDull, index);
  task.sample(0, rng, ex.view());
  return ex;
}

// Returns "" when ex is a valid Zoology MQAR example, else the first violation found.
std::string validate(const Example& ex, int V, int L, int K, bool random_filler) {
  const int half = V / 2;
  if (static_cast<int>(ex.input_ids.size()) != L) return "wrong length";
  std::map<int, int> value_of_key;
  std::set<int> values;
  for (int i = 0; i < K; ++i) {
    const int k = ex.input_ids[2 * i], v = ex.input_ids[2 * i + 1];
    if (k < 1 || k >= half) return fmt::format("context key {} at {} outside [1, {})", k, 2 * i, half);
    if (v < half || v >= V) return fmt::format("context value {} at {} outside [{}, {})", v, 2 * i + 1, half, V);
    if (value_of_key.count(k)) return fmt::format("key {} repeated in the context", k);
    if (!values.insert(v).second) return fmt::format("value {} repeated in the context", v);
    value_of_key[k] = v;
  }
  std::map<int, int> times_queried;
  int labelled = 0;
  for (int t = 0; t < L; ++t) {
    const int x = ex.input_ids[t], y = ex.labels[t];
    if (x < 0 || x >= V) return fmt::format("token {} at {} outside the vocabulary", x, t);
    if (ex.score_mask[t] != (y != kIgnoreLabel ? 1 : 0)) return fmt::format("score mask wrong at {}", t);
    if (y == kIgnoreLabel) {
      if (t >= 2 * K && !random_filler && x != 0) return fmt::format("non-query token {} at {} is not 0", x, t);
      continue;
    }
    ++labelled;
    if (t < 2 * K) return fmt::format("label inside the context at {}", t);
    if ((t - 2 * K) % 2 != 0) return fmt::format("query at odd slot offset {}", t);
    const auto it = value_of_key.find(x);
    if (it == value_of_key.end()) return fmt::format("query token {} at {} is not a context key", x, t);
    if (y != it->second) return fmt::format("label {} at {} but key {} holds {}", y, t, x, it->second);
    ++times_queried[x];
  }
  if (labelled != K) return fmt::format("{} labelled positions, expected {}", labelled, K);
  for (const auto& [k, v] : value_of_key)
    if (times_queried[k] != 1) return fmt::format("key {} queried {} times", k, times_queried[k]);
  return "";
}

// |count - n p| within z binomial standard deviations (+1 for discreteness).
void expect_binomial(int64_t count, int64_t n, double p, double z, const std::string& what) {
  const double mean = static_cast<double>(n) * p, sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::fabs(static_cast<double>(count) - mean), z * sd + 1.0)
      << what << ": count " << count << " of " << n << ", expected " << mean << " (sd " << sd << ")";
}

// Slot of the query of the i-th context key.
int gap_of_context_key(const Example& ex, int K, int i) {
  const int key = ex.input_ids[2 * i];
  for (size_t t = 2 * K; t < ex.labels.size(); t += 2)
    if (ex.labels[t] != kIgnoreLabel && ex.input_ids[t] == key) return static_cast<int>(t - 2 * K) / 2;
  return -1;
}

std::vector<double> power_law(int S, double a) {
  std::vector<double> p(S);
  double z = 0;
  for (int g = 0; g < S; ++g) z += p[g] = std::pow(g + 1.0, a - 1.0);
  for (double& x : p) x /= z;
  return p;
}

TEST(Mqar, RegisteredWithZoologyDefaults) {
  const auto task = make({});
  EXPECT_EQ(task->name(), "mqar");
  EXPECT_EQ(task->seq_len(), 256);
  EXPECT_EQ(task->vocab_size(), 8192);
  const auto names = task->vocab();
  EXPECT_EQ(names[0], "_");
  EXPECT_EQ(names[1], "k1");
  EXPECT_EQ(names[4095], "k4095");
  EXPECT_EQ(names[4096], "v4096");
  EXPECT_NE(task->details().find("Zoology"), std::string::npos);
}

TEST(Mqar, ValidatorAcceptsEveryConfiguration) {
  struct Case {
    int V, L, K;
  };
  for (const Case c : {Case{8192, 256, 16}, Case{8192, 512, 64}, Case{8192, 64, 4}, Case{12, 16, 2}, Case{4, 4, 1},
                       Case{8192, 130, 32}}) {
    // vocab 4, length 4 has only a handful of distinct sequences: too few for the split partition.
    const bool via_sample = c.V == 4;
    for (const char* order : {"zoology", "shuffled"}) {
      for (const bool filler : {false, true}) {
        const auto task = make({{"vocab", std::to_string(c.V)}, {"length", std::to_string(c.L)},
                                {"num_kv_pairs", std::to_string(c.K)}, {"query_order", order},
                                {"random_non_queries", filler ? "true" : "false"}});
        for (const char* split : {"train", "val"})
          for (uint64_t i = 0; i < 60; ++i) {
            const Example ex = via_sample ? draw(*task, i) : task->example(split, 7, i);
            const std::string problem = validate(ex, c.V, c.L, c.K, filler);
            ASSERT_EQ(problem, "") << "V=" << c.V << " L=" << c.L << " K=" << c.K << " " << order << " " << split
                                   << " #" << i;
          }
      }
    }
  }
}

TEST(Mqar, ValidatorRejectsBrokenExamples) {
  const auto task = make({{"length", "64"}, {"num_kv_pairs", "4"}});
  const Example good = task->example("train", 1, 0);
  ASSERT_EQ(validate(good, 8192, 64, 4, false), "");
  Example bad = good;
  for (size_t t = 8; t < 64; ++t)
    if (bad.labels[t] != kIgnoreLabel) {
      bad.labels[t] = bad.input_ids[1] == bad.labels[t] ? bad.input_ids[3] : bad.input_ids[1];
      break;
    }
  EXPECT_NE(validate(bad, 8192, 64, 4, false), "");
  bad = good;
  bad.input_ids[2] = bad.input_ids[0];
  EXPECT_NE(validate(bad, 8192, 64, 4, false), "");
}

TEST(Mqar, DeterministicPerIndex) {
  const auto task = make({{"length", "128"}, {"num_kv_pairs", "8"}, {"random_non_queries", "true"}});
  const Example a = task->example("train", 3, 11), b = task->example("train", 3, 11), c = task->example("train", 3, 12);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.input_ids, c.input_ids);
}

// Zoology's gaps: the first draw is p(g) = (g+1)^(a-1)/Z; the second draw, given the first y,
// is p(x)/(1 - p(y)). In zoology order, context key 0 holds draw 1 and key 1 draw 2.
TEST(Mqar, FirstAndSecondDrawnGapsFollowThePowerLaw) {
  const int L = 64, K = 4, S = (L - 2 * K) / 2, n = 40000;
  const double a = 0.01;
  const auto task = make({{"length", std::to_string(L)}, {"num_kv_pairs", std::to_string(K)}});
  std::vector<int64_t> first(S), second(S);
  for (int i = 0; i < n; ++i) {
    const Example ex = draw(*task, static_cast<uint64_t>(i));
    ++first[gap_of_context_key(ex, K, 0)];
    ++second[gap_of_context_key(ex, K, 1)];
  }
  const auto p = power_law(S, a);
  for (int g = 0; g < S; ++g) {
    double p2 = 0;
    for (int y = 0; y < S; ++y)
      if (y != g) p2 += p[y] * p[g] / (1 - p[y]);
    expect_binomial(first[g], n, p[g], 5.0, fmt::format("first gap {}", g));
    expect_binomial(second[g], n, p2, 5.0, fmt::format("second gap {}", g));
  }
  // The power-law shape: the first quarter of the slots is far more likely than the last quarter.
  int64_t near = 0, far = 0;
  for (int g = 0; g < S / 4; ++g) near += first[g];
  for (int g = S - S / 4; g < S; ++g) far += first[g];
  EXPECT_GT(near, 4 * far);
  EXPECT_GT(first[0], 2 * first[2]);
}

TEST(Mqar, PowerAOneIsUniform) {
  const int L = 48, K = 4, S = (L - 2 * K) / 2, n = 30000;
  const auto task = make({{"length", std::to_string(L)}, {"num_kv_pairs", std::to_string(K)}, {"power_a", "1"}});
  std::vector<int64_t> first(S);
  for (int i = 0; i < n; ++i) ++first[gap_of_context_key(draw(*task, static_cast<uint64_t>(i)), K, 0)];
  for (int g = 0; g < S; ++g) expect_binomial(first[g], n, 1.0 / S, 5.0, fmt::format("uniform gap {}", g));
}

// zoology order: the first context key usually takes the first (small) drawn gap, so it is often
// queried first. shuffled order: every key is equally likely to be queried first.
TEST(Mqar, QueryOrderZoologyBiasedShuffledUniform) {
  const int L = 64, K = 8, n = 20000;
  for (const char* order : {"zoology", "shuffled"}) {
    const auto task = make({{"length", std::to_string(L)}, {"num_kv_pairs", std::to_string(K)}, {"query_order", order}});
    std::vector<int64_t> first_queried(K);
    for (int i = 0; i < n; ++i) {
      const Example ex = draw(*task, static_cast<uint64_t>(i));
      int best = 0;
      for (int j = 1; j < K; ++j)
        if (gap_of_context_key(ex, K, j) < gap_of_context_key(ex, K, best)) best = j;
      ++first_queried[best];
    }
    if (std::string(order) == "shuffled") {
      for (int j = 0; j < K; ++j) expect_binomial(first_queried[j], n, 1.0 / K, 5.0, fmt::format("key {} first", j));
    } else {
      EXPECT_GT(first_queried[0], 8 * n / (5 * K)) << "zoology order should favour the first context key";  // ~2.1/K
      EXPECT_GT(first_queried[0], first_queried[1]);
      EXPECT_GT(first_queried[1], first_queried[K - 1]);
    }
  }
}

TEST(Mqar, RandomNonQueriesFillsZerosUniformly) {
  const int V = 16, L = 64, K = 4, n = 4000;
  const auto task = make({{"vocab", std::to_string(V)}, {"length", std::to_string(L)},
                          {"num_kv_pairs", std::to_string(K)}, {"random_non_queries", "true"}});
  std::vector<int64_t> counts(V);
  int64_t fillers = 0;
  for (int i = 0; i < n; ++i) {
    const Example ex = draw(*task, static_cast<uint64_t>(i));
    ASSERT_EQ(validate(ex, V, L, K, true), "");
    for (int t = 2 * K; t < L; ++t)
      if (ex.labels[t] == kIgnoreLabel) ++counts[ex.input_ids[t]], ++fillers;
  }
  for (int v = 0; v < V; ++v) expect_binomial(counts[v], fillers, 1.0 / V, 5.0, fmt::format("filler token {}", v));
  // With the paper vocabulary nearly every filler becomes non-zero.
  const auto big = make({{"length", "256"}, {"num_kv_pairs", "16"}, {"random_non_queries", "true"}});
  int64_t zeros = 0, slots = 0;
  for (int i = 0; i < 200; ++i) {
    const Example ex = draw(*big, static_cast<uint64_t>(i));
    for (int t = 32; t < 256; ++t)
      if (ex.labels[t] == kIgnoreLabel) zeros += ex.input_ids[t] == 0, ++slots;
  }
  EXPECT_GT(slots, 40000);
  EXPECT_LE(zeros, 25);  // Poisson with mean slots/8192 ~ 5: filler zeros are rare
}

TEST(Mqar, FillerStaysZeroByDefault) {
  const auto task = make({{"length", "128"}, {"num_kv_pairs", "8"}});
  const Example ex = draw(*task, 0);
  for (int t = 16; t < 128; ++t)
    if (ex.labels[t] == kIgnoreLabel) {
      EXPECT_EQ(ex.input_ids[t], 0) << t;
    }
}

TEST(RecallSampling, DistinctSamplesAreUniformOrderedTuples) {
  for (const auto& [n, k] : {std::pair{6, 2}, std::pair{4, 3}}) {  // sparse (rejection) and dense (shuffle) paths
    std::map<std::vector<int32_t>, int64_t> counts;
    const int draws = 24000;
    for (int i = 0; i < draws; ++i) {
      Rng rng(99, static_cast<uint64_t>(i));
      std::vector<int32_t> out(k);
      recall::sample_distinct(rng, 10, n, k, out.data());
      for (int32_t x : out) ASSERT_TRUE(x >= 10 && x < 10 + n);
      ASSERT_EQ(std::set<int32_t>(out.begin(), out.end()).size(), static_cast<size_t>(k));
      ++counts[out];
    }
    int tuples = 1;
    for (int j = 0; j < k; ++j) tuples *= n - j;
    ASSERT_EQ(static_cast<int>(counts.size()), tuples);
    for (const auto& [tuple, c] : counts) expect_binomial(c, draws, 1.0 / tuples, 5.0, "ordered tuple");
  }
}

TEST(RecallSampling, AllGapsDrawnWhenKEqualsSpace) {
  const recall::PowerLawGaps gaps(10, 0.01);
  Rng rng(1, 2);
  std::vector<int32_t> out(10);
  gaps.draw(rng, 10, out.data());
  EXPECT_EQ(std::set<int32_t>(out.begin(), out.end()).size(), 10u);
  double total = 0;
  for (int g = 0; g < 10; ++g) total += gaps.probability(g);
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_NEAR(gaps.probability(1) / gaps.probability(0), std::pow(2.0, -0.99), 1e-12);
}

void expect_error_naming(const Kv& params, const std::string& name) {
  try {
    make(params);
    ADD_FAILURE() << "no error for parameter " << name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + name + "'"), std::string::npos) << e.what();
  }
}

TEST(Mqar, ErrorsNameTheParameter) {
  expect_error_naming({{"vocab", "3"}}, "vocab");
  expect_error_naming({{"power_a", "0"}}, "power_a");
  expect_error_naming({{"power_a", "-0.5"}}, "power_a");
  expect_error_naming({{"power_a", "x"}}, "power_a");
  expect_error_naming({{"length", "255"}}, "length");
  expect_error_naming({{"length", "32"}, {"num_kv_pairs", "20"}}, "num_kv_pairs");  // 2K > L
  expect_error_naming({{"length", "60"}, {"num_kv_pairs", "16"}}, "length");        // 14 slots < 16 queries
  expect_error_naming({{"vocab", "8"}, {"length", "64"}, {"num_kv_pairs", "4"}}, "num_kv_pairs");  // 3 keys
  expect_error_naming({{"num_kv_pairs", "0"}}, "num_kv_pairs");
  expect_error_naming({{"query_order", "random"}}, "query_order");
  expect_error_naming({{"random_non_queries", "maybe"}}, "random_non_queries");
  expect_error_naming({{"no_such", "1"}}, "no_such");
  EXPECT_NO_THROW(make({{"length", "64"}, {"num_kv_pairs", "16"}}));  // exactly 4K
}

}  // namespace
}  // namespace sb
