// test_plugin_length.cpp: the plugin API's length contract (plugin_abi.h, "How statebench loads a
// plugin", step 8) through the real loader and binary: a v2 plugin names its length parameter and
// is evaluated at other lengths through it; a v1 plugin keeps working and has one only if it
// declares "length"; a task without one is refused at --dry-run, before anything is written; a v2
// plugin naming an undeclared parameter does not load.
#include "cli_run.hpp"
#include "io/json.hpp"
#include "tasks/plugin_loader.hpp"
#include "test_util.hpp"

namespace sb::test {
namespace {

const std::string kV1 = SB_FIXTURE_V1, kV2 = SB_FIXTURE_V2_SIZE, kV2Bad = SB_FIXTURE_V2_BAD_LENGTH,
                  kExample = SB_EXAMPLE_PLUGIN;

TaskRegistry with(const std::string& plugin) {
  TaskRegistry r;
  register_builtin_tasks(r);
  load_plugin(r, plugin);
  return r;
}

TEST(PluginLength, DeclaredInTheRegistry) {
  EXPECT_EQ(with(kV2).get("fixture_v2").length_param, "size");
  EXPECT_EQ(with(kV1).get("fixture_ok").length_param, "");               // v1 without a "length" param
  EXPECT_EQ(with(kExample).get("modular_counter").length_param, "length");  // plugin.hpp's default
  EXPECT_EQ(registry().get("mqar").length_param, "length");
  const auto task = with(kV2).create_at_length("fixture_v2", {}, 13);
  EXPECT_EQ(task->seq_len(), 13);
  EXPECT_CONTAINS(error_of([] { with(kV1).create_at_length("fixture_ok", {}, 13); }), "has a fixed length");
}

TEST(PluginLength, AnUndeclaredLengthParameterDoesNotLoad) {
  TaskRegistry r;
  register_builtin_tasks(r);
  EXPECT_CONTAINS(error_of([&] { load_plugin(r, kV2Bad); }), "length_param 'sise' is not one of its params");
  EXPECT_FALSE(r.contains("fixture_v2"));
}

fs::path config(const std::string& name, const std::string& task, const std::string& params) {
  const fs::path dir = fresh_dir("plugin_length_" + name);
  write_file_atomic((dir / "c.yaml").string(),
                    "task: {name: " + task + ", params: {" + params +
                        "}, eval: [{split: val}, {split: val, length: 12}]}\n"
                        "model: {d_model: 8, n_layers: 1, n_heads: 2, attention: rope}\n"
                        "train: {steps: 4, batch_size: 4, eval_every: 4, eval_examples: 8, threads: 1}\n");
  return dir;
}

TEST(PluginLength, TrainEvaluatesAV2TaskAtAnotherLength) {
  const fs::path dir = config("v2", "fixture_v2", "size: 6");
  const CliResult r = run_cli({"--plugin", kV2, "train", (dir / "c.yaml").string(), "--out", (dir / "run").string(), "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const Json s = parse_json(read_file((dir / "run" / "summary.json").string()));
  EXPECT_EQ(s["eval"]["val"]["length"], 6);
  EXPECT_EQ(s["eval"]["val@12"]["length"], 12);
  const CliResult show = run_cli({"--plugin", kV2, "tasks", "show", "fixture_v2"});
  EXPECT_CONTAINS(show.out, "length parameter: size");
}

// A sweep checks each cell's evaluation lengths through the task's own length parameter ("size"),
// as train builds them, and runs the cell.
TEST(PluginLength, ASweepEvaluatesAV2TaskAtAnotherLength) {
  const fs::path dir = config("v2_sweep", "fixture_v2", "size: 6");
  write_file_atomic((dir / "study.yaml").string(), "name: v2_sweep\nbase: c.yaml\ngrid:\n  train.seed: [0]\n");
  const CliResult dry = run_cli({"--plugin", kV2, "sweep", (dir / "study.yaml").string(), "--out", (dir / "sw").string(), "--dry-run"});
  ASSERT_EQ(dry.rc, 0) << dry.err;
  const CliResult r = run_cli({"--plugin", kV2, "sweep", (dir / "study.yaml").string(), "--out", (dir / "sw").string(),
                               "--workers", "1", "--progress", "plain"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_CONTAINS(r.out + r.err, "1 finished (0 failed)");
}

TEST(PluginLength, AFixedLengthTaskIsRefusedAtDryRun) {
  const fs::path dir = config("v1", "fixture_ok", "size: 6");
  for (const bool dry : {true, false}) {
    std::vector<std::string> args{"--plugin", kV1, "train", (dir / "c.yaml").string(), "--out", (dir / "run").string()};
    if (dry) args.push_back("--dry-run");
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_CONTAINS(r.err, "task.eval[1] (split 'val', length 12): task 'fixture_ok'");
    EXPECT_CONTAINS(r.err, "has a fixed length");
    EXPECT_FALSE(fs::exists(dir / "run"));
  }
  const CliResult show = run_cli({"--plugin", kV1, "tasks", "show", "fixture_ok"});
  EXPECT_CONTAINS(show.out, "length: fixed");
}

}  // namespace
}  // namespace sb::test
