// test_sweep_protocols.cpp: the staged protocols end to end through the sweep runner with the fake
// launcher (sweep_runner_fixture.hpp): min_depth's depth-by-depth skips and its deepest-first order,
// max_lr with and without stop_at (later rates skipped, resume), the manifest's format and round
// trip, and the device slots; the early-stop rule (train.target_metric) through the real binary,
// and config fingerprints it leaves unchanged; train.target_eval with scaled eval entries in a
// study; the constant learning rate after warm-up as logged.
#include "cli_run.hpp"
#include "io/json.hpp"
#include "sweep_runner_fixture.hpp"
#include "tasks/registry.hpp"
#include "train/config.hpp"
#include "train/evaluation.hpp"

namespace sb::sweep {
namespace {

using namespace runner_test;

// Depths 1-3 of the given models, seeds 0 and 1, min_depth at 0.9 best over seeds, plus `options`.
Plan min_depth_plan(const std::string& models, const std::string& options = "") {
  return plan_of("grid:\n  model.attention: [" + models + "]\n  model.n_layers: [1, 2, 3]\n  train.seed: [0, 1]\n"
                 "protocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 0.9, best_over: [train.seed]" + options + "}\n");
}

TEST(SweepRunner, MinDepthEndToEnd) {
  const Plan plan = min_depth_plan("path, rope");
  const fs::path out = fresh("min_depth");
  auto outcome = [](const Cell& c) {
    Outcome o;
    const bool path = c.config.model.attention == Attention::path;
    const int64_t depth = c.config.model.n_layers;
    o.metric = path ? (c.config.train.seed == 1 ? 0.97 : 0.5) : (depth >= 2 && c.config.train.seed == 0 ? 0.92 : 0.3);
    return o;
  };
  FakeLauncher launcher(plan);
  launcher.outcome = outcome;
  const SweepResult r = run_sweep(plan, launcher, options(out, 4));
  EXPECT_EQ(launcher.started_labels(),
            (std::set<std::string>{"attention=path,n_layers=1,seed=0", "attention=path,n_layers=1,seed=1",
                                   "attention=rope,n_layers=1,seed=0", "attention=rope,n_layers=1,seed=1",
                                   "attention=rope,n_layers=2,seed=0", "attention=rope,n_layers=2,seed=1"}));
  EXPECT_EQ(r.counts.skipped, 6u);
  ASSERT_EQ(r.groups.size(), 2u);
  EXPECT_EQ(*r.groups[0].reached, 0u);
  EXPECT_EQ(*r.groups[1].reached, 1u);
  const YAML::Node m = manifest(out);
  EXPECT_EQ(m["protocol"].as<std::string>(), "min_depth");
  EXPECT_EQ(m["options"]["axis"].as<std::string>(), "model.n_layers");
  EXPECT_DOUBLE_EQ(m["options"]["threshold"].as<double>(), 0.9);
  EXPECT_EQ(m["options"]["best_over"][0].as<std::string>(), "train.seed");
  EXPECT_EQ(m["groups"][0]["key"].as<std::string>(), "attention=path");
  EXPECT_EQ(m["groups"][0]["min_depth"].as<std::string>(), "1");
  EXPECT_EQ(m["groups"][1]["min_depth"].as<std::string>(), "2");
  EXPECT_EQ(m["groups"][1]["cells"].size(), 3u);
  size_t skipped = 0;
  for (const auto& c : m["cells"]) {
    skipped += c["state"].as<std::string>() == "skipped";
    EXPECT_EQ(c["group"].as<std::string>(), c["axes"]["model.attention"].as<std::string>() == "path" ? "attention=path" : "attention=rope");
  }
  EXPECT_EQ(skipped, 6u);
  // Resume: every depth already decided from disk; nothing runs.
  const SweepResult r2 = rerun_starting_nothing(plan, outcome, out, 4);
  EXPECT_EQ(r2.counts.reused, 6u);
  EXPECT_EQ(r2.counts.skipped, 6u);
}

TEST(SweepRunner, MaxLrRunsAllAndRecordsTheProtocol) {
  const Plan plan = plan_of("set: ['task.eval=[{split: val}, {split: val, length: 16}]']\n"
                            "grid: {optim.lr: [1e-3, 3e-3, 1e-2], train.seed: [0, 1]}\nprotocol: max_lr\n"
                            "max_lr: {metric: val@16.token_accuracy}\n");
  const fs::path out = fresh("max_lr");
  FakeLauncher launcher(plan);
  run_sweep(plan, launcher, options(out));
  EXPECT_EQ(launcher.started.size(), 6u);
  const YAML::Node m = manifest(out);
  EXPECT_EQ(m["protocol"].as<std::string>(), "max_lr");
  EXPECT_EQ(m["options"]["axis"].as<std::string>(), "optim.lr");
  EXPECT_EQ(m["options"]["metric"].as<std::string>(), "val@16.token_accuracy");
  EXPECT_TRUE(m["options"]["stop_at"].IsNull());
  EXPECT_EQ(m["groups"].size(), 0u);
}

TEST(SweepRunner, MaxLrStopAtSkipsLaterRatesAndResumes) {
  const Plan plan = plan_of("grid: {model.attention: [path, rope], optim.lr: [3e-3, 1e-3, 1e-2]}\nprotocol: max_lr\n"
                            "max_lr: {stop_at: 0.9}\n");
  const fs::path out = fresh("max_lr_stop");
  auto outcome = [](const Cell& c) {
    Outcome o;  // path reaches at the first rate; rope only at the last
    const bool path = c.config.model.attention == Attention::path;
    o.metric = path ? 0.95 : (c.config.optim.lr > 5e-3 ? 0.91 : 0.2);
    return o;
  };
  FakeLauncher launcher(plan);
  launcher.outcome = outcome;
  const SweepResult r = run_sweep(plan, launcher, options(out, 4));
  EXPECT_EQ(launcher.started_labels(), (std::set<std::string>{"attention=path,lr=3e-3", "attention=rope,lr=3e-3",
                                                              "attention=rope,lr=1e-3", "attention=rope,lr=1e-2"}));
  EXPECT_EQ(r.counts.skipped, 2u);
  const YAML::Node m = manifest(out);
  EXPECT_DOUBLE_EQ(m["options"]["stop_at"].as<double>(), 0.9);
  ASSERT_EQ(m["groups"].size(), 2u);
  EXPECT_EQ(m["groups"][0]["values"][0].as<std::string>(), "3e-3");
  EXPECT_EQ(m["groups"][0]["reached"].as<std::string>(), "3e-3");
  EXPECT_EQ(m["groups"][1]["reached"].as<std::string>(), "1e-2");
  const SweepResult r2 = rerun_starting_nothing(plan, outcome, out, 4);
  EXPECT_EQ(r2.counts.skipped, 2u);
}

// min_depth order deepest_first through the runner: a group that misses at the deepest depth runs
// nothing else (path); one that reaches there runs the others upward and stops at the first that
// reaches (rope: 2) or, when none does, is answered by the deepest (fox: 3). The manifest keeps the
// order and the run order of the depths; a rerun starts nothing.
TEST(SweepRunner, MinDepthDeepestFirstEndToEnd) {
  const Plan plan = min_depth_plan("path, rope, fox", ", order: deepest_first");
  const fs::path out = fresh("min_depth_deepest_first");
  auto outcome = [](const Cell& c) {
    Outcome o;
    const Attention a = c.config.model.attention;
    const int64_t depth = c.config.model.n_layers;
    const bool seed0 = c.config.train.seed == 0;
    o.metric = a == Attention::path ? 0.5 : a == Attention::rope ? (depth >= 2 && seed0 ? 0.92 : 0.3) : (depth == 3 && seed0 ? 0.95 : 0.2);
    return o;
  };
  FakeLauncher launcher(plan);
  launcher.outcome = outcome;
  const SweepResult r = run_sweep(plan, launcher, options(out, 4));
  std::set<std::string> want;
  for (const char* seed : {"0", "1"}) {
    want.insert(std::string("attention=path,n_layers=3,seed=") + seed);
    for (const char* depth : {"1", "2", "3"}) {
      want.insert(std::string("attention=fox,n_layers=") + depth + ",seed=" + seed);
      want.insert(std::string("attention=rope,n_layers=") + depth + ",seed=" + seed);
    }
  }
  EXPECT_EQ(launcher.started_labels(), want);
  EXPECT_EQ(r.counts.skipped, 4u);  // path at depths 1 and 2
  ASSERT_EQ(r.groups.size(), 3u);
  EXPECT_FALSE(r.groups[0].reached.has_value());
  EXPECT_EQ(*r.groups[1].reached, 2u);  // run order 3, 1, 2: depth 2
  EXPECT_EQ(*r.groups[2].reached, 0u);  // depth 3
  const YAML::Node m = manifest(out);
  EXPECT_EQ(m["options"]["order"].as<std::string>(), "deepest_first");
  EXPECT_EQ(m["groups"][0]["depths"][0].as<std::string>(), "3");
  EXPECT_TRUE(m["groups"][0]["min_depth"].IsNull());
  EXPECT_EQ(m["groups"][1]["min_depth"].as<std::string>(), "2");
  EXPECT_EQ(m["groups"][2]["min_depth"].as<std::string>(), "3");
  const SweepResult r2 = rerun_starting_nothing(plan, outcome, out, 4);
  EXPECT_EQ(r2.counts.reused, 14u);
  EXPECT_EQ(r2.counts.skipped, 4u);
}

TEST(SweepManifest, Format) {
  const Plan plan = plan_of("description: d\nset: {train.steps: 5}\ngrid: {model.attention: [path, rope]}\n"
                            "zip: {task.params.length: [8, 16], task.eval: [[val], [{split: val, length: 32}]]}\n");
  const fs::path out = fresh("manifest");
  FakeLauncher launcher(plan);
  run_sweep(plan, launcher, options(out));
  const std::string text = read_file((out / "manifest.json").string());
  const YAML::Node m = YAML::Load(text);
  EXPECT_EQ(m["format"].as<std::string>(), "statebench-sweep");
  EXPECT_EQ(m["version"].as<int>(), kManifestVersion);
  EXPECT_EQ(m["name"].as<std::string>(), "s");
  EXPECT_EQ(m["description"].as<std::string>(), "d");
  EXPECT_EQ(m["study"].as<std::string>(), "study.yaml");
  EXPECT_EQ(m["base"].as<std::string>(), (fs::absolute(out).lexically_normal() / "base.yaml").string());
  EXPECT_EQ(m["set"][0].as<std::string>(), "train.steps=5");
  EXPECT_EQ(m["protocol"].as<std::string>(), "grid");
  EXPECT_EQ(m["options"].size(), 0u);
  EXPECT_EQ(m["metric"].as<std::string>(), "val.token_accuracy");
  ASSERT_EQ(m["axes"].size(), 3u);
  EXPECT_EQ(m["axes"][0]["key"].as<std::string>(), "model.attention");
  EXPECT_EQ(m["axes"][0]["kind"].as<std::string>(), "grid");
  EXPECT_EQ(m["axes"][2]["kind"].as<std::string>(), "zip");
  EXPECT_EQ(m["axes"][2]["values"][1].as<std::string>(), "[{split: val, length: 32}]");
  EXPECT_TRUE(m["complete"].as<bool>());
  EXPECT_EQ(m["counts"]["finished"].as<int>(), 4);
  ASSERT_EQ(m["cells"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const YAML::Node c = m["cells"][i];
    EXPECT_EQ(c["id"].as<std::string>(), plan.cells[i].id);
    EXPECT_EQ(c["dir"].as<std::string>(), "cells/" + plan.cells[i].id);
    EXPECT_EQ(c["overrides"].size(), 3u);
    EXPECT_EQ(c["overrides"][1].as<std::string>(), plan.cells[i].overrides()[1]);
    EXPECT_EQ(c["axes"]["task.params.length"].as<std::string>(), plan.cells[i].value("task.params.length")->text);
    EXPECT_EQ(c["state"].as<std::string>(), "finished");
    EXPECT_EQ(c["status"].as<std::string>(), "completed");
    EXPECT_FALSE(c["group"]);
  }
  EXPECT_EQ(text.find("\t"), std::string::npos);
}

// The manifest reads back into the same type and writes the same text; every committed
// manifest.json loads and writes back as the same JSON (keys, order and values).
TEST(SweepManifest, RoundTrips) {
  const Plan plan = plan_of("grid: {model.attention: [path, rope], model.n_layers: [1, 2]}\nprotocol: min_depth\n"
                            "min_depth: {axis: model.n_layers, threshold: 0.5}\n");
  const fs::path out = fresh("manifest_round_trip");
  FakeLauncher launcher(plan);
  run_sweep(plan, launcher, options(out));
  const std::string path = (out / "manifest.json").string(), text = read_file(path);
  const Manifest m = read_manifest(path);
  EXPECT_EQ(m.protocol, "min_depth");
  EXPECT_EQ(m.options.threshold, 0.5);
  ASSERT_EQ(m.cells.size(), plan.cells.size());
  EXPECT_EQ(m.cells[0].overrides.front().first, "model.attention");
  EXPECT_EQ(manifest_text(m), text);
  EXPECT_NE(text.find("\n    {\"id\":\"" + plan.cells[1].id + "\""), std::string::npos) << text;  // a cell per line

  // min_depth order deepest_first: written as an option, the depths in run order, read back alike.
  const Plan deep = plan_of("grid: {model.attention: [path], model.n_layers: [1, 2, 3]}\nprotocol: min_depth\n"
                            "min_depth: {axis: model.n_layers, threshold: 0.5, order: deepest_first}\n");
  const fs::path deep_out = fresh("manifest_deepest_first");
  FakeLauncher deep_launcher(deep);
  run_sweep(deep, deep_launcher, options(deep_out));
  const std::string deep_path = (deep_out / "manifest.json").string();
  const Manifest dm = read_manifest(deep_path);
  EXPECT_EQ(dm.options.order, "deepest_first");
  ASSERT_EQ(dm.groups.size(), 1u);
  EXPECT_EQ(dm.groups[0].labels, (std::vector<std::string>{"3", "1", "2"}));
  EXPECT_EQ(manifest_text(dm), read_file(deep_path));
  EXPECT_EQ(m.options.order, "");  // ascending: no key written
  EXPECT_EQ(text.find("\"order\""), std::string::npos);

  const fs::path results = fs::path(SB_SOURCE_DIR) / "results";
  size_t n = 0;
  if (fs::exists(results))
    for (const auto& entry : fs::recursive_directory_iterator(results)) {
      if (entry.path().filename() != "manifest.json") continue;
      const Json original = parse_json(read_file(entry.path().string()));
      const Json again = read_manifest(entry.path().string());
      EXPECT_EQ(again.dump(), original.dump()) << entry.path();
      ++n;
    }
  if (n == 0) GTEST_SKIP() << "no committed manifest.json";
}

TEST(SweepSlots, DevicesAndWorkers) {
  EXPECT_EQ(parse_devices("cpu"), std::vector<std::string>{"cpu"});
  EXPECT_EQ(parse_devices("cuda,cuda:3"), (std::vector<std::string>{"cuda:0", "cuda:3"}));
  EXPECT_THROW(parse_devices("gpu"), Error);
  EXPECT_THROW(parse_devices("cpu,cpu"), Error);
  EXPECT_THROW(parse_devices("cuda:x"), Error);
  EXPECT_THROW(parse_devices(""), Error);
  EXPECT_EQ(make_slots({"cpu"}, 0, 8, 2), std::vector<std::string>(4, "cpu"));
  EXPECT_EQ(make_slots({"cpu"}, 0, 2, 4), std::vector<std::string>(1, "cpu"));
  EXPECT_EQ(make_slots({"cpu", "cuda:0", "cuda:1"}, 0, 2, 1), (std::vector<std::string>{"cpu", "cuda:0", "cuda:1", "cpu"}));
  EXPECT_EQ(make_slots({"cuda:0", "cuda:1"}, 5, 16, 1),
            (std::vector<std::string>{"cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"}));
}

TEST(SweepSlots, ConcurrentLanesShareAGpu) {
  EXPECT_EQ(concurrent_lanes(std::vector<std::string>(4, "cpu")), 4.0);
  EXPECT_EQ(concurrent_lanes(std::vector<std::string>(8, "cuda:0")), 2.0);  // 8 workers, one GPU
  EXPECT_EQ(concurrent_lanes({"cuda:0"}), 1.0);
  EXPECT_EQ(concurrent_lanes(make_slots({"cuda:0", "cuda:1"}, 6, 16, 1)), 4.0);
  EXPECT_EQ(concurrent_lanes({"cpu", "cuda:0", "cuda:0", "cuda:0", "cpu"}), 4.0);
}

// ---- the stop rule -----------------------------------------------------------------------------

// train.target_metric is a key added after the fingerprint was fixed: absent from the effective
// YAML at its default, so every earlier config keeps its fingerprint (pinned here: the value the
// binary wrote before the key existed, for the defaults with train.steps=1 and batch_size=1; a
// change means earlier runs' checkpoints no longer resume), and never part of it.
TEST(StopRule, TargetMetricLeavesFingerprintsUnchanged) {
  const TrainConfig base = parse_config("", {"train.steps=1", "train.batch_size=1"});
  EXPECT_EQ(base.train.target_metric, TargetMetric::token_accuracy);
  EXPECT_EQ(to_yaml(base).find("target_metric"), std::string::npos);
  EXPECT_EQ(fmt::format("{:016x}", config_fingerprint(base)), "b25339a6ffdeb4fa");
  const TrainConfig seq = parse_config("train: {target_metric: sequence_accuracy, target_accuracy: 0.99, steps: 1, batch_size: 1}\n");
  EXPECT_EQ(seq.train.target_metric, TargetMetric::sequence_accuracy);
  EXPECT_CONTAINS(to_yaml(seq), "\n  target_metric: sequence_accuracy\n");
  EXPECT_EQ(parse_config(to_yaml(seq)), seq);
  EXPECT_EQ(config_fingerprint(seq), config_fingerprint(base));
  EXPECT_EQ(error_of([] { parse_config("", {"train.target_metric=loss"}); }),
            "config '<string>': train.target_metric: expected one of token_accuracy, sequence_accuracy, got 'loss' "
            "(from --set 'train.target_metric=loss')");
}

// Through the binary: after the first evaluation of a tiny parity run, token accuracy (about 0.5)
// passes 0.3 and the run stops there; sequence accuracy (all 8 prefix parities right: about 1/256)
// does not, and the run trains to the end.
TEST(StopRule, EarlyStopOnTheChosenAccuracy) {
  const fs::path dir = sb::test::fresh_dir("stop_rule");
  const std::string config = (dir / "c.yaml").string();
  write_file_atomic(config,
                    "task: {name: parity, params: {length: 8}}\nmodel: {d_model: 16, n_heads: 2}\n"
                    "train: {steps: 6, batch_size: 8, eval_every: 2, eval_examples: 64, log_every: 1, threads: 1, "
                    "target_accuracy: 0.3}\noptim: {warmup_steps: 2, schedule: constant, lr: 0.01}\n");
  auto train = [&](const std::string& name, const std::string& metric) {
    const auto r = sb::test::run_cli({"train", config, "--out", (dir / name).string(), "-q", "--set",
                                      "train.target_metric=" + metric});
    EXPECT_EQ(r.rc, 0) << r.err;
    return parse_json(read_file((dir / name / "summary.json").string()));
  };
  const Json token = train("token", "token_accuracy"), sequence = train("sequence", "sequence_accuracy");
  EXPECT_EQ(token["status"], "early_stopped");
  EXPECT_EQ(token["steps"], 2);
  EXPECT_GE(token["eval"]["val"]["token_accuracy"].get<double>(), 0.3);
  EXPECT_EQ(sequence["status"], "completed");
  EXPECT_EQ(sequence["steps"], 6);
  EXPECT_LT(sequence["eval"]["val"]["sequence_accuracy"].get<double>(), 0.3);
  EXPECT_EQ(token["config_fingerprint"], sequence["config_fingerprint"]);
  EXPECT_CONTAINS(read_file((dir / "sequence" / "config.yaml").string()), "target_metric: sequence_accuracy");
  // optim.schedule constant: lr rises over the 2 warm-up steps, then stays at lr.
  std::vector<double> lrs;
  for (const auto& line : sb::test::lines_of(read_file((dir / "sequence" / "metrics.jsonl").string()))) {
    const Json j = parse_json(line);
    if (j["kind"] == "train") lrs.push_back(j["lr"].get<double>());
  }
  EXPECT_EQ(lrs, (std::vector<double>{0.005, 0.01, 0.01, 0.01, 0.01, 0.01}));
}

// Length generalisation inside one study: a grid over the training length evaluates each cell at 2x
// its own length (task.eval[].scale, resolved by the task check as `statebench sweep` does) while
// train.target_eval keeps the early stop on the training-length entry. A protocol metric the stop
// does not read is refused; an unknown target key is a one-line error through `statebench train`.
TEST(StopRule, TargetEvalAndScaledEntriesInAStudy) {
  static TaskRegistry tasks = [] {
    TaskRegistry t;
    register_builtin_tasks(t);
    return t;
  }();
  const TaskCheck check = [](TrainConfig& c) {
    resolve_eval_lengths(c, tasks);
    return TaskShape{};
  };
  const auto set = [](const std::string& target) {
    return "set: ['task.eval=[val, {split: val, scale: 2}]', 'train.target_eval=[" + target +
           "]', 'train.target_accuracy=0.9']\n";
  };
  const std::string scaled = set("val");
  const Plan p = make_plan(parse_study(std::string(kBase) + scaled + "grid: {task.params.length: [8, 16]}\n", "s.yaml", ""),
                           check);
  ASSERT_EQ(p.cells.size(), 2u);
  EXPECT_EQ(p.cells[0].config.task.eval[1], (EvalSplitConfig{"val", 16, 0, 0}));
  EXPECT_EQ(p.cells[1].config.task.eval[1], (EvalSplitConfig{"val", 32, 0, 0}));
  EXPECT_EQ(p.cells[1].config.train.target_eval, std::vector<std::string>{"val"});
  EXPECT_EQ(error_of([&] {
              make_plan(parse_study(std::string(kBase) + scaled + "grid: {task.params.length: [8, 16]}\n" +
                                        "protocol: min_depth\nmin_depth: {axis: task.params.length, threshold: 0.5, "
                                        "metric: val@16.token_accuracy}\n",
                                    "s.yaml", ""),
                        check);
            }),
            "study 's.yaml': cell 'length=8': train.target_eval does not list 'val@16', so train.target_accuracy 0.9 "
            "can end training before min_depth val@16.token_accuracy reaches 0.5; add 'val@16' to train.target_eval, "
            "or set train.target_accuracy: 0 (no early stop)");
  EXPECT_EQ(error_of([&] {
              make_plan(parse_study(std::string(kBase) +
                                        "set: ['task.eval=[val, {split: val, length: 64}]', 'train.target_eval=[val]', "
                                        "'train.target_accuracy=1']\ngrid: {model.n_layers: [1, 2]}\n"
                                        "protocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 0.9, "
                                        "metric: val@64.token_accuracy}\n",
                                    "s.yaml", ""),
                        check);
            }),
            "study 's.yaml': cell 'n_layers=1': train.target_eval does not list 'val@64', so train.target_accuracy 1 "
            "can end training before min_depth val@64.token_accuracy reaches 0.9; add 'val@64' to train.target_eval, "
            "or set train.target_accuracy: 0 (no early stop)");
  EXPECT_CONTAINS(error_of([&] {
                    make_plan(parse_study(std::string(kBase) + set("val@16") + "grid: {task.params.length: [8, 16]}\n",
                                          "s.yaml", ""), check);
                  }),
                  "train.target_eval: 'val@16' is not the key of any task.eval entry (keys: val, val@32)");

  const fs::path dir = sb::test::fresh_dir("target_eval_cli");
  const std::string config = (dir / "c.yaml").string();
  write_file_atomic(config, "task: {name: parity, params: {length: 8}, eval: [val, {split: val, scale: 2}]}\n"
                            "train: {steps: 2, batch_size: 2, target_eval: [val@32]}\n");
  const auto r = sb::test::run_cli({"train", config, "--out", (dir / "run").string(), "-q"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_CONTAINS(r.err, "train.target_eval: 'val@32' is not the key of any task.eval entry (keys: val, val@16)");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run"));
}

}  // namespace
}  // namespace sb::sweep
