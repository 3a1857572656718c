// test_sweep_runner.cpp: the sweep runner with a fake launcher (no processes): the parallelism
// limit, the child command line, failures recorded and the sweep going on, interrupt + resume
// (finished reused, unfinished rerun with --resume, failed retried, nothing recorded twice),
// per-cell and per-sweep locks. The staged protocols, the manifest and the slots:
// test_sweep_protocols.cpp; the fake launcher: sweep_runner_fixture.hpp.
#include "sweep_runner_fixture.hpp"

namespace sb::sweep {
namespace {

using namespace runner_test;

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

}  // namespace
}  // namespace sb::sweep
