// test_train_cli.cpp: `statebench train` through the real binary when runs go wrong. A run killed
// at each boundary between its writes (--stop-after: metrics lines, a checkpoint, the summary) or
// stopped by SIGTERM, then resumed, ends with the summary, log and checkpoint of the uninterrupted
// run; a run resumed at its final step (summary lost or unreadable) evaluates again; bad input (a
// refused resume, oversized models or evaluation lengths, an unusable --out) is a one-line error,
// exit 2, and leaves the disk as it was.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include "cli_run.hpp"
#include "io/json.hpp"
#include "test_util.hpp"
#include "train/checkpoint.hpp"

namespace sb::test {
namespace {

// 8 steps, evaluated and checkpointed every 4: boundaries mid-run and at the end.
const char* kTiny = R"(task: {name: flipflop, params: {length: 16}, eval: [{split: val}, {split: dense, length: 32}]}
model: {d_model: 16, n_layers: 1, n_heads: 2, attention: path, path: {rank: 4, block: 4}}
optim: {lr: 0.003, warmup_steps: 2}
train: {steps: 8, batch_size: 4, seed: 3, log_every: 2, eval_every: 4, eval_examples: 16, checkpoint_every: 4, threads: 1}
)";

struct Scratch {
  fs::path dir, config;
};

Scratch setup(const std::string& name) {
  Scratch s{fresh_dir("train_" + name), {}};
  s.config = s.dir / "tiny.yaml";
  write_file_atomic(s.config.string(), kTiny);
  return s;
}

CliResult train(const Scratch& s, const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"train", s.config.string(), "--out", out.string(), "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

// summary.json without what depends on the clock or the command line.
Json stable_summary(const fs::path& run) {
  Json s = parse_json(read_file((run / "summary.json").string()));
  for (const char* k : {"wall_seconds", "tokens_per_second"}) s.erase(k);
  s["provenance"].erase("date");
  s["provenance"].erase("command");
  return s;
}

// metrics.jsonl without the timing fields.
std::vector<Json> stable_metrics(const fs::path& run) {
  std::vector<Json> out;
  for (const std::string& line : lines_of(read_file((run / "metrics.jsonl").string()))) {
    Json j = parse_json(line);
    j.erase("tokens_per_s");
    j.erase("elapsed_s");
    out.push_back(std::move(j));
  }
  return out;
}

// A checkpoint's training state and tensors (params, AdamW m and v): everything but the stored
// config, whose out_dir differs between runs.
std::string checkpoint_state(const fs::path& run) {
  const std::string path = (run / "checkpoint.bin").string(), bytes = read_file(path);
  const CheckpointInfo info = read_checkpoint_info(path);
  const size_t tensors = 3 * static_cast<size_t>(info.num_elements) * info.scalar_bytes;
  std::string state = fmt::format("step {} adam {} stream", info.state.step, info.optimizer_steps);
  for (const uint64_t w : info.state.stream) state += fmt::format(" {:x}", w);
  return state + "\n" + bytes.substr(bytes.size() - 8 - tensors, tensors);
}

void expect_one_line_error(const CliResult& r, const std::string& needle, const std::string& what) {
  EXPECT_EQ(r.rc, 2) << what << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("statebench: error: ", 0), 0u) << what << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\n" << r.err;
  EXPECT_CONTAINS(r.err, needle);
}

TEST(TrainCli, KillAtEachWriteBoundaryThenResumeEqualsTheUninterruptedRun) {
  const Scratch s = setup("boundaries");
  const fs::path whole = s.dir / "whole";
  ASSERT_EQ(train(s, whole).rc, 0);
  const Json expected = stable_summary(whole);
  ASSERT_EQ(expected["eval"].size(), 2u);
  const auto expected_metrics = stable_metrics(whole);
  // Mid-run: after step 4's log lines (before its checkpoint), after its checkpoint; at the end:
  // after step 8's lines, after the final checkpoint (before the summary), while writing the summary.
  struct Boundary {
    std::string stop;
    int64_t checkpoint, logged;  // the checkpoint's step (0: none) and the last logged step when killed
  };
  for (const Boundary& b : std::vector<Boundary>{
           {"metrics:4", 0, 4}, {"checkpoint:4", 4, 4}, {"metrics:8", 4, 8}, {"checkpoint:8", 8, 8}, {"summary", 8, 8}}) {
    const std::string& stop = b.stop;
    const fs::path run = s.dir / ("stop_" + stop.substr(0, stop.find(':')) + stop.substr(stop.find(':') + 1));
    const CliResult killed = train(s, run, {"--stop-after", stop});
    EXPECT_EQ(killed.rc, 128 + SIGKILL) << stop << ": " << killed.err;
    EXPECT_FALSE(fs::exists(run / "summary.json")) << stop;
    EXPECT_EQ(fs::exists(run / "checkpoint.bin") ? read_checkpoint_info((run / "checkpoint.bin").string()).state.step : 0,
              b.checkpoint) << stop;
    EXPECT_EQ(parse_json(lines_of(read_file((run / "metrics.jsonl").string())).back())["step"], b.logged) << stop;
    const CliResult resumed = train(s, run, {"--resume"});
    ASSERT_EQ(resumed.rc, 0) << stop << ": " << resumed.err;
    EXPECT_EQ(stable_summary(run), expected) << stop;
    EXPECT_EQ(stable_metrics(run), expected_metrics) << stop;
    EXPECT_TRUE(checkpoint_state(run) == checkpoint_state(whole)) << stop;
  }
  // An early stop (every accuracy >= 1e-9 at step 4) killed after its checkpoint stops again at 4.
  const fs::path early = s.dir / "early", early_killed = s.dir / "early_killed";
  ASSERT_EQ(train(s, early, {"--set", "train.target_accuracy=1e-9"}).rc, 0);
  EXPECT_EQ(train(s, early_killed, {"--set", "train.target_accuracy=1e-9", "--stop-after", "checkpoint:4"}).rc, 128 + SIGKILL);
  ASSERT_EQ(train(s, early_killed, {"--set", "train.target_accuracy=1e-9", "--resume"}).rc, 0);
  EXPECT_EQ(stable_summary(early_killed), stable_summary(early));
  EXPECT_EQ(stable_summary(early)["status"], "early_stopped");
  EXPECT_EQ(stable_summary(early)["steps"], 4);
  // The aid is for tests: a step that is not a checkpoint step is refused.
  expect_one_line_error(train(s, s.dir / "bad_stop", {"--stop-after", "checkpoint:3"}), "--stop-after", "checkpoint:3");
  EXPECT_FALSE(fs::exists(s.dir / "bad_stop"));
}

// The checkpoint of the last step is on disk and summary.json is not (deleted, lost to a kill
// between the two writes) or cannot be read: --resume evaluates again and writes the summary an
// uninterrupted run writes, final loss included.
TEST(TrainCli, ResumeAtTheFinalStepWritesTheFinalEvaluation) {
  const Scratch s = setup("final");
  const fs::path run = s.dir / "run";
  ASSERT_EQ(train(s, run).rc, 0);
  const Json expected = stable_summary(run);
  EXPECT_TRUE(std::isfinite(expected["final_train_loss"].get<double>()));
  fs::remove(run / "summary.json");
  CliResult r = train(s, run, {"--resume"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(stable_summary(run), expected);
  write_file_atomic((run / "summary.json").string(), read_file((run / "summary.json").string()).substr(0, 40));
  EXPECT_EQ(train(s, run).rc, 2);  // without --resume a run that is there is refused
  r = train(s, run, {"--resume"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(stable_summary(run), expected);
  r = train(s, run, {"--resume"});  // finished: nothing to do
  EXPECT_EQ(r.rc, 0);
  EXPECT_CONTAINS(r.out, "already finished");
}

// SIGTERM (a sweep stopping its cells, Slurm, kill) ends a run after the step in progress: a
// one-line error, exit 2, the checkpoint of the last logged step and no summary; --resume then
// ends as the uninterrupted run.
TEST(TrainCli, SigtermStopsAfterAStepWithItsCheckpoint) {
  const Scratch s = setup("sigterm");
  const std::vector<std::string> longer{"--set", "train.steps=3000",      "--set", "train.log_every=1",
                                        "--set", "train.eval_every=1000", "--set", "train.checkpoint_every=0"};
  const fs::path whole = s.dir / "whole", run = s.dir / "run", metrics = run / "metrics.jsonl";
  std::vector<std::string> args{"train", s.config.string(), "--out", run.string(), "-q"};
  args.insert(args.end(), longer.begin(), longer.end());
  const pid_t pid = spawn_cli(args, capture_dir() / "sigterm_out", capture_dir() / "sigterm_err");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!fs::exists(metrics) || fs::file_size(metrics) == 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit_code(pid), 2);
  const std::string err = read_file((capture_dir() / "sigterm_err").string());
  EXPECT_EQ(err.rfind("statebench: error: interrupted after step ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(fs::exists(run / "summary.json"));
  ASSERT_TRUE(fs::exists(run / "checkpoint.bin"));
  const int64_t at = read_checkpoint_info((run / "checkpoint.bin").string()).state.step;
  EXPECT_GT(at, 0);
  EXPECT_LT(at, 3000);
  EXPECT_EQ(parse_json(lines_of(read_file(metrics.string())).back())["step"], at);
  std::vector<std::string> resume = longer;
  resume.push_back("--resume");
  ASSERT_EQ(train(s, whole, longer).rc, 0);
  const CliResult resumed = train(s, run, resume);
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(stable_summary(run), stable_summary(whole));
  EXPECT_EQ(stable_metrics(run), stable_metrics(whole));
}

// --resume with a config the checkpoint was not written for: refused before anything is written.
TEST(TrainCli, RefusedResumeWritesNothing) {
  const Scratch s = setup("refused");
  const fs::path run = s.dir / "run";
  ASSERT_EQ(train(s, run, {"--stop-after", "checkpoint:4"}).rc, 128 + SIGKILL);
  const auto before = dir_contents(run);
  expect_one_line_error(train(s, run, {"--resume", "--set", "optim.lr=0.01"}), "written for a different configuration",
                        "lr changed");
  EXPECT_EQ(dir_contents(run), before);
}

TEST(TrainCli, OversizedRunsAreRefusedBeforeAllocating) {
  const Scratch s = setup("oversized");
  double ram = 0;  // MemTotal in bytes
  std::ifstream meminfo("/proc/meminfo");
  for (std::string name; meminfo >> name;) {
    double kb = 0;
    std::string unit;
    meminfo >> kb >> unit;
    if (name == "MemTotal:") ram = kb * 1024;
  }
  ASSERT_GT(ram, 0);
  // Just above RAM: a 2-layer model whose parameters, gradients and AdamW state alone (16 bytes
  // per parameter, 12 d_model^2 per layer) take 1.1 x RAM.
  const int64_t d = static_cast<int64_t>(std::sqrt(1.1 * ram / 16 / 12 / 2)) / 64 * 64;
  struct Case {
    std::vector<std::string> sets;
    std::string key;
  };
  const std::vector<Case> cases = {
      {{"model.d_model=1000000", "model.n_heads=1000"}, "model.d_model = 1000000"},
      {{fmt::format("model.d_model={}", d), "model.n_heads=1", "model.n_layers=2"}, fmt::format("model.d_model = {}", d)},
      {{"task.eval=[{split: val, length: 1073741824}]"}, "task.eval[0].length = 1073741824"},
      {{"train.batch_size=1000000", "task.params.length=100000"}, "train.batch_size = 1000000"},
  };
  for (const Case& c : cases)
    for (const bool dry : {false, true}) {
      std::vector<std::string> extra;
      for (const auto& kv : c.sets) extra.insert(extra.end(), {"--set", kv});
      if (dry) extra.push_back("--dry-run");
      const fs::path run = s.dir / "run";
      const CliResult r = train(s, run, extra);
      expect_one_line_error(r, c.key, c.key);
      EXPECT_CONTAINS(r.err, "the run needs an estimated");
      EXPECT_FALSE(fs::exists(run)) << c.key;
    }
  // A small run's dry run states its estimate.
  const CliResult dry = train(s, s.dir / "dry", {"--dry-run"});
  ASSERT_EQ(dry.rc, 0) << dry.err;
  EXPECT_CONTAINS(dry.out, "# memory: about ");
}

TEST(TrainCli, UnusableOutIsOneLineNamingThePath) {
  const Scratch s = setup("out");
  const fs::path file = s.dir / "a_file";
  write_file_atomic(file.string(), "x\n");
  expect_one_line_error(train(s, file), file.string(), "a file");
  expect_one_line_error(train(s, file / "run"), file.string(), "below a file");
  expect_one_line_error(train(s, "/proc/statebench_run"), "/proc/statebench_run", "/proc");
  if (::geteuid() != 0) {
    fs::create_directory(s.dir / "ro");
    fs::permissions(s.dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    expect_one_line_error(train(s, s.dir / "ro" / "run"), (s.dir / "ro" / "run").string(), "read-only");
    EXPECT_TRUE(fs::is_empty(s.dir / "ro"));
    fs::permissions(s.dir / "ro", fs::perms::owner_all);
  }
  EXPECT_EQ(read_file(file.string()), "x\n");
}

}  // namespace
}  // namespace sb::test
