// test_word_problem.cpp: the word_problem task (tasks/word_problem.cpp). Labels are checked
// against an independent brute force that composes permutation arrays, (a*b)[i] = b[a[i]], for
// every configuration (prefix/final/identity, bos, inputs all/generators, short words); plus the
// identity sampler's class balance and its exact conditional distributions (enumerated words),
// vocabulary, determinism, uniformity of the element frequencies and parameter errors.
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

// ---- labels=identity ---------------------------------------------------------------------------

Settings identity_settings(const std::string& group, int64_t length, const std::string& inputs, bool bos = false) {
  return {{"group", group}, {"length", std::to_string(length)}, {"labels", "identity"}, {"inputs", inputs},
          {"bos", bos ? "true" : "false"}};
}

// Checks one labels=identity example against the brute force; returns whether its word is the
// identity. m: the letters that count (length, or short_length for a short word).
bool check_identity_example(const sb::Example& ex, const sb::PermGroup& g, const BruteForce& brute, bool bos,
                            const std::set<int32_t>& alphabet, int64_t m) {
  const int64_t offset = bos ? 1 : 0, length = static_cast<int64_t>(ex.input_ids.size()) - offset;
  const int32_t no = g.order() + (bos ? 1 : 0), yes = no + 1;
  if (bos) {
    EXPECT_EQ(ex.input_ids[0], g.order());
  }
  std::vector<int32_t> word(ex.input_ids.begin() + offset, ex.input_ids.begin() + offset + m);
  for (int64_t t = 0; t < length; ++t) EXPECT_TRUE(alphabet.count(ex.input_ids[offset + t])) << "t=" << t;
  const bool is_identity = brute.prefix_ids(word).back() == 0;
  for (int64_t t = 0; t < length + offset; ++t) {
    const bool last = t == offset + m - 1;
    EXPECT_EQ(ex.labels[t], last ? (is_identity ? yes : no) : sb::kIgnoreLabel) << "t=" << t;
    EXPECT_EQ(ex.score_mask[t], last ? 1 : 0) << "t=" << t;
  }
  return is_identity;
}

std::set<int32_t> alphabet_of(const sb::PermGroup& g, const std::string& inputs) {
  if (inputs == "generators") return {g.generators().begin(), g.generators().end()};
  std::set<int32_t> all;
  for (int32_t a = 0; a < g.order(); ++a) all.insert(a);
  return all;
}

// Every label recomputed by brute force, and the classes balanced: P(identity) = 1/2 within
// 5 binomial standard deviations over n examples (uniform words would give about 1/|G|).
TEST(WordProblem, IdentityLabelsMatchBruteForceAndAreBalanced) {
  struct Case {
    std::string group, inputs;
    int64_t length;
    bool bos;
  };
  for (const Case& c : {Case{group_file("a5_paper.yaml"), "generators", 16, false},
                        Case{group_file("a5_paper.yaml"), "generators", 64, true},
                        Case{group_file("s5_swaps.yaml"), "generators", 32, false},
                        Case{group_file("s5_swaps.yaml"), "generators", 128, true}, Case{"A5", "all", 32, false},
                        Case{"S5", "all", 2, true}, Case{"S7", "all", 24, false}, Case{"A4xZ5", "generators", 17, false},
                        Case{group_file("d4.yaml"), "generators", 10, false}}) {
    SCOPED_TRACE(c.group + " inputs=" + c.inputs + " length=" + std::to_string(c.length));
    const auto task = make(identity_settings(c.group, c.length, c.inputs, c.bos));
    const sb::PermGroup g = sb::PermGroup::parse(c.group);
    const BruteForce brute(g);
    const std::set<int32_t> alphabet = alphabet_of(g, c.inputs);
    ASSERT_EQ(task->vocab_size(), g.order() + (c.bos ? 1 : 0) + 2);
    EXPECT_EQ(task->vocab()[static_cast<size_t>(task->vocab_size() - 1)], "<identity>");
    EXPECT_EQ(task->vocab()[static_cast<size_t>(task->vocab_size() - 2)], "<not_identity>");
    const int n = 1500;
    int64_t identities = 0;
    for (const char* split : {"train", "val"})
      for (int i = 0; i < n / 2; ++i)
        identities += check_identity_example(task->example(split, 3, static_cast<uint64_t>(i)), g, brute, c.bos,
                                             alphabet, c.length);
    EXPECT_LE(std::fabs(identities - n / 2.0), 5 * std::sqrt(n / 4.0) + 1) << identities << " of " << n;
  }
}

TEST(WordProblem, IdentityFractionSetsTheClassBalance) {
  const std::string a5 = group_file("a5_paper.yaml");
  for (const double fraction : {0.0, 0.2, 0.9, 1.0}) {
    Settings s = identity_settings(a5, 20, "generators");
    s["identity_fraction"] = fmt::format("{}", fraction);
    const auto task = make(s);
    const sb::PermGroup g = sb::PermGroup::parse(a5);
    const BruteForce brute(g);
    const int n = 2000;
    int64_t identities = 0;
    for (int i = 0; i < n; ++i)
      identities += check_identity_example(task->example("train", 8, static_cast<uint64_t>(i)), g, brute, false,
                                           alphabet_of(g, "generators"), 20);
    EXPECT_LE(std::fabs(identities - n * fraction), 5 * std::sqrt(n * fraction * (1 - fraction)) + 1)
        << "identity_fraction " << fraction << ": " << identities << " of " << n;
  }
}

// All words of `length` letters over the alphabet (ids), in lexicographic order.
std::vector<std::vector<int32_t>> all_words(const std::vector<int32_t>& alphabet, int64_t length) {
  std::vector<std::vector<int32_t>> words{{}};
  for (int64_t t = 0; t < length; ++t) {
    std::vector<std::vector<int32_t>> longer;
    for (const auto& w : words)
      for (const int32_t a : alphabet) {
        longer.push_back(w);
        longer.back().push_back(a);
      }
    words = std::move(longer);
  }
  return words;
}

// The sampler is exact: within each class every word is equally likely. Enumerate all words,
// draw n examples with sample() (no split partition, which would restrict the support), and
// check every word's count against Binomial(n_class, 1 / |class|) within 6 standard deviations.
TEST(WordProblem, IdentityClassesAreUniformOverTheirWords) {
  struct Case {
    std::string group, inputs;
    int64_t length;
  };
  for (const Case& c : {Case{"S3", "generators", 6}, Case{"S3", "all", 3}, Case{group_file("d4.yaml"), "generators", 6},
                        Case{group_file("s5_swaps.yaml"), "generators", 4}, Case{group_file("a5_paper.yaml"), "generators", 4}}) {
    SCOPED_TRACE(c.group + " inputs=" + c.inputs + " length=" + std::to_string(c.length));
    const auto task = make(identity_settings(c.group, c.length, c.inputs));
    const sb::PermGroup g = sb::PermGroup::parse(c.group);
    const BruteForce brute(g);
    const std::set<int32_t> alphabet_set = alphabet_of(g, c.inputs);
    std::map<std::vector<int32_t>, bool> is_identity;
    for (const auto& w : all_words({alphabet_set.begin(), alphabet_set.end()}, c.length))
      is_identity[w] = brute.prefix_ids(w).back() == 0;
    int64_t class_size[2] = {0, 0};
    for (const auto& [w, e] : is_identity) ++class_size[e];
    ASSERT_GT(class_size[0], 0);
    ASSERT_GT(class_size[1], 0);
    const int n = 60000;
    std::map<std::vector<int32_t>, int64_t> seen;
    int64_t drawn[2] = {0, 0};
    const auto T = static_cast<size_t>(c.length);
    sb::Example ex{std::vector<int32_t>(T), std::vector<int32_t>(T), std::vector<uint8_t>(T)};
    for (int i = 0; i < n; ++i) {
      sb::Rng rng(77, static_cast<uint64_t>(i));
      task->sample(1, rng, ex.view());
      const bool e = ex.labels[T - 1] == g.order() + 1;
      ASSERT_EQ(is_identity.at(ex.input_ids), e) << "label disagrees with the brute force";
      ++seen[ex.input_ids];
      ++drawn[e];
    }
    for (const auto& [w, e] : is_identity) {
      const double p = 1.0 / static_cast<double>(class_size[e]), m = drawn[e] * p;
      EXPECT_LE(std::fabs(seen[w] - m), 6 * std::sqrt(m * (1 - p)) + 1)
          << (e ? "identity" : "non-identity") << " word seen " << seen[w] << " times, expected " << m;
    }
  }
}

// ---- short words (Merrill et al.'s length-2 data) -------------------------------------------------

TEST(WordProblem, ShortWordsOnlyInTrainWithBruteForceLabels) {
  for (const char* labels : {"prefix", "final", "identity"}) {
    SCOPED_TRACE(labels);
    const sb::PermGroup g = sb::PermGroup::parse("S3");
    const BruteForce brute(g);
    const auto task = make({{"group", "S3"}, {"length", "12"}, {"labels", labels}, {"short_fraction", "0.3"},
                            {"bos", "true"}});
    const int n = 4000;
    int64_t shorts = 0;
    std::set<std::vector<int32_t>> pairs;
    for (const char* split : {"train", "val", "test"})
      for (int i = 0; i < n; ++i) {
        const sb::Example ex = task->example(split, 5, static_cast<uint64_t>(i));
        ASSERT_EQ(ex.input_ids[0], g.order());
        // The letters that count: up to the last labelled position.
        int64_t last = -1;
        for (int64_t t = 0; t < 13; ++t)
          if (ex.labels[t] != sb::kIgnoreLabel) last = t;
        const int64_t m = last;  // position last holds letter number last (bos at 0)
        ASSERT_TRUE(m == 12 || m == 2) << "labelled up to letter " << m;
        const bool is_short = m == 2;
        if (is_short) {
          ASSERT_EQ(std::string(split), "train") << "short words only in train";
          ++shorts;
          pairs.insert({ex.input_ids[1], ex.input_ids[2]});
        }
        const std::vector<int32_t> word(ex.input_ids.begin() + 1, ex.input_ids.begin() + 1 + m);
        const std::vector<int32_t> prefix = brute.prefix_ids(word);
        for (int64_t t = 1; t < 13; ++t) {
          const int64_t k = t - 1;  // letter index
          const bool labelled = k < m && (std::string(labels) == "prefix" || k == m - 1);
          ASSERT_EQ(ex.score_mask[t], labelled ? 1 : 0) << "t=" << t;
          if (!labelled) {
            ASSERT_EQ(ex.labels[t], sb::kIgnoreLabel) << "t=" << t;
          } else if (std::string(labels) == "identity") {
            ASSERT_EQ(ex.labels[t], g.order() + 1 + (prefix.back() == 0 ? 1 : 0)) << "t=" << t;
          } else {
            ASSERT_EQ(ex.labels[t], prefix[static_cast<size_t>(k)]) << "t=" << t;
          }
        }
      }
    EXPECT_LE(std::fabs(shorts - 0.3 * n), 5 * std::sqrt(n * 0.3 * 0.7)) << shorts << " short of " << n;
    if (std::string(labels) != "identity") {
      EXPECT_EQ(pairs.size(), 36u) << "every length-2 word of S3 reaches training";
    } else {
      EXPECT_EQ(pairs.size(), 36u) << "balanced: 6 identity pairs, 30 others, all reached";
    }
  }
}

TEST(WordProblem, ShortWordsKeepTheTrainStreamOtherwise) {
  // short_fraction = 0 draws nothing extra: the stream is the one without the option.
  const auto plain = make({{"group", "A5"}, {"length", "20"}});
  const auto zero = make({{"group", "A5"}, {"length", "20"}, {"short_fraction", "0"}});
  const auto some = make({{"group", "A5"}, {"length", "20"}, {"short_fraction", "0.5"}});
  for (uint64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(plain->example("train", 2, i).input_ids, zero->example("train", 2, i).input_ids);
    EXPECT_EQ(plain->example("val", 2, i).labels, some->example("val", 2, i).labels) << "eval splits unchanged";
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

TEST(WordProblem, IdentityAndShortWordErrors) {
  const std::string swaps = group_file("s5_swaps.yaml");
  expect_param_error({{"labels", "identity"}, {"identity_fraction", "1.5"}}, "'identity_fraction'='1.5'");
  expect_param_error({{"labels", "identity"}, {"identity_fraction", "half"}}, "'identity_fraction'='half'");
  expect_param_error({{"identity_fraction", "0.3"}}, "'identity_fraction'");  // labels=prefix
  expect_param_error({{"labels", "final"}, {"identity_fraction", "0.5"}}, "labels=identity only");
  // Transpositions are odd: an odd number of them is never the identity.
  expect_param_error({{"group", swaps}, {"inputs", "generators"}, {"labels", "identity"}, {"length", "33"}},
                     "'length'='33'");
  EXPECT_NO_THROW(make({{"group", swaps}, {"inputs", "generators"}, {"labels", "identity"}, {"length", "33"},
                        {"identity_fraction", "0"}}));
  expect_param_error({{"group", swaps}, {"inputs", "generators"}, {"labels", "identity"}, {"length", "32"},
                      {"short_fraction", "0.1"}, {"short_length", "3"}},
                     "'short_length'='3'");
  expect_param_error({{"short_fraction", "-0.1"}}, "'short_fraction'='-0.1'");
  expect_param_error({{"short_fraction", "2"}}, "'short_fraction'='2'");
  expect_param_error({{"short_length", "3"}}, "short_fraction > 0");
  expect_param_error({{"short_fraction", "0.1"}, {"short_length", "64"}}, "shorter than length");
  expect_param_error({{"short_fraction", "0.1"}, {"short_length", "0"}}, "'short_length'='0'");
  expect_param_error({{"labels", "identity"}, {"group", "S1"}}, "S1");  // only the identity: no other class
}

}  // namespace
