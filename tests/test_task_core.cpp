// test_task_core.cpp: the task machinery every task relies on: sb::Rng against the Random123
// Philox4x32-10 known answers, Rng::below range and unbiasedness, deterministic example streams
// (across calls, instances and threads; built-in tasks and the options that draw variable amounts
// of randomness: flip-flop loss, mqrar varied layout, word_problem identity labels and short words),
// train/eval disjointness, and split, parameter and registry errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"
#include "statebench/rng.hpp"
#include "tasks/registry.hpp"

namespace {

using sb::Task;
using Params = std::map<std::string, std::string>;
using Block = std::array<uint32_t, 4>;

// Test-only Philox4x32-10 written from Salmon et al. (SC'11), independent of sb::Rng: checked
// against the published answers below, then used to check sb::Rng at counters it cannot reach fast.
Block reference_philox(Block ctr, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    const uint64_t prod0 = uint64_t{0xD2511F53u} * ctr[0];
    const uint64_t prod1 = uint64_t{0xCD9E8D57u} * ctr[2];
    ctr = {static_cast<uint32_t>(prod1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(prod1),
           static_cast<uint32_t>(prod0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(prod0)};
  }
  return ctr;
}

// Random123 kat_vectors for philox4x32_10: (counter, key, output).
struct Kat {
  Block ctr;
  std::array<uint32_t, 2> key;
  Block out;
};
const Kat kKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};

// sb::Rng's counter is (index_lo, index_hi, attempt, block) and its key (key_lo, key_hi).
sb::Rng rng_at(const Block& ctr, const std::array<uint32_t, 2>& key) {
  return sb::Rng((uint64_t{key[1]} << 32) | key[0], (uint64_t{ctr[1]} << 32) | ctr[0], ctr[2]);
}

TEST(Philox, ReferenceMatchesKnownAnswers) {
  for (const Kat& k : kKats) EXPECT_EQ(reference_philox(k.ctr, k.key), k.out);
}

TEST(Philox, RngMatchesKnownAnswerAtBlockZero) {
  sb::Rng rng = rng_at(kKats[0].ctr, kKats[0].key);
  const Block got = {rng.u32(), rng.u32(), rng.u32(), rng.u32()};
  EXPECT_EQ(got, kKats[0].out);
}

TEST(Philox, RngMatchesKnownAnswerAfterSkippingBlocks) {
  // The pi-digits vector has block word 0x03707344: draw (and drop) that many blocks first.
  const Kat& k = kKats[2];
  sb::Rng rng = rng_at(k.ctr, k.key);
  for (uint32_t b = 0; b < k.ctr[3]; ++b)
    for (int j = 0; j < 4; ++j) rng.u32();
  const Block got = {rng.u32(), rng.u32(), rng.u32(), rng.u32()};
  EXPECT_EQ(got, k.out);
}

TEST(Philox, RngMatchesReferenceOnEveryCounterWord) {
  const std::vector<uint64_t> keys = {0, 1, 0xffffffffffffffffull, 0x299f31d0a4093822ull, sb::stream_key(7, "parity", "val")};
  const std::vector<uint64_t> indices = {0, 1, 0xffffffffull, 0x100000000ull, 0xfedcba9876543210ull};
  for (const uint64_t key : keys)
    for (const uint64_t index : indices)
      for (const uint32_t attempt : {0u, 1u, 0xffffffffu}) {
        sb::Rng rng(key, index, attempt);
        for (uint32_t block = 0; block < 5; ++block) {
          const Block want = reference_philox(
              {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), attempt, block},
              {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
          const Block got = {rng.u32(), rng.u32(), rng.u32(), rng.u32()};
          ASSERT_EQ(got, want) << "key " << key << " index " << index << " attempt " << attempt << " block " << block;
        }
      }
}

TEST(Rng, U64AndUniformAreBuiltFromU32) {
  sb::Rng a(42, 3), b(42, 3);
  for (int i = 0; i < 100; ++i) {
    const uint64_t hi = b.u32();
    ASSERT_EQ(a.u64(), (hi << 32) | b.u32());
  }
  sb::Rng u(5, 5);
  double lo = 1, hi = 0, sum = 0;
  for (int i = 0; i < 20000; ++i) {
    const double x = u.uniform();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  EXPECT_LT(lo, 0.001);
  EXPECT_GT(hi, 0.999);
  EXPECT_NEAR(sum / 20000, 0.5, 5 * std::sqrt(1.0 / 12 / 20000));
}

TEST(Rng, BelowStaysInRange) {
  sb::Rng rng(1, 2);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(rng.below(1), 0u);
  for (const uint32_t n : {2u, 3u, 7u, 1000u, 0x80000001u, 0xC0000000u, 0xFFFFFFFFu}) {
    uint32_t max_seen = 0;
    for (int i = 0; i < 5000; ++i) {
      const uint32_t x = rng.below(n);
      ASSERT_LT(x, n);
      max_seen = std::max(max_seen, x);
    }
    EXPECT_GE(max_seen, n - n / 4 - 1) << "n " << n;  // the top quarter is reached
  }
}

// Every value's count within five binomial standard deviations of uniform.
void expect_uniform(const std::vector<int64_t>& counts, int64_t n, const std::string& what) {
  const double p = 1.0 / static_cast<double>(counts.size());
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  for (size_t v = 0; v < counts.size(); ++v)
    EXPECT_LE(std::fabs(static_cast<double>(counts[v]) - static_cast<double>(n) * p), 5 * sd)
        << what << ": value " << v << " drawn " << counts[v] << " of " << n;
}

TEST(Rng, BelowIsUniformForSmallRanges) {
  for (const uint32_t n : {2u, 3u, 5u, 6u, 7u, 10u, 17u}) {
    sb::Rng rng(n, 99);
    const int64_t draws = 60000;
    std::vector<int64_t> counts(n, 0);
    for (int64_t i = 0; i < draws; ++i) ++counts[rng.below(n)];
    expect_uniform(counts, draws, "below(" + std::to_string(n) + ")");
  }
}

TEST(Rng, BelowIsUnbiasedWhereNaiveMethodsAreNot) {
  // n = 3 * 2^30: plain modulo would return values below 2^30 half the time (not a third), and
  // multiply-shift without rejection would return multiples of 3 half the time.
  const uint32_t n = 0xC0000000u;
  sb::Rng rng(2024, 0);
  const int64_t draws = 60000;
  std::vector<int64_t> by_third(3, 0), by_residue(3, 0);
  for (int64_t i = 0; i < draws; ++i) {
    const uint32_t x = rng.below(n);
    ++by_third[x / 0x40000000u];
    ++by_residue[x % 3];
  }
  expect_uniform(by_third, draws, "thirds of [0, 3*2^30)");
  expect_uniform(by_residue, draws, "residues mod 3");
}

// ---- deterministic example streams --------------------------------------------------------------

std::unique_ptr<Task> make(const std::string& name, const Params& params) {
  sb::TaskRegistry registry;
  sb::register_builtin_tasks(registry);
  return registry.create(name, params);
}

// Tasks with the options whose sampling draws more (or variable amounts of) randomness: each must
// still be a pure function of (parameters, seed, split, index) and respect the split partition.
std::vector<std::unique_ptr<Task>> option_tasks() {
  const std::string groups = std::string(SB_SOURCE_DIR) + "/experiments/groups/";
  std::vector<std::unique_ptr<Task>> tasks;
  tasks.push_back(make("flipflop", {{"length", "64"}, {"loss", "all"}}));
  tasks.push_back(make("mqrar", {{"vocab", "128"}, {"length", "96"}, {"num_kv_pairs", "8"}, {"n_back", "2"},
                                 {"random_non_queries", "true"}}));  // layout varied
  tasks.push_back(make("word_problem", {{"group", groups + "a5_paper.yaml"}, {"inputs", "generators"},
                                        {"labels", "identity"}, {"length", "24"}, {"short_fraction", "0.25"}}));
  tasks.push_back(make("word_problem", {{"group", "S3"}, {"labels", "prefix"}, {"length", "6"}, {"short_fraction", "0.5"}}));
  return tasks;
}

std::vector<std::unique_ptr<Task>> sample_tasks() {
  std::vector<std::unique_ptr<Task>> tasks;
  tasks.push_back(make("flipflop", {{"length", "64"}}));
  tasks.push_back(make("parity", {{"length", "32"}}));
  tasks.push_back(make("automaton", {{"file", std::string(SB_SOURCE_DIR) + "/experiments/automata/s3_arrangements.yaml"},
                                     {"length", "40"}}));
  for (auto& t : option_tasks()) tasks.push_back(std::move(t));
  return tasks;
}

struct Batch {
  std::vector<int32_t> inputs, labels;
  std::vector<uint8_t> mask;
  bool operator==(const Batch&) const = default;
};

Batch empty_batch(const Task& task, int64_t count) {
  const auto n = static_cast<size_t>(count * task.seq_len());
  return {std::vector<int32_t>(n), std::vector<int32_t>(n), std::vector<uint8_t>(n)};
}

// Examples [0, count) of `split`, generated by `threads` threads: thread j makes indices
// j, j + threads, ... from the highest down, so the order differs from a sequential run.
Batch generate(const Task& task, int split, uint64_t seed, int64_t count, int threads) {
  Batch b = empty_batch(task, count);
  const int64_t T = task.seq_len();
  auto work = [&](int j) {
    std::vector<int64_t> mine;
    for (int64_t i = j; i < count; i += threads) mine.push_back(i);
    std::reverse(mine.begin(), mine.end());
    for (const int64_t i : mine)
      task.example(split, seed, static_cast<uint64_t>(i), {&b.inputs[i * T], &b.labels[i * T], &b.mask[i * T]});
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < threads; ++j) pool.emplace_back(work, j);
  for (auto& t : pool) t.join();
  return b;
}

TEST(Determinism, SameBytesAcrossCallsInstancesAndThreads) {
  const auto tasks = sample_tasks();
  const auto again = sample_tasks();  // fresh instances from the same parameters
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& task = *tasks[k];
    for (int split = 0; split < static_cast<int>(task.splits().size()); ++split) {
      SCOPED_TRACE(task.name() + " split " + task.splits()[split].name);
      const int64_t count = 300;
      const Batch one = generate(task, split, 17, count, 1);
      EXPECT_EQ(one, generate(task, split, 17, count, 1));
      EXPECT_EQ(one, generate(task, split, 17, count, 4));
      EXPECT_EQ(one, generate(*again[k], split, 17, count, 4));
      Batch filled = empty_batch(task, count);
      sb::fill_examples(task, split, 17, 0, count, filled.inputs.data(), filled.labels.data(), filled.mask.data());
      EXPECT_EQ(one, filled);
      // A window that starts mid-stream gives the same examples as the full stream.
      const int64_t T = task.seq_len();
      Batch window = empty_batch(task, 10);
      sb::fill_examples(task, split, 17, 100, 10, window.inputs.data(), window.labels.data(), window.mask.data());
      EXPECT_TRUE(std::equal(window.inputs.begin(), window.inputs.end(), one.inputs.begin() + 100 * T));
      const sb::Example ex = task.example(task.splits()[split].name, 17, 123);
      EXPECT_TRUE(std::equal(ex.input_ids.begin(), ex.input_ids.end(), one.inputs.begin() + 123 * T));
      EXPECT_TRUE(std::equal(ex.labels.begin(), ex.labels.end(), one.labels.begin() + 123 * T));
      EXPECT_TRUE(std::equal(ex.score_mask.begin(), ex.score_mask.end(), one.mask.begin() + 123 * T));
    }
  }
}

TEST(Determinism, SeedsSplitsAndIndicesGiveDifferentExamples) {
  const auto task = make("parity", {{"length", "64"}});
  std::set<std::vector<int32_t>> seen;
  int64_t made = 0;
  for (const uint64_t seed : {0ull, 1ull, 2ull, 0xffffffffffffffffull})
    for (const char* split : {"train", "val", "test"})
      for (uint64_t index : {0ull, 1ull, 2ull, 1000ull, 0x100000000ull}) {
        seen.insert(task->example(split, seed, index).input_ids);
        ++made;
      }
  // 64 random bits each: any repeat means two streams or indices coincide.
  EXPECT_EQ(static_cast<int64_t>(seen.size()), made);
}

// ---- train / evaluation disjointness ------------------------------------------------------------

TEST(Disjointness, SmallParitySpaceNeverSharesSequences) {
  const auto task = make("parity", {{"length", "10"}, {"labels", "final"}});
  auto code = [](const std::vector<int32_t>& x) {
    int c = 0;
    for (const int32_t b : x) c = 2 * c + b;
    return c;
  };
  std::set<int> train, eval;
  for (const char* split : {"train", "val", "test"}) {
    const bool is_eval = std::string(split) != "train";
    for (uint64_t i = 0; i < 3000; ++i) {
      const auto ex = task->example(split, 4, i);
      EXPECT_EQ(sb::in_eval_partition(ex.input_ids.data(), 10), is_eval);
      (is_eval ? eval : train).insert(code(ex.input_ids));
    }
  }
  for (const int c : train) ASSERT_EQ(eval.count(c), 0u) << "sequence " << c << " in train and eval";
  // The partition is a real split of the space: enumerate it and check the samples cover it.
  int eval_size = 0;
  for (int c = 0; c < 1024; ++c) {
    int32_t x[10];
    for (int t = 0; t < 10; ++t) x[t] = (c >> (9 - t)) & 1;
    eval_size += sb::in_eval_partition(x, 10);
  }
  EXPECT_GT(eval_size, 1024 / 4 - 5 * 14);  // binomial(1024, 1/4): sd about 14
  EXPECT_LT(eval_size, 1024 / 4 + 5 * 14);
  EXPECT_EQ(static_cast<int>(eval.size()), eval_size) << "6000 eval draws should reach every eval sequence";
  EXPECT_GT(static_cast<int>(train.size()), (1024 - eval_size) * 9 / 10);
}

TEST(Disjointness, FlipFlopSplitsNeverShareSequences) {
  const auto task = make("flipflop", {{"length", "8"}});  // 72 distinct sequences
  std::set<std::vector<int32_t>> train, eval;
  for (const auto& spec : task->splits())
    for (uint64_t i = 0; i < 500; ++i) (spec.eval ? eval : train).insert(task->example(spec.name, 1, i).input_ids);
  for (const auto& x : train) ASSERT_EQ(eval.count(x), 0u);
  EXPECT_GT(train.size(), 20u);
  EXPECT_GT(eval.size(), 5u);
}

TEST(Disjointness, TaskOptionsKeepSplitsDisjoint) {
  for (const auto& task : option_tasks()) {
    SCOPED_TRACE(task->name());
    const int64_t T = task->seq_len();
    std::set<std::vector<int32_t>> train, eval;
    for (const auto& spec : task->splits())
      for (uint64_t i = 0; i < 400; ++i) {
        const sb::Example ex = task->example(spec.name, 6, i);
        ASSERT_EQ(sb::in_eval_partition(ex.input_ids.data(), T), spec.eval) << spec.name << " #" << i;
        (spec.eval ? eval : train).insert(ex.input_ids);
      }
    for (const auto& x : train) ASSERT_EQ(eval.count(x), 0u);
    EXPECT_GT(eval.size(), 20u);
  }
}

TEST(Disjointness, TooSmallSpaceIsAnErrorNotALoop) {
  // Two sequences of length 1: at least one of train / val has no sequence in its partition
  // unless the two bits fall on different sides, in which case both splits work.
  const auto task = make("parity", {{"length", "1"}});
  const bool zero_eval = [] { const int32_t x = 0; return sb::in_eval_partition(&x, 1); }();
  const bool one_eval = [] { const int32_t x = 1; return sb::in_eval_partition(&x, 1); }();
  for (const char* split : {"train", "val"}) {
    const bool is_eval = std::string(split) == "val";
    const bool possible = zero_eval == is_eval || one_eval == is_eval;
    if (possible) {
      const auto ex = task->example(split, 0, 0);
      EXPECT_EQ(sb::in_eval_partition(ex.input_ids.data(), 1), is_eval);
    } else {
      try {
        task->example(split, 0, 0);
        ADD_FAILURE() << "no error for split " << split;
      } catch (const sb::Error& e) {
        EXPECT_NE(std::string(e.what()).find(split), std::string::npos) << e.what();
      }
    }
  }
}

// ---- errors -------------------------------------------------------------------------------------

// Runs f, which must throw sb::Error with a one-line message containing every fragment.
template <class F>
void expect_error(F f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << fragments.at(0);
  } catch (const sb::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& s : fragments) EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' not in: " << msg;
  }
}

TEST(Errors, UnknownSplit) {
  const auto task = make("parity", {});
  EXPECT_EQ(task->split_index("val"), 1);
  expect_error([&] { task->split_index("training"); }, {"training", "parity", "train, val, test"});
  expect_error([&] { task->example("holdout", 0, 0); }, {"holdout", "parity"});
  std::vector<int32_t> x(64), y(64);
  std::vector<uint8_t> m(64);
  expect_error([&] { task->example(3, 0, 0, {x.data(), y.data(), m.data()}); }, {"3", "parity"});
  expect_error([&] { task->example(-1, 0, 0, {x.data(), y.data(), m.data()}); }, {"-1"});
}

TEST(Errors, TaskParameters) {
  expect_error([] { make("parity", {{"lenght", "5"}}); }, {"lenght", "task 'parity'", "length"});
  expect_error([] { make("parity", {{"length", "5x"}}); }, {"length", "5x", "integer"});
  expect_error([] { make("parity", {{"length", ""}}); }, {"length", "integer"});
  expect_error([] { make("parity", {{"length", "99999999999999999999"}}); }, {"length", "99999999999999999999"});
  expect_error([] { make("parity", {{"length", "0"}}); }, {"length", "'0'", "[1,"});
  expect_error([] { make("flipflop", {{"p_ignore", "inf"}}); }, {"p_ignore", "inf"});
}

TEST(Errors, ParamsParsingAndTypedReads) {
  using sb::Params;
  EXPECT_EQ(Params::parse_assignments({"a=1", "b=x=y", "c="}),
            (std::map<std::string, std::string>{{"a", "1"}, {"b", "x=y"}, {"c", ""}}));
  expect_error([] { Params::parse_assignments({"length"}); }, {"length", "key=value"});
  expect_error([] { Params::parse_assignments({"=3"}); }, {"=3"});
  expect_error([] { Params::parse_assignments({"a=1", "a=2"}); }, {"'a'", "twice"});

  const std::vector<sb::ParamSpec> spec = {{"n", "4", ""}, {"x", "0.5", ""}, {"on", "yes", ""}, {"mode", "fast", ""},
                                           {"opt", "", ""}};
  const Params p("widget 'w'", spec, {{"n", "12"}});
  EXPECT_EQ(p.integer("n", 0, 100), 12);
  EXPECT_DOUBLE_EQ(p.real("x", 0, 1), 0.5);
  EXPECT_TRUE(p.flag("on"));
  EXPECT_EQ(p.choice("mode", {"fast", "slow"}), "fast");
  EXPECT_TRUE(p.given("n"));
  EXPECT_FALSE(p.given("x"));
  EXPECT_FALSE(p.has_value("opt"));
  EXPECT_EQ(p.canonical(), "mode=fast,n=12,on=yes,x=0.5");
  expect_error([&] { p.integer("n", 0, 10); }, {"'n'", "12", "widget 'w'", "[0, 10]"});
  expect_error([&] { p.choice("mode", {"slow", "slower"}); }, {"mode", "fast", "slow, slower"});
  expect_error([&] { p.str("undeclared"); }, {"undeclared"});
  const Params q("widget 'w'", spec, {{"x", "1e999"}, {"on", "maybe"}, {"n", "0x10"}});
  expect_error([&] { q.real("x"); }, {"'x'", "1e999"});
  expect_error([&] { q.flag("on"); }, {"'on'", "maybe"});
  expect_error([&] { q.integer("n"); }, {"'n'", "0x10"});
  expect_error([&] { Params("widget 'w'", spec, {{"size", "1"}}); }, {"size", "widget 'w'", "n, x, on, mode, opt"});
}

TEST(Errors, Registry) {
  sb::TaskRegistry registry;
  sb::register_builtin_tasks(registry);
  std::vector<std::string> names;
  for (const auto* info : registry.list()) names.push_back(info->name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* n : {"automaton", "flipflop", "parity"}) {
    EXPECT_TRUE(registry.contains(n)) << n;
    EXPECT_FALSE(registry.get(n).summary.empty()) << n;
  }
  expect_error([&] { registry.get("parrot"); }, {"parrot", "automaton", "flipflop", "parity"});
  expect_error([&] { registry.create("flip-flop", {}); }, {"flip-flop", "known"});

  auto factory = [](const sb::Params&) { return make("parity", {}); };
  expect_error([&] { registry.add({"parity", "again", {}, factory, "plugin x.so"}); }, {"parity", "already registered", "x.so"});
  expect_error([&] { registry.add({"", "nameless", {}, factory}); }, {"empty name"});
  expect_error([&] { registry.add({"orphan", "no factory", {}, nullptr}); }, {"orphan", "factory"});
  EXPECT_FALSE(registry.contains("orphan"));
  registry.add({"twin", "a second parity", {}, factory, "test"});
  EXPECT_TRUE(registry.contains("twin"));
  expect_error([&] { sb::register_builtin_tasks(registry); }, {"already registered"});
}

}  // namespace
