// test_mqrar.cpp: the mqrar (MQRAR-N) task against a brute-force validator that recomputes each
// answer from the input tokens alone, scanning the context backwards for the N-th most recent
// assignment of the queried key; both layouts (varied: per-key counts uniform in [N, A], so the
// answer's occurrence index varies; fixed: every key A times); also the context's random
// interleaving, query order, power-law gaps over a varying query region, filler and every error path.
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
  bool varied = false;  // layout varied: each key assigned [N, A] times; fixed: exactly A times
};

// The context length read from the input tokens alone: the first even position that does not hold
// a key followed by a value (the first query slot's filler 0 ends it). Valid without random filler.
int context_length(const Example& ex, const Shape& s) {
  const int half = s.V / 2;
  int t = 0;
  while (t + 1 < s.L && ex.input_ids[t] >= 1 && ex.input_ids[t] < half && ex.input_ids[t + 1] >= half) t += 2;
  return t;
}

// Returns "" when ex is a valid MQRAR-N example, else the first violation found. The context length
// is read from the tokens (context_length); with random filler, which can mimic key/value pairs,
// the caller passes it (from the same draw without filler: the filler is drawn last).
std::string validate(const Example& ex, const Shape& s, bool random_filler, int context_len = -1) {
  const int half = s.V / 2;
  const int C = context_len >= 0 ? context_len : random_filler && !s.varied ? 2 * s.K * s.A : context_length(ex, s);
  if (static_cast<int>(ex.input_ids.size()) != s.L) return "wrong length";
  if (!s.varied && C != 2 * s.K * s.A) return fmt::format("context of {} tokens, expected {}", C, 2 * s.K * s.A);
  if (s.varied && (C < 2 * s.K * s.N || C > 2 * s.K * s.A))
    return fmt::format("context of {} tokens outside [{}, {}]", C, 2 * s.K * s.N, 2 * s.K * s.A);
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
  for (const auto& [k, n] : assignments_of_key) {
    if (!s.varied && n != s.A) return fmt::format("key {} assigned {} times, expected {}", k, n, s.A);
    if (s.varied && (n < s.N || n > s.A)) return fmt::format("key {} assigned {} times, not in [{}, {}]", k, n, s.N, s.A);
  }
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
          {"n_back", std::to_string(s.N)}, {"assignments", std::to_string(s.A)},
          {"layout", s.varied ? "varied" : "fixed"}};
}

// The default layout changed from fixed (every key N+1 times) to varied; the old layout is
// layout=fixed, checked by FixedDefaultAssignmentsIsNBackPlusOne.
TEST(Mqrar, RegisteredWithPathDefaults) {
  const auto task = make({});
  EXPECT_EQ(task->name(), "mqrar");
  EXPECT_EQ(task->seq_len(), 768);
  EXPECT_EQ(task->vocab_size(), 8192);
  EXPECT_NE(task->details().find("layout varied"), std::string::npos) << task->details();
  EXPECT_NE(task->details().find("[N, A] = [1, 4]"), std::string::npos) << task->details();  // A = n_back+3
  for (uint64_t i = 0; i < 20; ++i)
    ASSERT_EQ(validate(task->example("train", 1, i), {8192, 768, 32, 1, 4, true}, false), "") << i;
}

TEST(Mqrar, VariedDefaultAssignmentsIsNBackPlusThree) {
  for (int N = 1; N <= 4; ++N) {
    const auto task = make({{"n_back", std::to_string(N)}});
    for (uint64_t i = 0; i < 20; ++i)
      ASSERT_EQ(validate(task->example("train", 2, i), {8192, 768, 32, N, N + 3, true}, false), "") << "N=" << N;
    EXPECT_EQ(validate(task->example("train", 2, 0), {8192, 768, 32, N, N + 1, false}, false).empty(), false)
        << "a varied example is not a fixed-layout one";
  }
}

TEST(Mqrar, FixedDefaultAssignmentsIsNBackPlusOne) {
  for (int N = 1; N <= 4; ++N) {
    const auto task = make({{"n_back", std::to_string(N)}, {"layout", "fixed"}});
    EXPECT_NE(task->details().find("layout fixed"), std::string::npos) << task->details();
    for (uint64_t i = 0; i < 20; ++i)
      ASSERT_EQ(validate(task->example("train", 2, i), {8192, 768, 32, N, N + 1}, false), "") << "N=" << N;
  }
}

TEST(Mqrar, ValidatorAcceptsEveryConfiguration) {
  for (const Shape s : {Shape{8192, 768, 32, 1, 2}, Shape{8192, 768, 32, 3, 4}, Shape{8192, 768, 32, 4, 5},
                        Shape{8192, 768, 32, 2, 2}, Shape{8192, 768, 32, 1, 7}, Shape{64, 96, 8, 2, 3},
                        Shape{16, 48, 4, 1, 1}, Shape{8192, 768, 32, 1, 4, true}, Shape{8192, 768, 32, 4, 7, true},
                        Shape{8192, 768, 32, 2, 3, true}, Shape{64, 96, 8, 2, 4, true}, Shape{16, 48, 4, 1, 2, true}}) {
    for (const char* order : {"zoology", "shuffled"})
      for (const bool filler : {false, true}) {
        Kv p = params_of(s);
        p["query_order"] = order;
        p["random_non_queries"] = filler ? "true" : "false";
        if (filler && s.varied) continue;  // needs the context length from a twin draw: the test below
        const auto task = make(p);
        for (const char* split : {"train", "test"})
          for (uint64_t i = 0; i < 40; ++i)
            ASSERT_EQ(validate(task->example(split, 5, i), s, filler), "")
                << "K=" << s.K << " N=" << s.N << " A=" << s.A << " varied=" << s.varied << " " << order << " "
                << split << " #" << i;
      }
  }
}

// Many varied examples, every label recomputed from the input tokens; with random filler the
// context length comes from the same draw without filler (the filler is drawn last).
TEST(Mqrar, VariedLabelsMatchBruteForceOnManyExamples) {
  for (const Shape s : {Shape{8192, 768, 32, 1, 4, true}, Shape{8192, 768, 32, 3, 6, true}, Shape{128, 96, 8, 2, 5, true}})
    for (const char* order : {"zoology", "shuffled"}) {
      Kv p = params_of(s);
      p["query_order"] = order;
      const auto plain = make(p);
      p["random_non_queries"] = "true";
      const auto filled = make(p);
      for (uint64_t i = 0; i < 500; ++i) {
        const Example a = draw(*plain, i), b = draw(*filled, i);
        ASSERT_EQ(validate(a, s, false), "") << "N=" << s.N << " " << order << " #" << i;
        ASSERT_EQ(validate(b, s, true, context_length(a, s)), "") << "N=" << s.N << " " << order << " filler #" << i;
        ASSERT_EQ(a.labels, b.labels);
      }
    }
}

// The occurrence index of the answer among its key's assignments (1 = the key's first assignment),
// computed from the tokens, for every query of n examples: counts[o] = queries answered by
// assignment o.
std::vector<int64_t> answer_occurrences(const Task& task, const Shape& s, int n) {
  std::vector<int64_t> counts(static_cast<size_t>(s.A) + 1, 0);
  for (int i = 0; i < n; ++i) {
    const Example ex = draw(task, static_cast<uint64_t>(i));
    const int C = context_length(ex, s);
    for (int t = C; t < s.L; ++t) {
      if (ex.labels[t] == kIgnoreLabel) continue;
      int occurrence = 0, answer_occurrence = -1;
      for (int u = 0; u < C; u += 2)
        if (ex.input_ids[u] == ex.input_ids[t]) {
          ++occurrence;
          if (ex.input_ids[u + 1] == ex.labels[t]) answer_occurrence = occurrence;
        }
      EXPECT_GE(answer_occurrence, 1);
      if (answer_occurrence >= 1) ++counts[static_cast<size_t>(answer_occurrence)];
    }
  }
  return counts;
}

// The point of layout=varied: the answer is not always the same occurrence of its key. With counts
// uniform in [N, A], it is occurrence a-N+1, uniform over 1..A-N+1. Under layout=fixed it is always
// occurrence A-N+1 (the second for the old default A = N+1): a rule counting from the first
// assignment finds it without counting back from the query.
TEST(Mqrar, AnswerOccurrenceIndexVaries) {
  const int n = 3000;
  for (int N = 1; N <= 4; ++N) {
    const Shape varied{8192, 768, 32, N, N + 3, true};
    const auto counts = answer_occurrences(*make(params_of(varied)), varied, n);
    const int64_t queries = int64_t{n} * varied.K;
    for (int o = 1; o <= 4; ++o) expect_binomial(counts[static_cast<size_t>(o)], queries, 0.25, 5.0,
                                                 fmt::format("N={} answer is occurrence {}", N, o));
    for (int o = 5; o <= varied.A; ++o) EXPECT_EQ(counts[static_cast<size_t>(o)], 0) << "N=" << N << " o=" << o;
    const Shape fixed{8192, 768, 32, N, N + 1};
    const auto old = answer_occurrences(*make(params_of(fixed)), fixed, 200);
    EXPECT_EQ(old[2], int64_t{200} * fixed.K) << "fixed layout: always the second occurrence, N=" << N;
  }
}

// The query region starts after a context of varying length: the first key's gap follows the
// power law over that example's own (L - C)/2 slots. Each count is a sum of Bernoulli(p_i) with
// p_i = P(g | slots_i); compare with its mean and variance.
TEST(Mqrar, VariedGapsFollowThePowerLawOverEachQueryRegion) {
  const Shape s{8192, 160, 4, 1, 6, true};  // contexts of 8..48 tokens, 56..76 query slots
  const auto task = make(params_of(s));
  const int n = 30000, G = 6;
  std::vector<int64_t> hits(G, 0);
  std::vector<double> mean(G, 0), var(G, 0);
  std::set<int> lengths;
  for (int i = 0; i < n; ++i) {
    const Example ex = draw(*task, static_cast<uint64_t>(i));
    const int C = context_length(ex, s), slots = (s.L - C) / 2;
    lengths.insert(C);
    double z = 0;
    for (int g = 0; g < slots; ++g) z += std::pow(g + 1.0, -0.99);
    int gap = -1;
    for (int t = C; t < s.L; t += 2)
      if (ex.labels[t] != kIgnoreLabel && ex.input_ids[t] == ex.input_ids[0]) gap = (t - C) / 2;
    ASSERT_GE(gap, 0);
    for (int g = 0; g < G; ++g) {
      const double p = std::pow(g + 1.0, -0.99) / z;
      mean[g] += p, var[g] += p * (1 - p);
      hits[g] += gap == g;
    }
  }
  EXPECT_GE(lengths.size(), 15u) << "the context length varies";
  for (int g = 0; g < G; ++g)
    EXPECT_LE(std::fabs(hits[g] - mean[g]), 5 * std::sqrt(var[g]) + 1) << "gap " << g << ": " << hits[g] << " vs "
                                                                        << mean[g];
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
  expect_error_naming({{"n_back", "3"}, {"assignments", "2"}, {"layout", "fixed"}}, "assignments");
  expect_error_naming({{"assignments", "0"}}, "assignments");
  expect_error_naming({{"n_back", "2"}, {"assignments", "2"}}, "assignments");  // varied needs A > N
  EXPECT_NO_THROW(make({{"n_back", "2"}, {"assignments", "2"}, {"layout", "fixed"}}));
  expect_error_naming({{"layout", "random"}}, "layout");
  expect_error_naming({{"n_back", "9"}}, "length");  // varied default A = 12: a 768-token context
  expect_error_naming({{"vocab", "3"}}, "vocab");
  expect_error_naming({{"power_a", "0"}}, "power_a");
  expect_error_naming({{"length", "767"}}, "length");
  expect_error_naming({{"num_kv_pairs", "32"}, {"assignments", "13"}}, "length");  // context 832 > 768
  expect_error_naming({{"num_kv_pairs", "32"}, {"assignments", "12"}}, "length");  // 0 slots for 32 queries
  expect_error_naming({{"num_kv_pairs", "32"}, {"assignments", "12"}, {"layout", "fixed"}}, "length");
  expect_error_naming({{"vocab", "16"}, {"num_kv_pairs", "8"}, {"length", "64"}, {"assignments", "2"}},
                      "num_kv_pairs");  // 7 keys
  expect_error_naming({{"vocab", "64"}, {"num_kv_pairs", "8"}, {"assignments", "5"}, {"length", "128"}},
                      "vocab");  // 40 values > 32
  expect_error_naming({{"query_order", "lifo"}}, "query_order");
  expect_error_naming({{"random_non_queries", "2"}}, "random_non_queries");
  EXPECT_NO_THROW(make({{"num_kv_pairs", "32"}, {"assignments", "11"}, {"n_back", "4"}}));  // 704 + 2*32 = 768
  EXPECT_NO_THROW(make({{"n_back", "8"}}));  // varied default A = 11: the longest context fits
}

}  // namespace
}  // namespace sb
