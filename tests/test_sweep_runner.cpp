// test_sweep_runner.cpp: the sweep runner with a fake launcher (no processes): the parallelism
// limit, the child command line, failures recorded and the sweep going on, interrupt + resume
// (finished reused, unfinished rerun with --resume, failed retried, nothing recorded twice),
// per-cell and per-sweep locks, min_depth and max_lr end to end, the manifest's format, slots.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "sweep/manifest.hpp"
#include "sweep/runner.hpp"
#include "train/metrics_log.hpp"
#include "test_util.hpp"

namespace sb::sweep {
namespace {

namespace fs = std::filesystem;

// What a fake cell does when the runner waits for it.
struct Outcome {
  int exit_code = 0, signal = 0;
  std::string status = "completed";  // empty: write no summary.json
  std::optional<double> metric = 0.95;
  std::string log;                   // appended to log.txt
};

class FakeLauncher final : public Launcher {
 public:
  explicit FakeLauncher(const Plan& plan) : plan_(plan) {}
  std::function<Outcome(const Cell&)> outcome = [](const Cell&) { return Outcome{}; };
  std::function<void()> before_wait;                 // runs at each wait()
  std::vector<LaunchSpec> started;                   // in start order
  std::map<std::string, int>* summaries_written = nullptr;  // by cell id, across launchers
  size_t max_running = 0;
  int signalled = 0;

  int64_t start(const LaunchSpec& spec) override {
    EXPECT_TRUE(fs::is_directory(spec.dir));
    EXPECT_GE(spec.lock_fd, 0);
    started.push_back(spec);
    running_.push_back(next_);
    specs_[next_] = spec;
    max_running = std::max(max_running, running_.size());
    return next_++;
  }
  std::vector<LaunchExit> wait(double) override {
    if (before_wait) before_wait();
    std::vector<LaunchExit> out;
    if (signalled) {  // every running cell dies without a summary
      for (const int64_t h : running_) out.push_back({h, 0, signalled});
      running_.clear();
      return out;
    }
    if (running_.empty()) return out;
    const int64_t h = running_.front();  // one cell ends per wait, oldest first
    running_.pop_front();
    const LaunchSpec& spec = specs_[h];
    const Cell& cell = plan_.cells[spec.cell];
    const Outcome o = outcome(cell);
    if (!o.log.empty()) {
      const std::string log = (fs::path(spec.dir) / "log.txt").string();
      write_file_atomic(log, (fs::exists(log) ? read_file(log) : "") + o.log);
    }
    if (!o.status.empty()) {
      JsonObject eval, val;
      if (o.metric) val.add("token_accuracy", *o.metric);
      eval.add("val", val);
      JsonObject s;
      s.add("status", o.status).add("message", "").add("wall_seconds", 0.5).add("eval", eval);
      write_summary((fs::path(spec.dir) / "summary.json").string(), s);
      if (summaries_written) ++(*summaries_written)[cell.id];
    }
    out.push_back({h, o.exit_code, o.signal});
    return out;
  }
  void signal_all(int sig) override { signalled = sig; }

  std::set<std::string> started_labels() const {
    std::set<std::string> s;
    for (const auto& spec : started) s.insert(plan_.cells[spec.cell].label());
    return s;
  }

 private:
  const Plan& plan_;
  std::deque<int64_t> running_;
  std::map<int64_t, LaunchSpec> specs_;
  int64_t next_ = 1;
};

const char* kBase =
    "config:\n"
    "  task: {name: parity, params: {length: 8}}\n"
    "  model: {d_model: 16, n_heads: 2}\n"
    "  train: {steps: 10, batch_size: 4}\n";

Plan plan_of(const std::string& body) { return make_plan(parse_study(std::string(kBase) + body, "s.yaml", "")); }

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(SB_TEST_TMP) / ("sweep_runner_" + name);
  fs::remove_all(dir);
  return dir;
}

RunnerOptions options(const fs::path& out, size_t slots = 2) {
  RunnerOptions o;
  o.out_dir = out.string();
  o.slots.assign(slots, "cpu");
  o.poll_seconds = 0;
  return o;
}

bool has_summary(const fs::path& out, const Cell& c) { return fs::exists(out / c.dir / "summary.json"); }

YAML::Node manifest(const fs::path& out) { return YAML::Load(read_file((out / "manifest.json").string())); }

TEST(SweepRunner, RespectsTheParallelismLimitAndRunsEveryCellOnce) {
  const Plan plan = plan_of("grid: {train.seed: [0, 1, 2, 3, 4, 5, 6]}\n");
  const fs::path out = fresh("parallel");
  FakeLauncher launcher(plan);
  const SweepResult r = run_sweep(plan, launcher, options(out, 3));
  EXPECT_FALSE(r.interrupted);
  EXPECT_EQ(launcher.max_running, 3u);
  EXPECT_EQ(launcher.started.size(), 7u);
  EXPECT_EQ(launcher.started_labels().size(), 7u);
  EXPECT_EQ(r.counts.finished, 7u);
  EXPECT_EQ(r.counts.failed, 0u);
  for (const auto& c : plan.cells) EXPECT_TRUE(has_summary(out, c)) << c.id;
  EXPECT_TRUE(manifest(out)["complete"].as<bool>());
  EXPECT_EQ(read_file((out / "study.yaml").string()), plan.study.text);
  EXPECT_TRUE(fs::exists(out / "base.yaml"));  // the inline config, given to train as a file
}

TEST(SweepRunner, ChildCommandLine) {
  const Plan plan = plan_of("set: {optim.lr: 0.01}\ngrid: {model.attention: [rope], train.seed: [3]}\n");
  const fs::path out = fresh("argv");
  FakeLauncher launcher(plan);
  RunnerOptions opt = options(out, 1);
  opt.slots = {"cuda:1"};
  opt.cpu_threads = 2;  // only for cpu cells
  run_sweep(plan, launcher, opt);
  ASSERT_EQ(launcher.started.size(), 1u);
  const fs::path dir = fs::absolute(out).lexically_normal() / plan.cells[0].dir;
  EXPECT_EQ(launcher.started[0].dir, dir.string());
  EXPECT_EQ(launcher.started[0].device, "cuda:1");
  const std::vector<std::string> want = {"train", (fs::absolute(out).lexically_normal() / "base.yaml").string(),
                                         "--set", "optim.lr=0.01", "--set", "model.attention=rope", "--set", "train.seed=3",
                                         "--out", dir.string(), "--device", "cuda:1"};
  EXPECT_EQ(launcher.started[0].args, want);

  // A cpu cell with a checkpoint (an unfinished run) gets the thread count and --resume.
  const fs::path out2 = fresh("argv_cpu");
  fs::create_directories(out2 / plan.cells[0].dir);
  write_file_atomic((out2 / plan.cells[0].dir / "checkpoint.bin").string(), "x");
  FakeLauncher l2(plan);
  opt = options(out2, 1);
  opt.cpu_threads = 2;
  run_sweep(plan, l2, opt);
  ASSERT_EQ(l2.started.size(), 1u);
  const auto& a = l2.started[0].args;
  EXPECT_EQ(a.back(), "--resume");
  EXPECT_NE(std::find(a.begin(), a.end(), "train.threads=2"), a.end());
}

TEST(SweepRunner, FailedCellsAreRecordedAndTheSweepGoesOn) {
  const Plan plan = plan_of("grid: {train.seed: [0, 1, 2, 3]}\n");
  const fs::path out = fresh("failures");
  FakeLauncher launcher(plan);
  launcher.outcome = [](const Cell& c) {
    Outcome o;
    if (c.label() == "seed=1") o = {2, 0, "", std::nullopt, "statebench: error: task 'parity': bad length\n"};
    if (c.label() == "seed=2") o = {0, SIGKILL, "", std::nullopt, ""};
    if (c.label() == "seed=3") o.status = "diverged", o.exit_code = 1;  // train's own record
    return o;
  };
  const SweepResult r = run_sweep(plan, launcher, options(out));
  EXPECT_EQ(launcher.started.size(), 4u);
  EXPECT_EQ(r.counts.finished, 4u);
  EXPECT_EQ(r.counts.failed, 2u);
  const auto exit2 = read_cell_result((out / plan.cells[1].dir / "summary.json").string(), "val.token_accuracy");
  ASSERT_TRUE(exit2);
  EXPECT_EQ(exit2->status, "failed");
  EXPECT_CONTAINS(exit2->message, "exited with code 2");
  EXPECT_CONTAINS(exit2->message, "bad length");
  const YAML::Node s1 = YAML::Load(read_file((out / plan.cells[1].dir / "summary.json").string()));
  EXPECT_EQ(s1["exit_code"].as<int>(), 2);
  EXPECT_CONTAINS(s1["log_tail"].as<std::string>(), "bad length");
  EXPECT_EQ(s1["written_by"].as<std::string>(), "statebench sweep");
  const auto killed = read_cell_result((out / plan.cells[2].dir / "summary.json").string(), "val.token_accuracy");
  EXPECT_EQ(killed->status, "failed");
  EXPECT_CONTAINS(killed->message, "signal 9");
  EXPECT_EQ(read_cell_result((out / plan.cells[3].dir / "summary.json").string(), "x.y")->status, "diverged");
  const YAML::Node m = manifest(out);
  EXPECT_EQ(m["cells"][1]["status"].as<std::string>(), "failed");
  EXPECT_EQ(m["cells"][3]["status"].as<std::string>(), "diverged");
  EXPECT_EQ(m["cells"][0]["state"].as<std::string>(), "finished");
}

TEST(SweepRunner, StopsWhenTheFirstCellsAllFail) {
  const Plan plan = plan_of("grid: {train.seed: [0, 1, 2, 3, 4, 5, 6, 7]}\n");
  const fs::path out = fresh("stop_failures");
  FakeLauncher launcher(plan);
  launcher.outcome = [](const Cell&) { return Outcome{2, 0, "", std::nullopt, "statebench: error: broken\n"}; };
  RunnerOptions opt = options(out);
  opt.stop_after_initial_failures = 3;
  const SweepResult r = run_sweep(plan, launcher, opt);
  EXPECT_TRUE(r.interrupted);
  EXPECT_CONTAINS(r.stopped_because, "broken");
  EXPECT_EQ(r.counts.failed, 3u);
  EXPECT_EQ(launcher.signalled, SIGTERM);  // the cell still running is stopped, left unfinished
  EXPECT_EQ(r.counts.pending, 5u);
  // One success first: failures are then results, the sweep goes on.
  const fs::path out2 = fresh("stop_failures_ok");
  FakeLauncher l2(plan);
  l2.outcome = [](const Cell& c) { return c.label() == "seed=0" ? Outcome{} : Outcome{2, 0, "", std::nullopt, "x\n"}; };
  opt.out_dir = out2.string();
  const SweepResult r2 = run_sweep(plan, l2, opt);
  EXPECT_FALSE(r2.interrupted);
  EXPECT_EQ(r2.counts.failed, 7u);
}

TEST(SweepRunner, InterruptThenResumeNeverRecordsACellTwice) {
  const Plan plan = plan_of("grid: {train.seed: [0, 1, 2, 3, 4, 5]}\n");
  const fs::path out = fresh("resume");
  std::map<std::string, int> written;
  std::atomic<bool> stop{false};
  {
    FakeLauncher launcher(plan);
    launcher.summaries_written = &written;
    int waits = 0;
    launcher.before_wait = [&] {
      if (++waits == 2) stop = true;  // as the second cell ends, while two more run
      // the running cells left a checkpoint behind
      for (const auto& spec : launcher.started) write_file_atomic((fs::path(spec.dir) / "checkpoint.bin").string(), "ck");
    };
    RunnerOptions opt = options(out, 3);
    opt.interrupt = &stop;
    const SweepResult r = run_sweep(plan, launcher, opt);
    EXPECT_TRUE(r.interrupted);
    EXPECT_EQ(launcher.signalled, SIGTERM);
    EXPECT_EQ(r.counts.finished, 2u);
    EXPECT_EQ(r.counts.pending, 4u);
    EXPECT_EQ(r.counts.failed, 0u);  // stopped cells are unfinished, not failed
    EXPECT_FALSE(manifest(out)["complete"].as<bool>());
  }
  std::set<std::string> finished_first;
  for (const auto& c : plan.cells)
    if (has_summary(out, c)) finished_first.insert(c.label());
  ASSERT_EQ(finished_first.size(), 2u);

  stop = false;
  FakeLauncher again(plan);
  again.summaries_written = &written;
  const SweepResult r2 = run_sweep(plan, again, options(out));
  EXPECT_FALSE(r2.interrupted);
  EXPECT_EQ(r2.counts.reused, 2u);
  EXPECT_EQ(r2.counts.finished, 6u);
  for (const auto& l : again.started_labels()) EXPECT_EQ(finished_first.count(l), 0u) << l << " ran again";
  EXPECT_EQ(again.started.size(), 4u);
  size_t resumed = 0;
  for (const auto& spec : again.started) resumed += spec.args.back() == "--resume";
  EXPECT_EQ(resumed, 2u);  // the two interrupted while running had a checkpoint
  for (const auto& c : plan.cells) EXPECT_EQ(written[c.id], 1) << c.id;
  EXPECT_TRUE(manifest(out)["complete"].as<bool>());

  // A third run finds everything finished and starts nothing.
  FakeLauncher idle(plan);
  EXPECT_EQ(run_sweep(plan, idle, options(out)).counts.reused, 6u);
  EXPECT_TRUE(idle.started.empty());
}

TEST(SweepRunner, FailedCellsAreRetriedByTheNextSweep) {
  const Plan plan = plan_of("grid: {train.seed: [0, 1]}\n");
  const fs::path out = fresh("retry");
  FakeLauncher first(plan);
  first.outcome = [](const Cell& c) { return c.label() == "seed=1" ? Outcome{3, 0, "", std::nullopt, "oops\n"} : Outcome{}; };
  run_sweep(plan, first, options(out));
  FakeLauncher second(plan);
  const SweepResult r = run_sweep(plan, second, options(out));
  EXPECT_EQ(second.started_labels(), std::set<std::string>{"seed=1"});
  EXPECT_EQ(r.counts.failed, 0u);
  EXPECT_EQ(read_cell_result((out / plan.cells[1].dir / "summary.json").string(), "v.a")->status, "completed");
  EXPECT_EQ(read_cell_result((out / plan.cells[1].dir / "summary.failed.json").string(), "v.a")->status, "failed");
}

TEST(SweepRunner, ALockedCellIsLeftToItsOwnerAndItsResultReused) {
  const Plan plan = plan_of("grid: {train.seed: [0, 1]}\n");
  const fs::path out = fresh("locked");
  const fs::path dir = out / plan.cells[0].dir;
  fs::create_directories(dir);
  // Another process (here: another open file description) runs cell 0.
  int fd = ::open((dir / "lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  FakeLauncher launcher(plan);
  int waits = 0;
  launcher.before_wait = [&] {
    if (++waits == 5 && fd >= 0) {  // the other run finishes: summary first, then the lock goes
      write_file_atomic((dir / "summary.json").string(), R"({"status": "completed", "eval": {}})");
      ::close(fd);
      fd = -1;
    }
  };
  const SweepResult r = run_sweep(plan, launcher, options(out));
  EXPECT_EQ(launcher.started_labels(), std::set<std::string>{"seed=1"});
  EXPECT_EQ(r.counts.finished, 2u);
  EXPECT_EQ(r.counts.reused, 1u);
  EXPECT_GE(waits, 5);
}

TEST(SweepRunner, RefusesASecondSweepAndChangedConfigs) {
  const Plan plan = plan_of("grid: {train.seed: [0, 1]}\n");
  const fs::path out = fresh("refuse");
  fs::create_directories(out);
  {
    const int fd = ::open((out / "sweep.lock").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    FakeLauncher launcher(plan);
    try {
      run_sweep(plan, launcher, options(out));
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_CONTAINS(e.what(), "another statebench sweep is running");
    }
    ::close(fd);
  }
  // A cell directory whose config.yaml (written by train) differs from the planned config.
  TrainConfig other = plan.cells[1].config;
  other.train.steps = 999;
  fs::create_directories(out / plan.cells[1].dir);
  write_file_atomic((out / plan.cells[1].dir / "config.yaml").string(), to_yaml(other));
  FakeLauncher launcher(plan);
  EXPECT_THROW(run_sweep(plan, launcher, options(out)), Error);
  EXPECT_TRUE(launcher.started.empty());
  // The same config but another device / thread count is fine (not part of the fingerprint).
  other = plan.cells[1].config;
  other.train.threads = 7;
  write_file_atomic((out / plan.cells[1].dir / "config.yaml").string(), to_yaml(other));
  EXPECT_EQ(run_sweep(plan, launcher, options(out)).counts.finished, 2u);
  // A directory that holds another study.
  Plan renamed = plan;
  renamed.study.name = "other";
  EXPECT_THROW(run_sweep(renamed, launcher, options(out)), Error);
}

TEST(SweepRunner, MinDepthEndToEnd) {
  const Plan plan = plan_of(
      "grid:\n  model.attention: [path, rope]\n  model.n_layers: [1, 2, 3]\n  train.seed: [0, 1]\n"
      "protocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 0.9, best_over: [train.seed]}\n");
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
  FakeLauncher again(plan);
  again.outcome = outcome;
  const SweepResult r2 = run_sweep(plan, again, options(out, 4));
  EXPECT_TRUE(again.started.empty());
  EXPECT_EQ(r2.counts.reused, 6u);
  EXPECT_EQ(r2.counts.skipped, 6u);
}

TEST(SweepRunner, MaxLrRunsAllAndRecordsTheProtocol) {
  const Plan plan = plan_of("grid: {optim.lr: [1e-3, 3e-3, 1e-2], train.seed: [0, 1]}\nprotocol: max_lr\n"
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
  FakeLauncher again(plan);
  again.outcome = outcome;
  const SweepResult r2 = run_sweep(plan, again, options(out, 4));
  EXPECT_TRUE(again.started.empty());
  EXPECT_EQ(r2.counts.skipped, 2u);
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

}  // namespace
}  // namespace sb::sweep
