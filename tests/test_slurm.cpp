// test_slurm.cpp: `statebench sweep --launcher slurm` against a real Slurm, the single-node one
// scripts/slurm-local.sh starts (CI starts it in .ci/run; elsewhere these tests skip with a
// message). End to end through sbatch: a plugin task's study (every cell completed exactly once,
// provenance with the Slurm ids and the plugin); a task cancelled with scancel, reported by --status
// and resumed from its checkpoint by the re-run; min_depth submitted stage by stage by the follow-up job; bad input
// (no sbatch on PATH, an unknown partition, a rejected submission): one line, exit 2, nothing done.
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "cli_run.hpp"
#include "sweep/slurm.hpp"
#include "test_util.hpp"
#include "train/run_summary.hpp"

namespace sb::test {
namespace {

using Clock = std::chrono::steady_clock;

// Why the tests cannot run here ("" when they can): only the local test cluster takes their jobs.
std::string slurm_unavailable() {
  static const std::string why = []() -> std::string {
    for (const char* p : {"sbatch", "squeue", "scancel", "scontrol"})
      if (sweep::find_on_path(p).empty())
        return std::string("Slurm's client commands are not installed (as root: bash scripts/slurm-local.sh start)");
    try {
      // A running slurmctld answers within milliseconds; without one scontrol retries for ~9 s.
      const auto r = sweep::run_program({"scontrol", "show", "config"}, 3);
      if (r.exit_code != 0) return "slurmctld does not answer (as root: bash scripts/slurm-local.sh start)";
      std::string cluster;
      for (const auto& line : lines_of(r.out))
        if (line.rfind("ClusterName", 0) == 0) cluster = line.substr(line.find('=') + 1);
      cluster.erase(0, cluster.find_first_not_of(' '));
      if (cluster != "statebench")
        return "Slurm cluster '" + cluster + "' is not the local test cluster of scripts/slurm-local.sh: no jobs sent to it";
    } catch (const Error& e) {
      return std::string("scontrol: ") + e.what();
    }
    return std::string();
  }();
  return why;
}

#define SKIP_WITHOUT_SLURM()                                    \
  do {                                                          \
    if (const std::string why = slurm_unavailable(); !why.empty()) \
      GTEST_SKIP() << "no Slurm: " << why;                      \
  } while (0)

// The CLI, killed (and the test failed) when it runs longer than `seconds`.
CliResult run_cli_within(const std::vector<std::string>& args, double seconds) {
  const fs::path out = capture_dir() / "slurm_stdout", err = capture_dir() / "slurm_stderr";
  const pid_t pid = spawn_cli(args, out, err);
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  CliResult r;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "statebench " << show(args) << "ran longer than " << seconds << " s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out.string());
  r.err = read_file(err.string());
  return r;
}

bool wait_until(const std::function<bool()>& ready, double seconds = 60) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Stand-in for `statebench train` (min_depth, bad input): records start/end in OUT/runs.txt, sleeps,
// writes a summary whose accuracy is 0.5 for model.n_layers=1 and 0.95 otherwise.
const char* kFakeTrain = R"(#!/bin/sh
[ "$1" = train ] || exit 99
out=""; prev=""; acc=0.95
for a in "$@"; do
  if [ "$prev" = "--out" ]; then out="$a"; fi
  if [ "$a" = "model.n_layers=1" ]; then acc=0.5; fi
  prev="$a"
done
echo "start $$" >> "$out/runs.txt"
sleep "${SB_FAKE_TRAIN_SECONDS:-0.2}"
printf '{"status": "completed", "message": "", "wall_seconds": 1, "eval": {"val": {"token_accuracy": %s}}}\n' $acc > "$out/summary.json.tmp"
mv "$out/summary.json.tmp" "$out/summary.json"
echo "end $$" >> "$out/runs.txt"
)";

struct Scratch {
  fs::path dir, study, out, fake;
};

Scratch setup(const std::string& name, const std::string& body) {
  Scratch s;
  s.dir = fresh_dir("slurm_" + name);
  s.study = s.dir / "study.yaml";
  s.out = s.dir / "out";
  s.fake = s.dir / "fake_train.sh";
  write_file_atomic(s.study.string(), "name: " + name + "\n" + body);
  write_file_atomic(s.fake.string(), kFakeTrain);
  fs::permissions(s.fake, fs::perms::owner_all);
  return s;
}

std::vector<fs::path> cells_of(const Scratch& s) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(s.out / "cells")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Slurm, PluginStudyRunsEveryCellExactlyOnceThroughSbatch) {
  SKIP_WITHOUT_SLURM();
  const Scratch s = setup("plugin_e2e",
                          "config:\n"
                          "  task: {name: modular_counter, params: {length: 8, modulus: 3}, eval: [{split: val}]}\n"
                          "  model: {d_model: 16, n_heads: 2, n_layers: 1}\n"
                          "  train: {steps: 6, batch_size: 4, eval_examples: 8, eval_every: 0}\n"
                          "grid: {train.seed: [0, 1, 2]}\n");
  const std::vector<std::string> args = {"--plugin", SB_EXAMPLE_PLUGIN, "sweep", s.study.string(), "--out",
                                         s.out.string(), "--launcher", "slurm", "--max-running", "2"};
  std::vector<std::string> wait = args;
  wait.insert(wait.end(), {"--wait", "--wait-interval", "0.2"});
  const CliResult r = run_cli_within(wait, 240);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_CONTAINS(r.out, "submitted job array ");
  EXPECT_CONTAINS(r.out, "3/3 done, 0 running, 0 queued, 0 failed");
  EXPECT_CONTAINS(r.out, "complete: statebench table ");

  const sweep::SlurmJobs jobs = sweep::read_slurm_jobs(s.out.string());
  ASSERT_EQ(jobs.jobs.size(), 1u);
  const std::string job = jobs.jobs[0].job_id;
  ASSERT_EQ(jobs.jobs[0].cells.size(), 3u);
  const std::string script = read_file((s.out / "slurm" / "submit-1.sh").string());
  EXPECT_CONTAINS(script, "#SBATCH --array=0-2%2\n");
  std::set<int64_t> tasks;
  for (const auto& cell : cells_of(s)) {
    const RunSummary summary = read_run_summary((cell / "summary.json").string());
    EXPECT_EQ(summary.status, "completed") << cell;
    EXPECT_EQ(summary.task.value_or(""), "modular_counter");
    ASSERT_TRUE(summary.provenance && summary.provenance->slurm) << cell;
    const SlurmJob& ids = *summary.provenance->slurm;
    EXPECT_EQ(ids.array_job_id, job);
    ASSERT_TRUE(ids.array_task_id.has_value());
    tasks.insert(*ids.array_task_id);
    EXPECT_EQ(jobs.jobs[0].cells.at(static_cast<size_t>(*ids.array_task_id)), cell.filename().string());
    ASSERT_EQ(summary.provenance->plugins.size(), 1u);
    EXPECT_EQ(summary.provenance->plugins[0], fs::absolute(SB_EXAMPLE_PLUGIN).lexically_normal().string());
    // One `statebench train` per cell: the launcher heads log.txt once per start.
    EXPECT_EQ(count_of(read_file((cell / "log.txt").string()), "statebench sweep runs:"), 1u) << cell;
    EXPECT_FALSE(fs::exists(cell / "summary.failed.json")) << cell;
  }
  EXPECT_EQ(tasks, (std::set<int64_t>{0, 1, 2}));
  const YAML::Node m = YAML::Load(read_file((s.out / "manifest.json").string()));
  EXPECT_TRUE(m["complete"].as<bool>());

  // Again: nothing is submitted; --status reports every cell done with its task.
  const CliResult again = run_cli_within(args, 60);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_CONTAINS(again.out, "nothing to submit: every cell is done");
  EXPECT_EQ(sweep::read_slurm_jobs(s.out.string()).jobs.size(), 1u);
  const CliResult status = run_cli_within({"--plugin", SB_EXAMPLE_PLUGIN, "sweep", s.study.string(), "--out",
                                           s.out.string(), "--status"}, 60);
  ASSERT_EQ(status.rc, 0) << status.err;
  EXPECT_CONTAINS(status.out, "3/3 done, 0 running, 0 queued, 0 failed");
  EXPECT_CONTAINS(status.out, "job " + job + "_1: completed");
}

TEST(Slurm, CancelledTaskIsReportedAndResumedByTheRerun) {
  SKIP_WITHOUT_SLURM();
  const Scratch s = setup("scancel",
                          "config:\n"
                          "  task: {name: parity, params: {length: 8}, eval: [{split: val}]}\n"
                          "  model: {d_model: 16, n_heads: 2, n_layers: 1}\n"
                          "  train: {steps: 6000, batch_size: 4, eval_examples: 8, eval_every: 0, checkpoint_every: 200}\n"
                          "grid: {train.seed: [0, 1, 2]}\n");
  const std::vector<std::string> args = {"sweep", s.study.string(), "--out", s.out.string(), "--launcher", "slurm"};
  const CliResult submitted = run_cli_within(args, 60);
  ASSERT_EQ(submitted.rc, 0) << submitted.err << submitted.out;
  const sweep::SlurmJobs jobs = sweep::read_slurm_jobs(s.out.string());
  ASSERT_EQ(jobs.jobs.size(), 1u);
  const std::string job = jobs.jobs[0].job_id;
  const fs::path victim = s.out / "cells" / jobs.jobs[0].cells[1];
  // Cancel array task 1 once its run has written a checkpoint (step 200 of 6000).
  ASSERT_TRUE(wait_until([&] { return fs::exists(victim / "checkpoint.bin"); }, 120)) << "array task 1 never checkpointed";
  const auto cancel = sweep::run_program({"scancel", job + "_1"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;

  const std::vector<std::string> status_args = {"sweep", s.study.string(), "--out", s.out.string(), "--status"};
  CliResult status;
  ASSERT_TRUE(wait_until(
      [&] {
        status = run_cli_within(status_args, 120);
        return status.out.find("2/3 done, 0 running, 0 queued, 1 failed") != std::string::npos;
      },
      180))
      << status.out << status.err << "squeue:\n"
      << sweep::run_program({"squeue", "-h", "-r", "-t", "all", "-j", job}).out;
  EXPECT_CONTAINS(status.out, "failed        " + jobs.jobs[0].cells[1] + "  job " + job + "_1: stopped by Slurm");
  EXPECT_CONTAINS(status.out, "Slurm log: " + (s.out / "slurm" / "logs" / (job + "_1.out")).string());
  EXPECT_CONTAINS(status.out, "1 cell to submit");
  EXPECT_FALSE(fs::exists(victim / "summary.json") &&
               read_run_summary((victim / "summary.json").string()).status != "failed");

  std::vector<std::string> rerun = args;
  rerun.insert(rerun.end(), {"--wait", "--wait-interval", "0.2"});
  const CliResult again = run_cli_within(rerun, 180);
  ASSERT_EQ(again.rc, 0) << again.err << again.out;
  EXPECT_CONTAINS(again.out, "1 cell (array task 0)");
  EXPECT_CONTAINS(again.out, "3/3 done");
  const sweep::SlurmJobs after = sweep::read_slurm_jobs(s.out.string());
  ASSERT_EQ(after.jobs.size(), 2u);
  EXPECT_EQ(after.jobs[1].cells, std::vector<std::string>{jobs.jobs[0].cells[1]});  // exactly the unfinished cell
  EXPECT_CONTAINS(read_file(sweep::task_log_path(s.out.string(), after.jobs[1].job_id, 0)), "resuming: ");
  for (const auto& cell : cells_of(s)) {
    const std::string log = read_file((cell / "log.txt").string());
    EXPECT_EQ(count_of(log, "statebench sweep runs:"), cell == victim ? 2u : 1u) << cell;
    if (cell == victim) EXPECT_EQ(count_of(log, " --resume\n"), 1u) << log;  // the re-run resumed its checkpoint
    const RunSummary summary = read_run_summary((cell / "summary.json").string());
    EXPECT_EQ(summary.status, "completed") << cell;
    EXPECT_EQ(summary.steps.value_or(0), 6000);
  }
  const RunSummary cancelled = read_run_summary((victim / "summary.failed.json").string());  // kept aside
  EXPECT_CONTAINS(cancelled.message, "stopped by Slurm");
  ASSERT_TRUE(cancelled.provenance && cancelled.provenance->slurm);
  EXPECT_EQ(cancelled.provenance->slurm->array_job_id, job);
}

TEST(Slurm, MinDepthIsSubmittedStageByStageByTheFollowUpJob) {
  SKIP_WITHOUT_SLURM();
  const Scratch s = setup("min_depth", "config:\n  task: {name: parity, params: {length: 8}}\n  train: {steps: 10}\n"
                                       "grid: {model.n_layers: [1, 2, 3], train.seed: [0, 1]}\nprotocol: min_depth\n"
                                       "min_depth: {axis: model.n_layers, threshold: 0.9, best_over: [train.seed]}\n");
  const CliResult r = run_cli_within({"sweep", s.study.string(), "--out", s.out.string(), "--launcher", "slurm",
                                      "--train-exe", s.fake.string(), "--wait", "--wait-interval", "0.2"},
                                     180);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_CONTAINS(r.out, "4/6 done, 0 running, 0 queued, 0 failed, 2 skipped");
  const sweep::SlurmJobs jobs = sweep::read_slurm_jobs(s.out.string());
  std::vector<std::vector<std::string>> arrays;
  for (const auto& j : jobs.jobs)
    if (j.kind == "array") arrays.push_back(j.cells);
  ASSERT_EQ(arrays.size(), 2u) << r.out;  // depth 1, then (by the follow-up job) depth 2; depth 3 never
  for (const auto& id : arrays[0]) EXPECT_EQ(id.rfind("n_layers=1,", 0), 0u) << id;
  for (const auto& id : arrays[1]) EXPECT_EQ(id.rfind("n_layers=2,", 0), 0u) << id;
  EXPECT_EQ(arrays[0].size(), 2u);
  EXPECT_EQ(arrays[1].size(), 2u);
  const YAML::Node m = YAML::Load(read_file((s.out / "manifest.json").string()));
  EXPECT_TRUE(m["complete"].as<bool>());
  EXPECT_EQ(m["groups"][0]["min_depth"].as<std::string>(), "2");
  size_t skipped = 0;
  for (const auto& c : m["cells"]) skipped += c["state"].as<std::string>() == "skipped";
  EXPECT_EQ(skipped, 2u);
}

TEST(Slurm, BadInputIsOneLineExitTwoAndNothingDone) {
  SKIP_WITHOUT_SLURM();
  const Scratch s = setup("bad", "config:\n  task: {name: parity, params: {length: 8}}\n  train: {steps: 10}\n"
                                 "grid: {train.seed: [0, 1]}\n");
  auto check = [&](const std::vector<std::string>& extra, const std::string& message) {
    std::vector<std::string> args = {"sweep", s.study.string(), "--out", s.out.string(), "--launcher", "slurm",
                                     "--train-exe", s.fake.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli_within(args, 60);
    EXPECT_EQ(r.rc, 2) << show(args) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_CONTAINS(r.err, "statebench: error: " + message);
    EXPECT_FALSE(fs::exists(s.out / "slurm" / "jobs.json")) << r.err;
    if (fs::exists(s.out / "cells"))
      for (const auto& cell : fs::directory_iterator(s.out / "cells"))
        EXPECT_FALSE(fs::exists(cell.path() / "summary.json")) << cell.path();
  };
  const std::string path = std::getenv("PATH");
  ::setenv("PATH", "/nonexistent", 1);
  check({}, "sbatch is not on PATH");
  ::setenv("PATH", path.c_str(), 1);
  check({"--partition", "no_such_partition"},
        "sbatch rejected the job: Batch job submission failed: Invalid partition name specified (--partition no_such_partition)");
  check({"--mem", "99999999"}, "sbatch rejected the job: ");
  check({"--sbatch-arg=--time=never"}, "sbatch rejected the job: Invalid --time specification");
  // Nothing of ours reached the queue.
  const auto q = sweep::run_program({"squeue", "-h", "-n", "sb-bad", "-o", "%i"});
  EXPECT_EQ(q.out, "");
}

}  // namespace
}  // namespace sb::test
