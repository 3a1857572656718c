// test_mqrar.cpp: the mqrar (MQRAR-N) task against a brute-force validator that recomputes each
// answer by scanning the context backwards for the N-th most recent assignment of the queried key;
// also the context's random interleaving, query order, power-law gaps, filler and every error path.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

using Kv = std::map<std::string, std::string>;

std::unique_ptr<Task> make(const Kv& params) {
  TaskRegistry registry;
  register_builtin_tasks(registry);
  return registry.create("mqrar", params);
}

Example draw(const Task& task, uint64_t index) {
  const auto T = static_cast<size_t>(task.seq_len());
  Example ex{std::vector<int32_t>(T), std::vector<int32_t>(T), std::vector<uint8_t>(T)};
  Rng rng(0xC0FFEEull, index);
  task.sample(0, rng, ex.view());
  return ex;
}

struct Shape {
  int V, L, K, N, A;
};

// Returns "" when ex is a valid MQRAR-N example, else the first violation found.
std::string validate(const Example& ex, const Shape& s, bool random_filler) {
  const int half = s.V / 2, C = 2 * s.K * s.A;  // C: context tokens
  if (static_cast<int>(ex.input_ids.size()) != s.L) return "wrong length";
  std::map<int, int> assignments_of_key;
  std::set<int> values;
  for (int t = 0; t < C; t += 2) {
    const int k = ex.input_ids[t], v = ex.input_ids[t + 1];
    if (k < 1 || k >= half) return fmt::format("context key {} at {} outside [1, {})", k, t, half);
    if (v < half || v >= s.V) return fmt::format("context value {} at {} outside [{}, {})", v, t + 1, half, s.V);
    if (!values.insert(v).second) return fmt::format("value {} assigned twice", v);
    ++assignments_of_key[k];
  }
  if (static_cast<int>(assignments_of_key.size()) != s.K)
    return fmt::format("{} distinct keys, expected {}", assignments_of_key.size(), s.K);
  for (const auto& [k, n] : assignments_of_key)
    if (n != s.A) return fmt::format("key {} assigned {} times, expected {}", k, n, s.A);
  std::map<int, int> times_queried;
  int labelled = 0;
  for (int t = 0; t < s.L; ++t) {
    const int x = ex.input_ids[t], y = ex.labels[t];
    if (x < 0 || x >= s.V) return fmt::format("token {} at {} outside the vocabulary", x, t);
    if (ex.score_mask[t] != (y != kIgnoreLabel ? 1 : 0)) return fmt::format("score mask wrong at {}", t);
    if (y == kIgnoreLabel) {
      if (t >= C && !random_filler && x != 0) return fmt::format("non-query token {} at {} is not 0", x, t);
      continue;
    }
    ++labelled;
    if (t < C || (t - C) % 2 != 0) return fmt::format("label at {} is not a query slot", t);
    if (!assignments_of_key.count(x)) return fmt::format("query token {} at {} is not a context key", x, t);
    // Scan backwards from the query for the N-th most recent assignment of key x.
    int found = 0, answer = -1;
    for (int u = std::min(t, C) - 2; u >= 0; u -= 2)
      if (ex.input_ids[u] == x && ++found == s.N) {
        answer = ex.input_ids[u + 1];
        break;
      }
    if (y != answer) return fmt::format("label {} at {}, the {}-back value of key {} is {}", y, t, s.N, x, answer);
    ++times_queried[x];
  }
  if (labelled != s.K) return fmt::format("{} labelled positions, expected {}", labelled, s.K);
  for (const auto& [k, n] : assignments_of_key)
    if (times_queried[k] != 1) return fmt::format("key {} queried {} times", k, times_queried[k]);
  return "";
}

void expect_binomial(int64_t count, int64_t n, double p, double z, const std::string& what) {
  const double mean = static_cast<double>(n) * p, sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::fabs(static_cast<double>(count) - mean), z * sd + 1.0)
      << what << ": count " << count << " of " << n << ", expected " << mean << " (sd " << sd << ")";
}

Kv params_of(const Shape& s) {
  return {{"vocab", std::to_string(s.V)}, {"length", std::to_string(s.L)}, {"num_kv_pairs", std::to_string(s.K)},
          {"n_back", std::to_string(s.N)}, {"assignments", std::to_string(s.A)}};
}

TEST(Mqrar, RegisteredWithPathDefaults) {
  const auto task = make({});
  EXPECT_EQ(task->name(), "mqrar");
  EXPECT_EQ(task->seq_len(), 768);
  EXPECT_EQ(task->vocab_size(), 8192);
  EXPECT_NE(task->details().find("A=2"), std::string::npos) << task->details();  // default assignments = n_back+1
  const Example ex = task->example("train", 1, 0);
  EXPECT_EQ(validate(ex, {8192, 768, 32, 1, 2}, false), "");
}

TEST(Mqrar, DefaultAssignmentsIsNBackPlusOne) {
  for (int N = 1; N <= 4; ++N) {
    const auto task = make({{"n_back", std::to_string(N)}});
    for (uint64_t i = 0; i < 20; ++i)
      ASSERT_EQ(validate(task->example("train", 2, i), {8192, 768, 32, N, N + 1}, false), "") << "N=" << N;
  }
}

TEST(Mqrar, ValidatorAcceptsEveryConfiguration) {
  for (const Shape s : {Shape{8192, 768, 32, 1, 2}, Shape{8192, 768, 32, 3, 4}, Shape{8192, 768, 32, 4, 5},
                        Shape{8192, 768, 32, 2, 2}, Shape{8192, 768, 32, 1, 7}, Shape{64, 96, 8, 2, 3},
                        Shape{16, 48, 4, 1, 1}}) {
    for (const char* order : {"zoology", "shuffled"})
      for (const bool filler : {false, true}) {
        Kv p = params_of(s);
        p["query_order"] = order;
        p["random_non_queries"] = filler ? "true" : "false";
        const auto task = make(p);
        for (const char* split : {"train", "test"})
          for (uint64_t i = 0; i < 40; ++i)
            ASSERT_EQ(validate(task->example(split, 5, i), s, filler), "")
                << "K=" << s.K << " N=" << s.N << " A=" << s.A << " " << order << " " << split << " #" << i;
      }
  }
}

TEST(Mqrar, ValidatorCatchesTheWrongNBack) {
  // An example labelled for N=2 fails validation as N=1 and N=3: the answers really differ.
  const Shape s{8192, 768, 32, 2, 4};
  const auto task = make(params_of(s));
  const Example ex = task->example("train", 9, 0);
  ASSERT_EQ(validate(ex, s, false), "");
  EXPECT_NE(validate(ex, {8192, 768, 32, 1, 4}, false), "");
  EXPECT_NE(validate(ex, {8192, 768, 32, 3, 4}, false), "");
}

// The A*K assignments are a uniform permutation of the multiset: two given consecutive assignments
// share a key with probability (A-1)/(AK-1), and a key's answer position varies across examples.
TEST(Mqrar, AssignmentsAreUniformlyInterleaved) {
  const Shape s{8192, 160, 4, 2, 3};  // 12 assignments
  const auto task = make(params_of(s));
  const int n = 30000;
  int64_t same_first_two = 0, same_last_two = 0, first_key_last = 0;
  for (int i = 0; i < n; ++i) {
    const Example ex = draw(*task, static_cast<uint64_t>(i));
    same_first_two += ex.input_ids[0] == ex.input_ids[2];
    same_last_two += ex.input_ids[20] == ex.input_ids[22];
    first_key_last += ex.input_ids[22] == ex.input_ids[0];
  }
  const double p_same = (s.A - 1.0) / (s.A * s.K - 1.0);
  expect_binomial(same_first_two, n, p_same, 5.0, "first two assignments share a key");
  expect_binomial(same_last_two, n, p_same, 5.0, "last two assignments share a key");
  expect_binomial(first_key_last, n, p_same, 5.0, "first and last assignments share a key");
}

TEST(Mqrar, QueryOrderAndPowerLawGaps) {
  // zoology order: the first key (by first appearance) takes the first drawn gap: P(g) ~ (g+1)^(a-1).
  const Shape s{8192, 96, 4, 1, 2};  // 16-token context, 40 query slots
  const int S = (s.L - 2 * s.K * s.A) / 2, n = 30000;
  for (const char* order : {"zoology", "shuffled"}) {
    Kv p = params_of(s);
    p["query_order"] = order;
    const auto task = make(p);
    std::vector<int64_t> first_gap(S);
    int64_t first_key_queried_first = 0;
    for (int i = 0; i < n; ++i) {
      const Example ex = draw(*task, static_cast<uint64_t>(i));
      const int C = 2 * s.K * s.A;
      int first_query_key = -1, gap = -1;
      for (int t = C; t < s.L; t += 2)
        if (ex.labels[t] != kIgnoreLabel) {
          if (first_query_key < 0) first_query_key = ex.input_ids[t];
          if (ex.input_ids[t] == ex.input_ids[0]) gap = (t - C) / 2;
        }
      ASSERT_GE(gap, 0);
      ++first_gap[gap];
      first_key_queried_first += first_query_key == ex.input_ids[0];
    }
    if (std::string(order) == "zoology") {
      double z = 0;
      for (int g = 0; g < S; ++g) z += std::pow(g + 1.0, -0.99);
      for (int g = 0; g < S; ++g)
        expect_binomial(first_gap[g], n, std::pow(g + 1.0, -0.99) / z, 5.0, fmt::format("gap {}", g));
      EXPECT_GT(first_key_queried_first, 29 * n / 100) << "zoology favours the first key (~0.32 here, 1/4 unbiased)";
    } else {
      expect_binomial(first_key_queried_first, n, 1.0 / s.K, 5.0, "first key queried first (shuffled)");
    }
  }
}

TEST(Mqrar, RandomNonQueriesFillsZeros) {
  const Shape s{16, 48, 4, 1, 1};
  Kv p = params_of(s);
  p["random_non_queries"] = "true";
  const auto task = make(p);
  int64_t zeros = 0, fillers = 0;
  for (int i = 0; i < 3000; ++i) {
    const Example ex = draw(*task, static_cast<uint64_t>(i));
    ASSERT_EQ(validate(ex, s, true), "");
    for (int t = 8; t < s.L; ++t)
      if (ex.labels[t] == kIgnoreLabel) zeros += ex.input_ids[t] == 0, ++fillers;
  }
  expect_binomial(zeros, fillers, 1.0 / 16, 5.0, "filler zeros");
}

void expect_error_naming(const Kv& params, const std::string& name) {
  try {
    make(params);
    ADD_FAILURE() << "no error for parameter " << name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + name + "'"), std::string::npos) << e.what();
  }
}

TEST(Mqrar, ErrorsNameTheParameter) {
  expect_error_naming({{"n_back", "0"}}, "n_back");
  expect_error_naming({{"n_back", "3"}, {"assignments", "2"}}, "assignments");
  expect_error_naming({{"assignments", "0"}}, "assignments");
  expect_error_naming({{"vocab", "3"}}, "vocab");
  expect_error_naming({{"power_a", "0"}}, "power_a");
  expect_error_naming({{"length", "767"}}, "length");
  expect_error_naming({{"num_kv_pairs", "32"}, {"assignments", "13"}}, "length");  // context 832 > 768
  expect_error_naming({{"num_kv_pairs", "32"}, {"assignments", "12"}}, "length");  // 0 slots for 32 queries
  expect_error_naming({{"vocab", "16"}, {"num_kv_pairs", "8"}, {"length", "64"}}, "num_kv_pairs");  // 7 keys
  expect_error_naming({{"vocab", "64"}, {"num_kv_pairs", "8"}, {"assignments", "5"}, {"length", "128"}},
                      "vocab");  // 40 values > 32
  expect_error_naming({{"query_order", "lifo"}}, "query_order");
  expect_error_naming({{"random_non_queries", "2"}}, "random_non_queries");
  EXPECT_NO_THROW(make({{"num_kv_pairs", "32"}, {"assignments", "11"}, {"n_back", "4"}}));  // 704 + 2*32 = 768
}

}  // namespace
}  // namespace sb
