// test_word_problem.cpp: the word_problem task (tasks/word_problem.cpp). Labels are checked
// against an independent brute force that composes permutation arrays, (a*b)[i] = b[a[i]], for
// every configuration (prefix/final, bos, inputs all/generators); plus vocabulary, determinism,
// uniformity of the element frequencies and parameter errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/error.hpp"
#include "tasks/perm_group.hpp"
#include "tasks/registry.hpp"

namespace {

using Settings = std::map<std::string, std::string>;

std::unique_ptr<sb::Task> make(const Settings& settings) {
  sb::TaskRegistry registry;
  sb::register_builtin_tasks(registry);
  return registry.create("word_problem", settings);
}

std::string group_file(const std::string& name) {
  return std::string(SB_SOURCE_DIR) + "/experiments/groups/" + name;
}

// Brute force over explicit permutation arrays: element id -> permutation, and back.
struct BruteForce {
  std::vector<std::vector<int>> perms;
  std::map<std::vector<int>, int32_t> ids;
  explicit BruteForce(const sb::PermGroup& g) {
    for (int32_t a = 0; a < g.order(); ++a) {
      perms.push_back(g.permutation(a));
      ids[perms.back()] = a;
    }
  }
  // Prefix products of the word: state after applying x_1, then x_2, ... (state[i] = image of i).
  std::vector<int32_t> prefix_ids(const std::vector<int32_t>& word) const {
    std::vector<int> state(perms[0].size());
    for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<int>(i);
    std::vector<int32_t> out;
    for (int32_t x : word) {
      std::vector<int> next(state.size());
      for (size_t i = 0; i < state.size(); ++i) next[i] = perms.at(x)[state[i]];
      state = next;
      out.push_back(ids.at(state));
    }
    return out;
  }
};

void check_examples(const std::string& group, const std::string& labels, bool bos, const std::string& inputs,
                    int64_t length = 37) {
  SCOPED_TRACE(group + " labels=" + labels + " bos=" + (bos ? "true" : "false") + " inputs=" + inputs +
               " length=" + std::to_string(length));
  const auto task = make({{"group", group}, {"length", std::to_string(length)}, {"labels", labels},
                          {"bos", bos ? "true" : "false"}, {"inputs", inputs}});
  const sb::PermGroup g = sb::PermGroup::parse(group);
  const BruteForce brute(g);
  const std::set<int32_t> gens(g.generators().begin(), g.generators().end());
  const int64_t T = length + (bos ? 1 : 0);
  ASSERT_EQ(task->seq_len(), T);
  ASSERT_EQ(task->vocab_size(), g.order() + (bos ? 1 : 0));
  for (const char* split : {"train", "val"})
    for (uint64_t index = 0; index < 40; ++index) {
      const sb::Example ex = task->example(split, 7, index);
      const int64_t offset = bos ? 1 : 0;
      if (bos) {
        ASSERT_EQ(ex.input_ids[0], g.order());
        ASSERT_EQ(ex.labels[0], sb::kIgnoreLabel);
        ASSERT_EQ(ex.score_mask[0], 0);
      }
      std::vector<int32_t> word(ex.input_ids.begin() + offset, ex.input_ids.end());
      for (int32_t x : word) {
        ASSERT_GE(x, 0);
        ASSERT_LT(x, g.order());
        if (inputs == "generators") {
          ASSERT_TRUE(gens.count(x)) << "input " << g.name(x) << " is not a generator";
        }
      }
      const std::vector<int32_t> expected = brute.prefix_ids(word);
      for (int64_t t = 0; t < length; ++t) {
        const bool labelled = labels == "prefix" || t == length - 1;
        ASSERT_EQ(ex.labels[offset + t], labelled ? expected[t] : sb::kIgnoreLabel) << "t=" << t;
        ASSERT_EQ(ex.score_mask[offset + t], labelled ? 1 : 0) << "t=" << t;
      }
    }
}

TEST(WordProblem, LabelsMatchBruteForce) {
  for (const std::string group : {"S5", "A5", "A4xZ5", "Z60", "S3xZ2"})
    for (const char* labels : {"prefix", "final"})
      for (bool bos : {false, true})
        for (const char* inputs : {"all", "generators"})
          if (group != "Z60" || std::string(inputs) == "all") check_examples(group, labels, bos, inputs);
  // Groups above 512 elements take the interleaved-chunk path: lengths around the 8 chunks.
  check_examples("S7", "prefix", false, "all");  // the largest allowed group (5040 elements)
  check_examples("S7", "final", true, "generators");
  for (int64_t length : {1, 3, 8, 9, 64}) check_examples("S6xZ2", "prefix", false, "all", length);
  check_examples("S5", "prefix", true, "all", 1);
  for (const char* file : {"d4.yaml", "s5_gens.yaml", "two_rings.yaml"}) {
    check_examples(group_file(file), "prefix", true, "all");
    check_examples(group_file(file), "final", false, "generators");
  }
}

TEST(WordProblem, VocabularyAndDefaults) {
  const auto task = make({});
  EXPECT_EQ(task->name(), "word_problem");
  EXPECT_EQ(task->seq_len(), 64);
  const auto vocab = task->vocab();
  ASSERT_EQ(vocab.size(), 120u);
  EXPECT_EQ(vocab[0], "e");
  EXPECT_EQ(vocab, sb::PermGroup::parse("S5").names());
  const auto with_bos = make({{"group", "A4xZ5"}, {"bos", "true"}, {"length", "10"}});
  EXPECT_EQ(with_bos->seq_len(), 11);
  EXPECT_EQ(with_bos->vocab().back(), "<bos>");
  EXPECT_EQ(with_bos->vocab()[1], "e,r1");
  const std::string details = make({{"group", "S5"}})->details();
  EXPECT_NE(details.find("(a*b)[i] = b[a[i]]"), std::string::npos);
  EXPECT_NE(details.find("order 120"), std::string::npos);
  EXPECT_NE(details.find("(0 1 2)(3 4)"), std::string::npos);
  EXPECT_NE(details.find("[1, 2, 0, 4, 3]"), std::string::npos);
}

TEST(WordProblem, Deterministic) {
  const auto task = make({{"group", "A5"}, {"length", "64"}});
  for (uint64_t index : {0u, 5u, 1000u}) {
    const sb::Example a = task->example("train", 3, index), b = task->example("train", 3, index);
    EXPECT_EQ(a.input_ids, b.input_ids);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_NE(a.input_ids, task->example("train", 4, index).input_ids);
    EXPECT_NE(a.input_ids, task->example("test", 3, index).input_ids);
  }
}

// Each count is Binomial(n, p); allow 6 standard deviations (false alarm ~1e-9 per count).
void expect_uniform(const std::vector<int64_t>& counts, const std::vector<int32_t>& support, int64_t n,
                    const std::string& what) {
  const double p = 1.0 / static_cast<double>(support.size());
  const double mean = n * p, sd = std::sqrt(n * p * (1 - p));
  int64_t inside = 0;
  for (int32_t s : support) {
    EXPECT_LE(std::fabs(counts[s] - mean), 6 * sd) << what << ": element " << s << " seen " << counts[s]
                                                   << " times, expected " << mean;
    inside += counts[s];
  }
  EXPECT_EQ(inside, n) << what << ": mass outside the support";
}

TEST(WordProblem, ElementFrequenciesUniform) {
  const sb::PermGroup s5 = sb::PermGroup::parse("S5");
  std::vector<int32_t> all(120);
  for (int32_t a = 0; a < 120; ++a) all[a] = a;
  {
    const auto task = make({{"group", "S5"}, {"length", "512"}});
    std::vector<int64_t> inputs(120, 0), labels(120, 0);
    int64_t n = 0;
    for (uint64_t index = 0; index < 200; ++index) {
      const sb::Example ex = task->example("train", 11, index);
      for (int64_t t = 0; t < 512; ++t) ++inputs[ex.input_ids[t]], ++labels[ex.labels[t]], ++n;
    }
    expect_uniform(inputs, all, n, "inputs");
    expect_uniform(labels, all, n, "prefix labels");
  }
  {
    const auto task = make({{"group", "S5"}, {"length", "512"}, {"inputs", "generators"}});
    std::vector<int64_t> inputs(120, 0);
    int64_t n = 0;
    for (uint64_t index = 0; index < 50; ++index) {
      const sb::Example ex = task->example("val", 11, index);
      for (int64_t t = 0; t < 512; ++t) ++inputs[ex.input_ids[t]], ++n;
    }
    EXPECT_EQ(s5.generators().size(), 2u);
    expect_uniform(inputs, s5.generators(), n, "generator inputs");
  }
}

void expect_param_error(const Settings& settings, const std::string& mention) {
  try {
    make(settings);
    ADD_FAILURE() << "no error, expected one mentioning " << mention;
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(WordProblem, ParameterErrors) {
  expect_param_error({{"group", "Q8"}}, "Q8");
  expect_param_error({{"group", "S9"}}, "S9");
  expect_param_error({{"group", ""}}, "empty group spec");
  expect_param_error({{"group", "no/such/file.yaml"}}, "no/such/file.yaml");
  expect_param_error({{"length", "0"}}, "length");
  expect_param_error({{"labels", "suffix"}}, "suffix");
  expect_param_error({{"inputs", "some"}}, "some");
  expect_param_error({{"bos", "maybe"}}, "maybe");
  expect_param_error({{"colour", "red"}}, "colour");
  expect_param_error({{"group", "Z60"}, {"inputs", "generators"}}, "single generator");
}

}  // namespace
