// test_parity_automaton.cpp: brute-force validation of the parity and automaton tasks: labels are
// replayed from the inputs by independent code (bit counting, modular counting, permuting
// strings), input symbols are checked for uniformity, and every YAML error path is exercised.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tasks/registry.hpp"

namespace {

namespace fs = std::filesystem;
using sb::Task;
using Params = std::map<std::string, std::string>;

std::unique_ptr<Task> make(const std::string& name, const Params& params) {
  sb::TaskRegistry registry;
  sb::register_builtin_tasks(registry);
  return registry.create(name, params);
}

std::string example_automaton(const std::string& file) {
  return std::string(SB_SOURCE_DIR) + "/experiments/automata/" + file;
}

// A fresh directory for this test's YAML files.
fs::path temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(SB_TEST_TMP) / "parity_automaton" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string write_file(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

void expect_binomial(int64_t count, int64_t n, double p, const std::string& what) {
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::fabs(static_cast<double>(count) - mean), 5 * sd + 1e-9)
      << what << ": count " << count << " of " << n << ", expected p " << p;
}

// ---- parity -------------------------------------------------------------------------------------

TEST(Parity, PrefixLabelsReplay) {
  for (const int64_t length : {3, 17, 64, 200}) {
    const auto task = make("parity", {{"length", std::to_string(length)}});
    ASSERT_EQ(task->seq_len(), length);
    ASSERT_EQ(task->vocab(), (std::vector<std::string>{"0", "1"}));
    for (const char* split : {"train", "val", "test"}) {
      for (uint64_t k = 0; k < 100; ++k) {
        const sb::Example ex = task->example(split, 5, k);
        int ones = 0;
        for (int64_t t = 0; t < length; ++t) {
          ASSERT_TRUE(ex.input_ids[t] == 0 || ex.input_ids[t] == 1);
          ones += ex.input_ids[t];
          ASSERT_EQ(ex.labels[t], ones % 2) << "length " << length << " split " << split << " t " << t;
          ASSERT_EQ(ex.score_mask[t], 1);
        }
      }
    }
  }
}

TEST(Parity, FinalLabelOnly) {
  const auto task = make("parity", {{"length", "33"}, {"labels", "final"}});
  for (uint64_t k = 0; k < 200; ++k) {
    const sb::Example ex = task->example("test", 9, k);
    int ones = 0;
    for (int64_t t = 0; t < 33; ++t) {
      ones += ex.input_ids[t];
      if (t < 32) {
        ASSERT_EQ(ex.labels[t], sb::kIgnoreLabel);
        ASSERT_EQ(ex.score_mask[t], 0);
      }
    }
    ASSERT_EQ(ex.labels[32], ones % 2);
    ASSERT_EQ(ex.score_mask[32], 1);
  }
}

TEST(Parity, BosPrecedesTheBits) {
  for (const char* labels : {"prefix", "final"}) {
    const auto task = make("parity", {{"length", "20"}, {"bos", "true"}, {"labels", labels}});
    ASSERT_EQ(task->seq_len(), 21);
    ASSERT_EQ(task->vocab(), (std::vector<std::string>{"0", "1", "<bos>"}));
    for (uint64_t k = 0; k < 100; ++k) {
      const sb::Example ex = task->example("val", 2, k);
      ASSERT_EQ(ex.input_ids[0], 2);
      ASSERT_EQ(ex.labels[0], sb::kIgnoreLabel);
      ASSERT_EQ(ex.score_mask[0], 0);
      int ones = 0;
      for (int64_t t = 1; t <= 20; ++t) {
        ASSERT_TRUE(ex.input_ids[t] == 0 || ex.input_ids[t] == 1);
        ones += ex.input_ids[t];
        const bool labelled = std::string(labels) == "prefix" || t == 20;
        ASSERT_EQ(ex.labels[t], labelled ? ones % 2 : sb::kIgnoreLabel) << t;
        ASSERT_EQ(ex.score_mask[t], labelled ? 1 : 0);
      }
    }
  }
}

TEST(Parity, BitsAreUniformAndPositionsIndependent) {
  const auto task = make("parity", {{"length", "40"}});
  const int n = 2000;
  std::vector<int64_t> ones_at(40, 0);
  int64_t ones = 0, final_odd = 0;
  for (int k = 0; k < n; ++k) {
    const sb::Example ex = task->example("train", 2, static_cast<uint64_t>(k));
    for (int t = 0; t < 40; ++t) ones_at[t] += ex.input_ids[t];
    final_odd += ex.labels[39];
  }
  for (int t = 0; t < 40; ++t) {
    expect_binomial(ones_at[t], n, 0.5, "bit " + std::to_string(t));
    ones += ones_at[t];
  }
  expect_binomial(ones, int64_t{n} * 40, 0.5, "all bits");
  expect_binomial(final_odd, n, 0.5, "odd final parity");
}

TEST(Parity, ParameterErrors) {
  for (const auto& [params, fragment] : std::vector<std::pair<Params, std::string>>{
           {{{"length", "0"}}, "length"},
           {{{"length", "-3"}}, "-3"},
           {{{"length", "ten"}}, "ten"},
           {{{"labels", "suffix"}}, "suffix"},
           {{{"labels", ""}}, "labels"},
           {{{"size", "3"}}, "size"}}) {
    try {
      make("parity", params);
      ADD_FAILURE() << "no error for " << fragment;
    } catch (const sb::Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
}

// ---- automaton: example files, labels replayed by independent semantics -------------------------

// Returns the name of the state labelled at t, checking the label is a state token.
std::string state_name(const Task& task, int32_t label) {
  const auto vocab = task.vocab();
  EXPECT_GE(label, 0);
  EXPECT_LT(label, static_cast<int32_t>(vocab.size()));
  return vocab.at(static_cast<size_t>(label));
}

TEST(Automaton, Mod3CounterReplay) {
  const auto task = make("automaton", {{"file", example_automaton("mod3_counter.yaml")}, {"length", "50"}});
  ASSERT_EQ(task->vocab(), (std::vector<std::string>{"inc", "keep", "c0", "c1", "c2"}));
  for (const char* split : {"train", "val", "test"}) {
    for (uint64_t k = 0; k < 100; ++k) {
      const sb::Example ex = task->example(split, 1, k);
      int incs = 0;
      for (int64_t t = 0; t < 50; ++t) {
        ASSERT_TRUE(ex.input_ids[t] == 0 || ex.input_ids[t] == 1) << "input must be a symbol";
        incs += ex.input_ids[t] == 0;
        ASSERT_EQ(state_name(*task, ex.labels[t]), fmt::format("c{}", incs % 3));
        ASSERT_EQ(ex.score_mask[t], 1);
      }
    }
  }
}

TEST(Automaton, NonAbelianS3Replay) {
  const auto task = make("automaton", {{"file", example_automaton("s3_arrangements.yaml")}, {"length", "64"}});
  const auto vocab = task->vocab();
  ASSERT_EQ(vocab.size(), 8u);
  ASSERT_EQ(vocab[0], "swap");
  ASSERT_EQ(vocab[1], "rot");
  int64_t swaps = 0, total = 0;
  for (uint64_t k = 0; k < 300; ++k) {
    const sb::Example ex = task->example("train", 4, k);
    std::string slots = "abc";
    for (int64_t t = 0; t < 64; ++t) {
      if (ex.input_ids[t] == 0) {
        std::swap(slots[0], slots[1]);
        ++swaps;
      } else {
        ASSERT_EQ(ex.input_ids[t], 1);
        std::rotate(slots.begin(), slots.begin() + 1, slots.end());
      }
      ++total;
      ASSERT_EQ(state_name(*task, ex.labels[t]), slots) << "index " << k << " t " << t;
    }
  }
  expect_binomial(swaps, total, 0.5, "swap symbols");
}

TEST(Automaton, FinalLabelOnly) {
  const auto task = make("automaton", {{"file", example_automaton("mod3_counter.yaml")}, {"length", "20"},
                                       {"labels", "final"}});
  for (uint64_t k = 0; k < 100; ++k) {
    const sb::Example ex = task->example("val", 1, k);
    int incs = 0;
    for (int64_t t = 0; t < 20; ++t) {
      incs += ex.input_ids[t] == 0;
      if (t < 19) {
        ASSERT_EQ(ex.labels[t], sb::kIgnoreLabel);
        ASSERT_EQ(ex.score_mask[t], 0);
      }
    }
    ASSERT_EQ(state_name(*task, ex.labels[19]), fmt::format("c{}", incs % 3));
    ASSERT_EQ(ex.score_mask[19], 1);
  }
}

TEST(Automaton, ParityAutomatonMatchesBruteForceParity) {
  const auto dir = temp_dir();
  const std::string file = write_file(dir, "parity.yaml",
                                      "states: [even, odd]\n"
                                      "alphabet: ['0', '1']\n"
                                      "start: even\n"
                                      "transitions:\n"
                                      "  even: {'0': even, '1': odd}\n"
                                      "  odd:\n"
                                      "    '0': odd\n"
                                      "    '1': even\n");
  const auto task = make("automaton", {{"file", file}, {"length", "48"}});
  const auto parity = make("parity", {{"length", "48"}});
  ASSERT_EQ(task->vocab(), (std::vector<std::string>{"0", "1", "even", "odd"}));
  for (uint64_t k = 0; k < 300; ++k) {
    const sb::Example ex = task->example("train", 8, k);
    int ones = 0;
    for (int64_t t = 0; t < 48; ++t) {
      // Input ids coincide with the parity task's bits, label ids are offset by |alphabet| = 2.
      ones += ex.input_ids[t];
      ASSERT_EQ(ex.labels[t], 2 + ones % 2);
    }
  }
  // The shipped example file is the same automaton.
  const auto shipped = make("automaton", {{"file", example_automaton("parity.yaml")}, {"length", "48"}});
  for (uint64_t k = 0; k < 50; ++k) {
    const sb::Example a = task->example("test", 3, k), b = shipped->example("test", 3, k);
    EXPECT_EQ(a.input_ids, b.input_ids);
    EXPECT_EQ(a.labels, b.labels);
  }
  const auto vocab = task->vocab();
  EXPECT_EQ(parity->vocab(), std::vector<std::string>(vocab.begin(), vocab.begin() + 2));
}

TEST(Automaton, SymbolsAreUniform) {
  const auto dir = temp_dir();
  const std::string file = write_file(dir, "three.yaml",
                                      "states: [p, q]\nalphabet: [x, y, z]\nstart: q\n"
                                      "transitions:\n  p: {x: p, y: q, z: p}\n  q: {x: q, y: q, z: p}\n");
  const auto task = make("automaton", {{"file", file}, {"length", "30"}});
  std::vector<int64_t> counts(3, 0);
  int64_t total = 0;
  for (uint64_t k = 0; k < 1000; ++k) {
    const sb::Example ex = task->example("train", 0, k);
    std::string state = "q";
    for (int t = 0; t < 30; ++t) {
      const int32_t a = ex.input_ids[t];
      ASSERT_TRUE(a >= 0 && a < 3);
      ++counts[a];
      ++total;
      // Brute force from the literal table above.
      if (state == "p") state = a == 1 ? "q" : "p";
      else state = a == 2 ? "p" : "q";
      ASSERT_EQ(state_name(*task, ex.labels[t]), state);
    }
  }
  for (int a = 0; a < 3; ++a) expect_binomial(counts[a], total, 1.0 / 3, "symbol " + std::to_string(a));
}

TEST(Automaton, DetailsPrintTheTransitionTable) {
  const auto task = make("automaton", {{"file", example_automaton("mod3_counter.yaml")}});
  const std::string details = task->details();
  // Each state's row: the state, then its next state for inc and keep.
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(details);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    rows.push_back(w);
  }
  for (const auto& expected : std::vector<std::vector<std::string>>{
           {"inc", "keep"}, {"c0", "c1", "c0"}, {"c1", "c2", "c1"}, {"c2", "c0", "c2"}})
    EXPECT_NE(std::find(rows.begin(), rows.end(), expected), rows.end()) << details;
  EXPECT_NE(details.find("mod3_counter.yaml"), std::string::npos);
  EXPECT_NE(details.find("modulo 3"), std::string::npos) << "description missing";
}

// ---- automaton: YAML and parameter errors -------------------------------------------------------

struct BadFile {
  std::string label, yaml;
  std::vector<std::string> fragments;  // each must appear in the one-line message
};

const char* kGood =
    "states: [s0, s1]\nalphabet: [a, b]\nstart: s0\ntransitions:\n  s0: {a: s1, b: s0}\n  s1: {a: s0, b: s1}\n";

TEST(Automaton, GoodFileLoads) {
  const auto dir = temp_dir();
  const auto task = make("automaton", {{"file", write_file(dir, "good.yaml", kGood)}, {"length", "8"}});
  EXPECT_EQ(task->vocab_size(), 4);
}

TEST(Automaton, YamlErrorsNameFileAndKey) {
  const std::vector<BadFile> cases = {
      {"syntax", "states: [s0, s1\nalphabet: [a]\n", {"syntax"}},
      {"syntax_indent", "states: [s0]\n  alphabet: [a]\n bad: : :\n", {"syntax"}},
      {"empty", "", {"empty"}},
      {"not_a_map", "- s0\n- s1\n", {"mapping"}},
      {"unknown_key", std::string(kGood) + "colour: red\n", {"colour", "unknown key"}},
      {"missing_states", "alphabet: [a]\nstart: s0\ntransitions: {s0: {a: s0}}\n", {"states", "missing"}},
      {"missing_alphabet", "states: [s0]\nstart: s0\ntransitions: {s0: {a: s0}}\n", {"alphabet", "missing"}},
      {"missing_start", "states: [s0]\nalphabet: [a]\ntransitions: {s0: {a: s0}}\n", {"start", "missing"}},
      {"missing_transitions", "states: [s0]\nalphabet: [a]\nstart: s0\n", {"transitions", "missing"}},
      {"empty_states", "states: []\nalphabet: [a]\nstart: s0\ntransitions: {}\n", {"states", "empty"}},
      {"empty_alphabet", "states: [s0]\nalphabet: []\nstart: s0\ntransitions: {s0: {}}\n", {"alphabet", "empty"}},
      {"states_not_list", "states: s0\nalphabet: [a]\nstart: s0\ntransitions: {s0: {a: s0}}\n", {"states", "list"}},
      {"nested_name", "states: [[s0]]\nalphabet: [a]\nstart: s0\ntransitions: {s0: {a: s0}}\n", {"states[0]"}},
      {"duplicate_state", "states: [s0, s1, s0]\nalphabet: [a]\nstart: s0\ntransitions: {s0: {a: s0}, s1: {a: s0}}\n",
       {"states[2]", "duplicate", "s0"}},
      {"duplicate_symbol", "states: [s0]\nalphabet: [a, a]\nstart: s0\ntransitions: {s0: {a: s0}}\n",
       {"alphabet[1]", "duplicate"}},
      {"shared_name", "states: [s0, a]\nalphabet: [a]\nstart: s0\ntransitions: {s0: {a: s0}, a: {a: s0}}\n",
       {"alphabet[0]", "'a'", "state"}},
      {"unknown_start", "states: [s0]\nalphabet: [a]\nstart: s9\ntransitions: {s0: {a: s0}}\n", {"start", "s9"}},
      {"unknown_row_state", std::string(kGood) + "  s7: {a: s0, b: s0}\n", {"transitions.s7", "unknown state"}},
      {"unknown_symbol", "states: [s0]\nalphabet: [a]\nstart: s0\ntransitions:\n  s0: {a: s0, c: s0}\n",
       {"transitions.s0.c", "unknown symbol", "line 5"}},
      {"unknown_target", "states: [s0]\nalphabet: [a]\nstart: s0\ntransitions:\n  s0: {a: s5}\n",
       {"transitions.s0.a", "unknown state 's5'"}},
      {"missing_target", "states: [s0]\nalphabet: [a]\nstart: s0\ntransitions:\n  s0: {a: }\n", {"transitions.s0.a"}},
      {"missing_transition", "states: [s0, s1]\nalphabet: [a, b]\nstart: s0\ntransitions:\n  s0: {a: s1, b: s0}\n  s1: {a: s0}\n",
       {"transitions.s1.b", "missing transition"}},
      {"missing_row", "states: [s0, s1]\nalphabet: [a]\nstart: s0\ntransitions:\n  s0: {a: s1}\n",
       {"transitions.s1", "missing row"}},
      {"duplicate_row", "states: [s0]\nalphabet: [a]\nstart: s0\ntransitions:\n  s0: {a: s0}\n  s0: {a: s0}\n",
       {"transitions.s0", "duplicate"}},
      {"duplicate_cell", "states: [s0]\nalphabet: [a]\nstart: s0\ntransitions:\n  s0: {a: s0, a: s0}\n",
       {"transitions.s0.a", "duplicate"}},
      {"duplicate_top", std::string(kGood) + "start: s1\n", {"start", "duplicate"}},
      {"row_not_map", "states: [s0]\nalphabet: [a]\nstart: s0\ntransitions:\n  s0: [a, s0]\n", {"transitions.s0", "mapping"}},
  };
  const auto dir = temp_dir();
  for (const auto& c : cases) {
    const std::string file = write_file(dir, c.label + ".yaml", c.yaml);
    try {
      make("automaton", {{"file", file}});
      ADD_FAILURE() << c.label << ": no error";
    } catch (const sb::Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << c.label << ": " << msg;
      EXPECT_NE(msg.find(file), std::string::npos) << c.label << ": file not named in: " << msg;
      for (const auto& f : c.fragments) EXPECT_NE(msg.find(f), std::string::npos) << c.label << ": '" << f << "' not in: " << msg;
    }
  }
}

TEST(Automaton, FileAndParameterErrors) {
  const auto dir = temp_dir();
  const std::string good = write_file(dir, "good.yaml", kGood);
  const std::vector<std::pair<Params, std::vector<std::string>>> cases = {
      {{}, {"file", "required"}},
      {{{"file", (dir / "absent.yaml").string()}}, {"absent.yaml", "cannot read"}},
      {{{"file", dir.string()}}, {dir.string(), "cannot read"}},
      {{{"file", good}, {"length", "0"}}, {"length", "'0'"}},
      {{{"file", good}, {"length", "1e3"}}, {"length", "1e3"}},
      {{{"file", good}, {"labels", "all"}}, {"labels", "all", "prefix"}},
      {{{"file", good}, {"states", "3"}}, {"states", "automaton"}},
  };
  for (const auto& [params, fragments] : cases) {
    try {
      make("automaton", params);
      ADD_FAILURE() << "no error for " << fragments[0];
    } catch (const sb::Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }
}

}  // namespace
