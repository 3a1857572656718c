// test_plugins.cpp: task plugins through the real dlopen path. The example plugin's examples are
// checked against a brute-force running sum; splits stay deterministic and disjoint; plugins load
// from STATEBENCH_PLUGIN_PATH; each loader error path (C fixtures in tests/plugin_fixtures) gives
// a one-line message naming the file (and `statebench train` on invalid examples writes nothing);
// plugin.hpp's helpers are checked in-process.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "cli_run.hpp"
#include "core/error.hpp"
#include "scoped_env.hpp"
#include "statebench/plugin.hpp"
#include "tasks/plugin_loader.hpp"

namespace sb {
namespace {

namespace fs = std::filesystem;
using test::ScopedEnv;

const std::string kExample = SB_EXAMPLE_PLUGIN;

std::string absolute(const std::string& path) { return fs::absolute(path).lexically_normal().string(); }

// The sb::Error message `fn` throws; fails the test when it throws nothing.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an sb::Error";
  return {};
}

TaskRegistry registry_with_builtins() {
  TaskRegistry registry;
  register_builtin_tasks(registry);
  return registry;
}

TaskRegistry registry_with_example() {
  TaskRegistry registry = registry_with_builtins();
  load_plugin(registry, kExample);
  return registry;
}

// A fresh directory under the test temp dir.
fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::path(SB_TEST_TMP) / "plugins" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(ExamplePlugin, RegistersItsTaskNextToTheBuiltins) {
  const TaskRegistry registry = registry_with_example();
  ASSERT_TRUE(registry.contains("modular_counter"));
  EXPECT_TRUE(registry.contains("flipflop"));
  const TaskInfo& info = registry.get("modular_counter");
  EXPECT_EQ(info.origin, absolute(kExample));
  EXPECT_FALSE(info.summary.empty());
  ASSERT_EQ(info.params.size(), 3u);
  EXPECT_EQ(info.params[0].name, "modulus");
  EXPECT_EQ(info.params[0].default_value, "5");
  EXPECT_EQ(info.params[1].name, "length");
  EXPECT_EQ(info.params[2].name, "labels");
  EXPECT_EQ(info.params[2].default_value, "all");
}

TEST(ExamplePlugin, ShapeFollowsItsParameters) {
  const auto task = registry_with_example().create("modular_counter", {{"modulus", "7"}, {"length", "20"}});
  EXPECT_EQ(task->name(), "modular_counter");
  EXPECT_EQ(task->seq_len(), 20);
  EXPECT_EQ(task->vocab(), (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6"}));
  const auto splits = task->splits();
  ASSERT_EQ(splits.size(), 4u);
  EXPECT_EQ(splits[0].name, "train");
  EXPECT_FALSE(splits[0].eval);
  EXPECT_EQ(splits[3].name, "sparse");
  EXPECT_TRUE(splits[3].eval);
  EXPECT_NE(task->details().find("mod 7"), std::string::npos) << task->details();
}

TEST(ExamplePlugin, LabelsAreTheBruteForceRunningSum) {
  const int m = 5, T = 40;
  const auto task = registry_with_example().create("modular_counter", {{"length", std::to_string(T)}});
  for (const std::string split : {"train", "val", "test", "sparse"}) {
    int64_t zeros = 0, tokens = 0;
    for (uint64_t i = 0; i < 100; ++i) {
      const Example ex = task->example(split, 11, i);
      std::vector<int> count(m, 0);  // how often each digit occurred so far
      for (int t = 0; t < T; ++t) {
        ASSERT_GE(ex.input_ids[t], 0);
        ASSERT_LT(ex.input_ids[t], m);
        ++count[ex.input_ids[t]];
        int64_t sum = 0;
        for (int d = 0; d < m; ++d) sum += int64_t{d} * count[d];
        ASSERT_EQ(ex.labels[t], sum % m) << split << " example " << i << " position " << t;
        ASSERT_EQ(ex.score_mask[t], 1);
        zeros += ex.input_ids[t] == 0;
        ++tokens;
      }
    }
    const double zero_rate = static_cast<double>(zeros) / static_cast<double>(tokens);
    if (split == "sparse") EXPECT_GT(zero_rate, 0.85) << "the split index must reach the plugin";
    else EXPECT_LT(zero_rate, 0.3) << split;
  }
}

TEST(ExamplePlugin, FinalLabelsOnlyLabelTheLastPosition) {
  const auto task = registry_with_example().create("modular_counter", {{"labels", "final"}, {"length", "9"}});
  const Example ex = task->example("train", 3, 4);
  int sum = 0;
  for (int t = 0; t < 9; ++t) sum += ex.input_ids[t];
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(ex.labels[t], kIgnoreLabel);
    EXPECT_EQ(ex.score_mask[t], 0);
  }
  EXPECT_EQ(ex.labels[8], sum % 5);
  EXPECT_EQ(ex.score_mask[8], 1);
}

TEST(ExamplePlugin, ExamplesAreDeterministic) {
  const std::map<std::string, std::string> params{{"modulus", "11"}, {"length", "32"}};
  const auto a = registry_with_example().create("modular_counter", params);
  const auto b = registry_with_example().create("modular_counter", params);
  for (uint64_t i = 0; i < 20; ++i) {
    const Example x = a->example("val", 5, i), y = b->example("val", 5, i);
    EXPECT_EQ(x.input_ids, y.input_ids);
    EXPECT_EQ(x.labels, y.labels);
    EXPECT_EQ(x.score_mask, y.score_mask);
    EXPECT_EQ(x.input_ids, a->example("val", 5, i).input_ids);
  }
  EXPECT_NE(a->example("train", 5, 0).input_ids, a->example("train", 5, 1).input_ids);
  EXPECT_NE(a->example("train", 5, 0).input_ids, a->example("train", 6, 0).input_ids);
  // Sampling from a caller's Rng is a pure function of that Rng's stream too.
  Example x = a->example("train", 0, 0), y = x;
  Rng r1(99, 7), r2(99, 7);
  a->sample(0, r1, x.view());
  a->sample(0, r2, y.view());
  EXPECT_EQ(x.input_ids, y.input_ids);
}

TEST(ExamplePlugin, TrainAndEvalSplitsAreDisjoint) {
  // 3^6 = 729 possible sequences: without the partition, 1500 draws per split would overlap.
  const auto task = registry_with_example().create("modular_counter", {{"modulus", "3"}, {"length", "6"}});
  std::set<std::vector<int32_t>> train, val;
  for (uint64_t i = 0; i < 1500; ++i) {
    const Example tr = task->example("train", 1, i), va = task->example("val", 1, i);
    EXPECT_FALSE(in_eval_partition(tr.input_ids.data(), 6));
    EXPECT_TRUE(in_eval_partition(va.input_ids.data(), 6));
    train.insert(tr.input_ids);
    val.insert(va.input_ids);
  }
  EXPECT_GT(val.size(), 50u);
  for (const auto& seq : val) EXPECT_EQ(train.count(seq), 0u);
}

TEST(ExamplePlugin, ParametersAreValidated) {
  const TaskRegistry registry = registry_with_example();
  const std::string unknown = error_of([&] { registry.create("modular_counter", {{"modulo", "3"}}); });
  EXPECT_NE(unknown.find("unknown parameter 'modulo'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("modular_counter"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("modulus, length, labels"), std::string::npos) << unknown;

  const std::string range = error_of([&] { registry.create("modular_counter", {{"modulus", "1"}}); });
  EXPECT_NE(range.find(absolute(kExample)), std::string::npos) << range;
  EXPECT_NE(range.find("parameter 'modulus'='1': must be in [2, 1000]"), std::string::npos) << range;

  const std::string choice = error_of([&] { registry.create("modular_counter", {{"labels", "some"}}); });
  EXPECT_NE(choice.find("expected one of: all, final"), std::string::npos) << choice;
}

TEST(ExamplePlugin, SameFileTwiceIsANoOpButACopyIsADuplicate) {
  TaskRegistry registry = registry_with_example();
  load_plugin(registry, kExample);
  TaskRegistry builtins;
  register_builtin_tasks(builtins);
  EXPECT_EQ(registry.list().size(), builtins.list().size() + 1);  // the built-ins and modular_counter

  const fs::path copy = temp_dir("duplicate") / "copy.so";
  fs::copy_file(kExample, copy);
  const std::string msg = error_of([&] { load_plugin(registry, copy.string()); });
  EXPECT_NE(msg.find(absolute(copy.string())), std::string::npos) << msg;
  EXPECT_NE(msg.find("task 'modular_counter' is already registered (from " + absolute(kExample) + ")"),
            std::string::npos) << msg;
}

TEST(PluginPath, LoadsEverySharedLibraryInTheListedDirectories) {
  const fs::path dir = temp_dir("path"), empty = temp_dir("path_empty");
  fs::create_symlink(absolute(kExample), dir / "counter.so");
  { std::ofstream(dir / "notes.txt") << "not a plugin"; }
  {
    const ScopedEnv env(kPluginPathEnv, ":" + empty.string() + "::" + dir.string() + ":");
    TaskRegistry registry;
    load_plugins_from_env(registry);
    ASSERT_TRUE(registry.contains("modular_counter"));
    EXPECT_EQ(registry.get("modular_counter").origin, absolute((dir / "counter.so").string()));
    EXPECT_EQ(registry.list().size(), 1u);
    EXPECT_EQ(registry.create("modular_counter", {})->seq_len(), 64);
  }
  TaskRegistry unset;
  load_plugins_from_env(unset);
  EXPECT_EQ(unset.list().size(), 0u);

  const std::string missing = (dir / "no_such_dir").string();
  const ScopedEnv env(kPluginPathEnv, missing);
  TaskRegistry registry;
  const std::string msg = error_of([&] { load_plugins_from_env(registry); });
  EXPECT_NE(msg.find("STATEBENCH_PLUGIN_PATH names '" + missing + "', which is not a directory"),
            std::string::npos) << msg;
}

// --- loader error paths ---------------------------------------------------------------------

std::string load_error(const std::string& file) {
  TaskRegistry registry = registry_with_builtins();
  return error_of([&] { load_plugin(registry, file); });
}

void expect_contains(const std::string& msg, const std::string& part) {
  EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg << "\nexpected to contain: " << part;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
}

TEST(PluginErrors, MissingFile) {
  const std::string file = (fs::path(SB_TEST_TMP) / "no_such_plugin.so").string();
  expect_contains(load_error(file), "plugin file '" + file + "' does not exist");
}

TEST(PluginErrors, NotASharedLibrary) {
  const fs::path file = temp_dir("not_elf") / "text.so";
  { std::ofstream(file) << "this is text, not ELF\n"; }
  const std::string msg = load_error(file.string());
  const std::string prefix = "cannot load plugin '" + absolute(file.string()) + "': ";
  expect_contains(msg, prefix);
  EXPECT_GT(msg.size(), prefix.size()) << "dlerror() text missing: " << msg;
}

TEST(PluginErrors, MissingEntrySymbol) {
  expect_contains(load_error(SB_FIXTURE_NO_ENTRY), "'" + absolute(SB_FIXTURE_NO_ENTRY) +
                  "' is not a statebench plugin: missing symbol statebench_plugin_abi_version");
}

TEST(PluginErrors, AbiVersionMismatch) {
  expect_contains(load_error(SB_FIXTURE_ABI_V3), "plugin '" + absolute(SB_FIXTURE_ABI_V3) +
                  "' was built for plugin ABI v3; this statebench supports v1 and v2");
}

TEST(PluginErrors, MissingVersionedEntryPoint) {
  expect_contains(load_error(SB_FIXTURE_NO_TABLE), "plugin '" + absolute(SB_FIXTURE_NO_TABLE) +
                  "' reports ABI v1 but lacks its entry symbol statebench_plugin_v1");
}

TEST(PluginErrors, DuplicateTaskNameAddsNothing) {
  TaskRegistry registry = registry_with_builtins();
  const std::string msg = error_of([&] { load_plugin(registry, SB_FIXTURE_DUPLICATE); });
  expect_contains(msg, "plugin '" + absolute(SB_FIXTURE_DUPLICATE) +
                  "': task 'flipflop' is already registered (from built-in)");
  EXPECT_FALSE(registry.contains("fixture_ok")) << "a rejected plugin must not register any task";
}

TEST(PluginErrors, NullTaskName) {
  expect_contains(load_error(SB_FIXTURE_NULL_NAME), "plugin '" + absolute(SB_FIXTURE_NULL_NAME) +
                  "' returned invalid data: task 0 has a NULL name");
}

TEST(PluginErrors, TokenOutOfRangeInSampleOutput) {
  TaskRegistry registry;
  load_plugin(registry, SB_FIXTURE_BAD_TOKEN);
  const auto task = registry.create("fixture_bad_token", {});
  EXPECT_EQ(task->seq_len(), 8);
  const std::string msg = error_of([&] { task->example("train", 0, 0); });
  expect_contains(msg, "plugin '" + absolute(SB_FIXTURE_BAD_TOKEN) + "' returned invalid data");
  expect_contains(msg, "task 'fixture_bad_token' split 'train' example 0: input_ids[7] = 3 is outside the "
                       "vocabulary [0, 3)");
}

// Given to `statebench train`, a task whose examples fall outside its vocabulary is refused with one
// line (exit 2) before anything is written: no run directory, no config.yaml, no metrics.jsonl.
TEST(PluginErrors, TrainWithInvalidExamplesWritesNothing) {
  const fs::path dir = temp_dir("train_bad_token");
  write_file_atomic((dir / "c.yaml").string(),
                    "task: {name: fixture_bad_token, eval: [{split: val}]}\nmodel: {d_model: 16, n_heads: 2}\n"
                    "train: {steps: 2, batch_size: 2, eval_examples: 4, threads: 1}\n");
  const sb::test::CliResult r = sb::test::run_cli({"--plugin", SB_FIXTURE_BAD_TOKEN, "train", (dir / "c.yaml").string(),
                                                   "--out", (dir / "run").string(), "-q"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err.rfind("statebench: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("is outside the vocabulary"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST(PluginErrors, CreateFailureCarriesThePluginsMessage) {
  TaskRegistry registry;
  load_plugin(registry, SB_FIXTURE_CREATE_FAILS);
  const std::string file = absolute(SB_FIXTURE_CREATE_FAILS);
  // The declared default reaches create() when the user gives nothing, a given value otherwise.
  expect_contains(error_of([&] { registry.create("fixture_create_fails", {}); }),
                  "plugin '" + file + "': task 'fixture_create_fails': fixture refuses to create (size=8)");
  expect_contains(error_of([&] { registry.create("fixture_create_fails", {{"size", "5"}}); }),
                  "fixture refuses to create (size=5)");
}

TEST(PluginErrors, SampleFailureCarriesThePluginsMessage) {
  TaskRegistry registry;
  load_plugin(registry, SB_FIXTURE_SAMPLE_FAILS);
  const auto task = registry.create("fixture_sample_fails", {});
  expect_contains(error_of([&] { task->example("val", 0, 3); }),
                  "plugin '" + absolute(SB_FIXTURE_SAMPLE_FAILS) +
                      "': task 'fixture_sample_fails' split 'val' example 3: fixture cannot sample example 3");
}

// --- plugin.hpp in-process ------------------------------------------------------------------

// The smallest task plugin.hpp accepts: no params, default splits, a sample() that can throw.
struct Minimal {
  static const char* name() { return "minimal"; }
  static const char* summary() { return "minimal"; }
  int64_t seq_len() const { return 3; }
  std::vector<std::string> vocab() const { return {"x", "y"}; }
  void sample(int split, Rng& rng, plugin::ExampleSpans out) const {
    if (split == 2) throw std::runtime_error("minimal cannot sample\nthe test split");
    for (size_t t = 0; t < out.input_ids.size(); ++t)
      out.input_ids[t] = out.labels[t] = static_cast<int32_t>(rng.below(2));
    std::fill(out.score_mask.begin(), out.score_mask.end(), uint8_t{1});
  }
};

TEST(PluginHelper, GeneratesATableWithDefaults) {
  const sb_plugin_v2* table = plugin::detail::plugin_table<Minimal>();
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->n_tasks, 1u);
  EXPECT_STREQ(table->tasks[0].length_param, "");  // no params: a fixed length
  const sb_plugin_task_v1& task = table->tasks[0].task;
  EXPECT_STREQ(task.name, "minimal");
  EXPECT_EQ(task.n_params, 0u);
  char err[SB_PLUGIN_ERROR_SIZE] = {};
  void* instance = task.create(nullptr, nullptr, 0, err, sizeof err);
  ASSERT_NE(instance, nullptr) << err;
  sb_plugin_shape_v1 shape{};
  task.describe(instance, &shape);
  EXPECT_EQ(shape.seq_len, 3);
  ASSERT_EQ(shape.vocab_size, 2);
  EXPECT_STREQ(shape.token_names[1], "y");
  ASSERT_EQ(shape.n_splits, 3u);
  EXPECT_STREQ(shape.splits[0].name, "train");
  EXPECT_EQ(shape.splits[0].is_eval, 0);
  EXPECT_STREQ(shape.splits[2].name, "test");
  EXPECT_EQ(shape.details, nullptr);

  int32_t ids[3], labels[3];
  uint8_t mask[3];
  EXPECT_EQ(task.sample(instance, 0, 42, 1, 0, ids, labels, mask, err, sizeof err), 0);
  Rng rng(42, 1, 0);  // the generator the helper must build from (key, index, attempt)
  for (int t = 0; t < 3; ++t) EXPECT_EQ(ids[t], static_cast<int32_t>(rng.below(2)));
  EXPECT_NE(task.sample(instance, 2, 42, 1, 0, ids, labels, mask, err, sizeof err), 0);
  EXPECT_STREQ(err, "minimal cannot sample the test split");  // exceptions become one-line messages
  char tiny[8];
  EXPECT_NE(task.sample(instance, 2, 42, 1, 0, ids, labels, mask, tiny, sizeof tiny), 0);
  EXPECT_STREQ(tiny, "minimal");  // truncated to the buffer
  task.destroy(instance);
}

TEST(PluginHelper, ArgsParseAndRangeCheck) {
  const plugin::Args args({{"n", "12"}, {"p", "0.25"}, {"on", "yes"}, {"bad", "1x"}, {"mode", "b"}});
  EXPECT_EQ(args.integer("n", 0, 100), 12);
  EXPECT_DOUBLE_EQ(args.real("p", 0, 1), 0.25);
  EXPECT_TRUE(args.flag("on"));
  EXPECT_EQ(args.choice("mode", {"a", "b"}), "b");
  EXPECT_FALSE(args.has("missing"));
  auto message = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const plugin::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { args.integer("n", 0, 10); }), "parameter 'n'='12': must be in [0, 10]");
  EXPECT_EQ(message([&] { args.integer("bad"); }), "parameter 'bad'='1x': expected an integer");
  EXPECT_EQ(message([&] { args.real("bad"); }), "parameter 'bad'='1x': expected a finite number");
  EXPECT_EQ(message([&] { args.real("p", 0.5, 1); }), "parameter 'p'='0.25': must be in [0.5, 1]");
  EXPECT_EQ(message([&] { args.flag("mode"); }),
            "parameter 'mode'='b': expected one of: true, false, 1, 0, yes, no, on, off");
  EXPECT_EQ(message([&] { args.str("missing"); }), "parameter 'missing' has no value");
}

}  // namespace
}  // namespace sb
