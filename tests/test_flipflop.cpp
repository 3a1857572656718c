// test_flipflop.cpp: brute-force validation of the flip-flop task: structure and replay of every
// read, labels in both loss modes (reads: only at each r; all: next token everywhere) and the score
// mask, instruction and bit frequencies against binomial bounds for every split and explicit
// probability mix, and the parameter error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tasks/registry.hpp"

namespace {

using sb::Task;
using Params = std::map<std::string, std::string>;
enum Token : int32_t { kW = 0, kR = 1, kI = 2, kZero = 3, kOne = 4 };

std::unique_ptr<Task> make(const Params& params) {
  sb::TaskRegistry registry;
  sb::register_builtin_tasks(registry);
  return registry.create("flipflop", params);
}

// Passes when the task cannot be created with `params` and the message contains every fragment.
void expect_error(const Params& params, const std::vector<std::string>& fragments) {
  try {
    make(params);
    ADD_FAILURE() << "no error for the given parameters";
  } catch (const sb::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

// |count - n p| <= 5 sqrt(n p (1 - p)): a binomial count within five standard deviations.
void expect_binomial(int64_t count, int64_t n, double p, const std::string& what) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::fabs(static_cast<double>(count) - mean), 5 * sd + 1e-9)
      << what << ": count " << count << " of " << n << ", expected p " << p;
}

// Checks everything that must hold for one example, by replaying it. reads_only: loss=reads
// (labels only at each r), else loss=all (the next token at every position).
void check_example(const sb::Example& ex, int64_t T, bool reads_only = true) {
  ASSERT_EQ(static_cast<int64_t>(ex.input_ids.size()), T);
  const auto& x = ex.input_ids;
  ASSERT_EQ(x[0], kW) << "first instruction must be w";
  ASSERT_EQ(x[T - 2], kR) << "last instruction must be r";
  int32_t memory = -1;
  for (int64_t t = 0; t < T; t += 2) {
    ASSERT_TRUE(x[t] == kW || x[t] == kR || x[t] == kI) << "instruction expected at " << t;
    ASSERT_TRUE(x[t + 1] == kZero || x[t + 1] == kOne) << "bit expected at " << t + 1;
    if (x[t] == kW) memory = x[t + 1];
    if (x[t] == kR) {
      ASSERT_EQ(x[t + 1], memory) << "read at " << t << " does not return the last written bit";
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    if (t + 1 < T && (x[t] == kR || !reads_only)) {
      ASSERT_EQ(ex.labels[t], x[t + 1]) << "label at " << t << " is not the next token";
    } else if (t + 1 < T) {
      ASSERT_EQ(ex.labels[t], sb::kIgnoreLabel) << "loss=reads labels a non-read position " << t;
    } else {
      ASSERT_EQ(ex.labels[t], sb::kIgnoreLabel) << "last label must be ignored";
    }
    ASSERT_EQ(ex.score_mask[t], x[t] == kR ? 1 : 0) << "score mask at " << t;
    if (ex.score_mask[t]) {
      ASSERT_NE(ex.labels[t], sb::kIgnoreLabel);
    }
  }
}

struct Counts {
  int64_t w = 0, r = 0, i = 0;  // instructions strictly between the first and last pair
  int64_t ones = 0, bits = 0;   // bits after w and i
};

Counts count_split(const Task& task, const std::string& split, int n_examples, uint64_t seed) {
  Counts c;
  const int64_t T = task.seq_len();
  for (int k = 0; k < n_examples; ++k) {
    const sb::Example ex = task.example(split, seed, static_cast<uint64_t>(k));
    check_example(ex, T);
    for (int64_t t = 0; t < T; t += 2) {
      const int32_t instr = ex.input_ids[t];
      if (t > 0 && t < T - 2) {
        c.w += instr == kW;
        c.r += instr == kR;
        c.i += instr == kI;
      }
      if (instr != kR) {
        c.ones += ex.input_ids[t + 1] == kOne;
        ++c.bits;
      }
    }
  }
  return c;
}

void expect_mix(const Task& task, const std::string& split, double pw, double pr, double pi) {
  const int n_examples = 400;
  const Counts c = count_split(task, split, n_examples, 7);
  const int64_t n = static_cast<int64_t>(n_examples) * (task.seq_len() / 2 - 2);
  ASSERT_EQ(c.w + c.r + c.i, n);
  expect_binomial(c.w, n, pw, split + " w");
  expect_binomial(c.r, n, pr, split + " r");
  expect_binomial(c.i, n, pi, split + " i");
  if (pi == 0.0) {
    EXPECT_EQ(c.i, 0) << split;
  }
  if (pw == 0.0) {
    EXPECT_EQ(c.w, 0) << split;
  }
  expect_binomial(c.ones, c.bits, 0.5, split + " bits after w/i");
}

TEST(FlipFlop, VocabularySplitsAndLength) {
  const auto task = make({});
  EXPECT_EQ(task->seq_len(), 512);
  EXPECT_EQ(task->vocab(), (std::vector<std::string>{"w", "r", "i", "0", "1"}));
  std::vector<std::string> names;
  for (const auto& s : task->splits()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"train", "val", "sparse", "dense"}));
  EXPECT_FALSE(task->splits()[0].eval);
  for (size_t s = 1; s < names.size(); ++s) EXPECT_TRUE(task->splits()[s].eval);
  EXPECT_FALSE(task->details().empty());
}

TEST(FlipFlop, ReplayEveryReadInEverySplit) {
  for (const int64_t length : {4, 8, 30, 512})
    for (const char* loss : {"reads", "all"}) {
      const auto task = make({{"length", std::to_string(length)}, {"loss", loss}});
      for (const char* split : {"train", "val", "sparse", "dense"}) {
        if (length == 4 && std::string(split) != "train") continue;  // 2 sequences: the eval partition may be empty
        for (uint64_t k = 0; k < 50; ++k) {
          SCOPED_TRACE(::testing::Message() << "length " << length << " loss " << loss << " split " << split
                                            << " index " << k);
          check_example(task->example(split, 3, k), length, std::string(loss) == "reads");
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
}

// The default is Liu et al.'s clean mode: labels only where the score mask is (the bit after each
// r). loss=all differs only in its labels: the same inputs and score mask for every (split, index).
TEST(FlipFlop, LossModesShareInputsAndScoreMask) {
  const auto by_default = make({{"length", "64"}});
  const auto reads = make({{"length", "64"}, {"loss", "reads"}});
  const auto all = make({{"length", "64"}, {"loss", "all"}});
  EXPECT_NE(by_default->details().find("loss=reads"), std::string::npos) << by_default->details();
  EXPECT_NE(all->details().find("loss=all"), std::string::npos) << all->details();
  int64_t labelled_reads = 0, labelled_all = 0, scored = 0;
  for (const char* split : {"train", "val", "sparse", "dense"})
    for (uint64_t k = 0; k < 40; ++k) {
      const sb::Example d = by_default->example(split, 5, k), r = reads->example(split, 5, k),
                        a = all->example(split, 5, k);
      ASSERT_EQ(d.input_ids, r.input_ids);
      ASSERT_EQ(d.labels, r.labels);
      ASSERT_EQ(d.score_mask, r.score_mask);
      ASSERT_EQ(a.input_ids, r.input_ids) << split << " " << k;
      ASSERT_EQ(a.score_mask, r.score_mask) << split << " " << k;
      for (int64_t t = 0; t < 64; ++t) {
        labelled_reads += r.labels[t] != sb::kIgnoreLabel;
        labelled_all += a.labels[t] != sb::kIgnoreLabel;
        scored += r.score_mask[t];
        // Where loss=reads labels a position, it is the label loss=all gives it.
        if (r.labels[t] != sb::kIgnoreLabel) ASSERT_EQ(r.labels[t], a.labels[t]);
        ASSERT_EQ(r.labels[t] != sb::kIgnoreLabel, r.score_mask[t] == 1) << "reads labels = score mask, t=" << t;
      }
    }
  EXPECT_EQ(labelled_reads, scored);
  EXPECT_EQ(labelled_all, 4 * 40 * 63);
  EXPECT_LT(labelled_reads, labelled_all / 2);
}

TEST(FlipFlop, DefaultMixFrequencies) {
  const auto task = make({});
  expect_mix(*task, "train", 0.1, 0.1, 0.8);
  expect_mix(*task, "val", 0.1, 0.1, 0.8);
  expect_mix(*task, "sparse", 0.01, 0.01, 0.98);
  expect_mix(*task, "dense", 0.45, 0.45, 0.1);
}

TEST(FlipFlop, ExplicitMixFrequencies) {
  {
    const auto task = make({{"p_ignore", "0.5"}});
    expect_mix(*task, "train", 0.25, 0.25, 0.5);
    expect_mix(*task, "sparse", 0.01, 0.01, 0.98);  // fixed mixes ignore the configured one
    expect_mix(*task, "dense", 0.45, 0.45, 0.1);
  }
  expect_mix(*make({{"p_write", "0.3"}, {"p_read", "0.2"}}), "train", 0.3, 0.2, 0.5);
  expect_mix(*make({{"p_write", "0.5"}, {"p_ignore", "0.25"}}), "train", 0.5, 0.25, 0.25);
  expect_mix(*make({{"p_read", "0.6"}, {"p_ignore", "0.1"}}), "val", 0.3, 0.6, 0.1);
  expect_mix(*make({{"p_write", "0.2"}, {"p_read", "0.3"}, {"p_ignore", "0.5"}}), "train", 0.2, 0.3, 0.5);
  expect_mix(*make({{"p_ignore", "0"}}), "train", 0.5, 0.5, 0.0);
  expect_mix(*make({{"p_write", "0"}, {"p_read", "0.5"}}), "train", 0.0, 0.5, 0.5);
}

TEST(FlipFlop, AllIgnoreKeepsOnlyFirstWriteAndLastRead) {
  const auto task = make({{"length", "64"}, {"p_ignore", "1"}});
  for (uint64_t k = 0; k < 20; ++k) {
    const sb::Example ex = task->example("train", 1, k);
    check_example(ex, 64);
    for (int64_t t = 2; t < 62; t += 2) ASSERT_EQ(ex.input_ids[t], kI);
    EXPECT_EQ(ex.input_ids[63], ex.input_ids[1]);
  }
}

TEST(FlipFlop, FirstWrittenBitIsBalanced) {
  const auto task = make({{"length", "16"}});
  int64_t ones = 0;
  const int n = 4000;
  for (int k = 0; k < n; ++k) ones += task->example("train", 11, static_cast<uint64_t>(k)).input_ids[1] == kOne;
  expect_binomial(ones, n, 0.5, "first bit");
}

TEST(FlipFlop, LengthErrors) {
  expect_error({{"length", "7"}}, {"length", "7", "even"});
  expect_error({{"length", "513"}}, {"length", "513"});
  expect_error({{"length", "2"}}, {"length", "2"});
  expect_error({{"length", "-8"}}, {"length", "-8"});
  expect_error({{"length", "lots"}}, {"length", "lots", "integer"});
  expect_error({{"length", "64.0"}}, {"length", "64.0"});
}

TEST(FlipFlop, ProbabilityErrors) {
  expect_error({{"p_ignore", "1.5"}}, {"p_ignore", "1.5"});
  expect_error({{"p_ignore", "-0.1"}}, {"p_ignore", "-0.1"});
  expect_error({{"p_ignore", "often"}}, {"p_ignore", "often"});
  expect_error({{"p_ignore", "nan"}}, {"p_ignore", "nan"});
  expect_error({{"p_write", "0.5"}}, {"p_write", "p_read"});
  expect_error({{"p_read", "0.5"}}, {"p_write", "p_read"});
  expect_error({{"p_write", "0.2"}, {"p_read", "0.2"}, {"p_ignore", "0.2"}}, {"sum to 1"});
  expect_error({{"p_write", "0.6"}, {"p_read", "0.6"}}, {"p_write", "sum to 1"});
  expect_error({{"p_write", "0.5"}, {"p_ignore", "0.7"}}, {"p_read", "sum to 1"});
  expect_error({{"p_write", "1.2"}, {"p_read", "0"}}, {"p_write", "1.2"});
  expect_error({{"p_write", "x"}, {"p_read", "0.5"}}, {"p_write", "'x'"});
  expect_error({{"p_writ", "0.5"}}, {"p_writ", "flipflop"});
}

TEST(FlipFlop, LossErrors) {
  expect_error({{"loss", "clean"}}, {"loss", "clean", "reads", "all"});
  expect_error({{"loss", ""}}, {"loss"});
  expect_error({{"loss", "READS"}}, {"loss", "READS"});
}

}  // namespace
