// test_sweep_cli.cpp: the real `statebench sweep` binary as a subprocess. Cells run a stand-in
// for `statebench train` (a shell script given with --train-exe that records start/end, sleeps and
// writes summary.json), so process handling is tested without training: kill -9 of the sweep
// mid-run then resume (orphaned cells are waited for, never run twice), Ctrl-C (children stopped,
// cells resumable), bad studies (one-line errors, exit 2), --dry-run; the parts of the Slurm launcher
// that need no Slurm (--slurm-dry-run, option checks, --status, `sweep-task` on a finished cell).
// Real `statebench train`: kill and resume, a truncated summary redone with its evaluation,
// scripts/reproduce.sh --collect exporting a finished sweep, and the example plugin's task swept
// through --plugin and through a study's `plugins:` (tests/test_slurm.cpp: the same on Slurm).
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli_run.hpp"
#include "test_util.hpp"

namespace sb::test {
namespace {

using Clock = std::chrono::steady_clock;

const char* kFakeTrain = R"(#!/bin/sh
# Stand-in for `statebench train ... --out DIR ...` in sweep tests.
[ "$1" = train ] || exit 99
out=""; prev=""
for a in "$@"; do
  if [ "$prev" = "--out" ]; then out="$a"; fi
  prev="$a"
done
echo "start $$" >> "$out/runs.txt"
sleep "${SB_FAKE_TRAIN_SECONDS:-1}"
printf '{"status": "completed", "message": "", "wall_seconds": 1, "eval": {"val": {"token_accuracy": 0.9}}}\n' > "$out/summary.json.tmp"
mv "$out/summary.json.tmp" "$out/summary.json"
echo "end $$" >> "$out/runs.txt"
)";

struct Scratch {
  fs::path dir, study, out, script;
};

Scratch setup(const std::string& name, const std::string& grid = "grid: {train.seed: [0, 1, 2, 3, 4, 5]}\n") {
  Scratch s;
  s.dir = fresh_dir("sweep_" + name);
  s.study = s.dir / "study.yaml";
  s.out = s.dir / "out";
  s.script = s.dir / "fake_train.sh";
  write_file_atomic(s.study.string(),
                    "name: " + name + "\nconfig:\n  task: {name: parity, params: {length: 8}}\n  train: {steps: 10}\n" + grid);
  write_file_atomic(s.script.string(), kFakeTrain);
  fs::permissions(s.script, fs::perms::owner_all);
  return s;
}

std::vector<std::string> sweep_args(const Scratch& s, const std::string& workers = "2") {
  return {"sweep", s.study.string(), "--out", s.out.string(), "--workers", workers, "--train-exe", s.script.string(),
          "--progress", "plain"};
}

std::vector<fs::path> cell_dirs(const Scratch& s) {
  std::vector<fs::path> out;
  if (!fs::exists(s.out / "cells")) return out;
  for (const auto& e : fs::directory_iterator(s.out / "cells")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> runs_of(const fs::path& cell) {
  return fs::exists(cell / "runs.txt") ? lines_of(read_file((cell / "runs.txt").string())) : std::vector<std::string>{};
}

// Waits (up to 20 s) until `ready` holds; false on timeout.
bool wait_until(const std::function<bool()>& ready) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(SweepCli, KillNineThenResumeRunsEveryCellExactlyOnce) {
  const Scratch s = setup("kill9", "grid: {train.seed: [0, 1, 2, 3, 4]}\n");
  ::setenv("SB_FAKE_TRAIN_SECONDS", "2", 1);
  const fs::path log = capture_dir() / "kill9.out";
  const pid_t pid = spawn_cli(sweep_args(s), log, capture_dir() / "kill9.err");
  // Kill the sweep just after the second wave of cells started (the first two finished): those
  // two have about 2 s left, so they are still running when the sweep is started again.
  const bool mid_run = wait_until([&] {
    size_t finished = 0, running = 0;
    for (const auto& c : cell_dirs(s)) {
      if (fs::exists(c / "summary.json")) ++finished;
      else if (!runs_of(c).empty()) ++running;
    }
    return finished >= 2 && running >= 1;
  });
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGKILL);
  ASSERT_TRUE(mid_run) << read_file(log.string());

  const CliResult again = run_cli(sweep_args(s));  // the orphaned cells are still running now
  ASSERT_EQ(again.rc, 0) << again.err << again.out;
  EXPECT_CONTAINS(again.out, "another process holds its lock");
  EXPECT_CONTAINS(again.out, "run by another process");
  EXPECT_CONTAINS(again.out, "make the table: statebench table " + s.out.string());
  EXPECT_CONTAINS(again.out, "] done seed=");
  const auto cells = cell_dirs(s);
  ASSERT_EQ(cells.size(), 5u);
  for (const auto& c : cells) {
    EXPECT_TRUE(fs::exists(c / "summary.json")) << c;
    EXPECT_FALSE(fs::exists(c / "summary.failed.json")) << c;
    const auto runs = runs_of(c);
    ASSERT_EQ(runs.size(), 2u) << c << ": " << read_file((c / "runs.txt").string());
    EXPECT_EQ(runs[0].substr(0, 6), "start ");
    EXPECT_EQ(runs[1], "end " + runs[0].substr(6));  // one run, start to end, never two at once
  }
  const YAML::Node m = YAML::Load(read_file((s.out / "manifest.json").string()));
  EXPECT_TRUE(m["complete"].as<bool>());
  ASSERT_EQ(m["cells"].size(), 5u);
  for (const auto& c : m["cells"]) {
    EXPECT_EQ(c["state"].as<std::string>(), "finished");
    EXPECT_TRUE(fs::exists(s.out / c["dir"].as<std::string>() / "summary.json"));
  }
  EXPECT_EQ(read_file((s.out / "study.yaml").string()), read_file(s.study.string()));
}

TEST(SweepCli, CtrlCStopsTheChildrenAndTheCellsResume) {
  const Scratch s = setup("sigint", "grid: {train.seed: [0, 1, 2]}\n");
  ::setenv("SB_FAKE_TRAIN_SECONDS", "30", 1);
  const pid_t pid = spawn_cli(sweep_args(s), capture_dir() / "sigint.out", capture_dir() / "sigint.err");
  std::vector<fs::path> started;
  ASSERT_TRUE(wait_until([&] {
    started.clear();
    for (const auto& c : cell_dirs(s))
      if (!runs_of(c).empty()) started.push_back(c);
    return started.size() == 2;
  }));
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit_code(pid), 2);
  EXPECT_CONTAINS(read_file((capture_dir() / "sigint.err").string()), "interrupted");
  for (const auto& c : started) {
    EXPECT_FALSE(fs::exists(c / "summary.json")) << c;  // unfinished, not failed
    const pid_t child = static_cast<pid_t>(std::stol(runs_of(c)[0].substr(6)));
    EXPECT_TRUE(wait_until([&] { return ::kill(child, 0) != 0 && errno == ESRCH; })) << "cell process " << child << " lives on";
  }
  const YAML::Node m = YAML::Load(read_file((s.out / "manifest.json").string()));
  EXPECT_FALSE(m["complete"].as<bool>());
  EXPECT_EQ(m["counts"]["running"].as<int>(), 0);

  ::setenv("SB_FAKE_TRAIN_SECONDS", "0.1", 1);
  const CliResult again = run_cli(sweep_args(s));
  ASSERT_EQ(again.rc, 0) << again.err;
  for (const auto& c : cell_dirs(s)) EXPECT_TRUE(fs::exists(c / "summary.json")) << c;
  for (const auto& c : started) EXPECT_EQ(runs_of(c).size(), 3u);  // start (stopped), start, end
}

TEST(SweepCli, BadStudiesFailBeforeRunningWithOneLine) {
  const Scratch s = setup("bad");
  const std::string head = "config:\n  task: {name: parity, params: {length: 8}}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + "grid: {model.nlayers: [1, 2]}\n", "grid 'model.nlayers' value '1'"},
      {head + "grid: {}\n", "grid: empty"},
      {head + "grid: {train.seed: [0]}\nprotocol: quickest\n", "unknown protocol 'quickest'"},
      {head + "grid: {model.n_layers: [1, two]}\n", "grid 'model.n_layers' value 'two'"},
      {"base: missing.yaml\ngrid: {train.seed: [0]}\n", "missing.yaml' does not exist"},
      {head + "zip: {train.seed: [0, 1], optim.lr: [0.1]}\n", "zip: lists of unequal length"},
      {head + "grid: {task.params.bogus: [1]}\n", "grid 'task.params.bogus' value '1': task 'parity'"},
      {head + "grid: {task.eval: [[{split: nosuch}]]}\n", "nosuch"},
  };
  for (const auto& [text, want] : cases) {
    write_file_atomic(s.study.string(), text);
    const CliResult r = run_cli(sweep_args(s));
    EXPECT_EQ(r.rc, 2) << text;
    EXPECT_CONTAINS(r.err, "statebench: error: study '" + s.study.string() + "'");
    EXPECT_CONTAINS(r.err, want);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(s.out)) << text;
  }
  write_file_atomic(s.study.string(), head + "grid: {train.seed: [0]}\n");
  const CliResult devices = run_cli({"sweep", s.study.string(), "--devices", "gpu"});
  EXPECT_EQ(devices.rc, 2);
  EXPECT_CONTAINS(devices.err, "'gpu' is not a device");
  const CliResult set = run_cli({"sweep", s.study.string(), "--set", "train.seed=3", "--dry-run"});
  EXPECT_EQ(set.rc, 2);
  EXPECT_CONTAINS(set.err, "is an axis of the study");
  // --out naming a file, or a place where no directory can be made: one line naming it.
  for (const fs::path& out : {s.study, fs::path("/proc/statebench_sweep")}) {
    const CliResult r = run_cli({"sweep", s.study.string(), "--out", out.string(), "--train-exe", s.script.string()});
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_CONTAINS(r.err, "statebench: error: --out '" + out.string() + "'");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(SweepCli, DryRunShowsThePlanAndRunsNothing) {
  const Scratch s = setup("dry", "grid: {model.attention: [path, rope], model.n_layers: [1, 2]}\nprotocol: min_depth\n"
                               "min_depth: {axis: model.n_layers, threshold: 0.9}\n");
  const CliResult r = run_cli({"sweep", s.study.string(), "--out", s.out.string(), "--dry-run", "--workers", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_CONTAINS(r.out, "protocol min_depth, 4 cells");
  EXPECT_CONTAINS(r.out, "2 groups; depth by depth, 2 to 4 cells");
  EXPECT_CONTAINS(r.out, "attention=rope,n_layers=2-");
  EXPECT_CONTAINS(r.out, "[new]");
  EXPECT_CONTAINS(r.out, "ESTIMATE");
  EXPECT_CONTAINS(r.out, "nothing was run");
  EXPECT_FALSE(fs::exists(s.out));
}

// A cell run with another config (the base config or `set` changed after it ran): the dry run says
// so, and the sweep refuses to start (one line, exit 2) rather than mixing two protocols.
TEST(SweepCli, CellsRunWithAnotherConfigAreShownAndRefused) {
  const Scratch s = setup("other", "grid: {train.seed: [0, 1]}\n");
  ASSERT_EQ(run_cli(sweep_args(s)).rc, 0);
  const auto cells = cell_dirs(s);
  ASSERT_EQ(cells.size(), 2u);
  write_file_atomic((cells[0] / "config.yaml").string(), "task: {name: parity, params: {length: 8}}\ntrain: {steps: 20}\n");
  const CliResult dry = run_cli({"sweep", s.study.string(), "--out", s.out.string(), "--dry-run"});
  ASSERT_EQ(dry.rc, 0) << dry.err;
  EXPECT_CONTAINS(dry.out, cells[0].filename().string() + "  [run with another config: the sweep refuses to start]");
  EXPECT_CONTAINS(dry.out, cells[1].filename().string() + "  [completed");
  EXPECT_CONTAINS(dry.out, "1 cell(s) in '" + s.out.string() + "' were run with another config");
  const CliResult run = run_cli(sweep_args(s));
  EXPECT_EQ(run.rc, 2);
  EXPECT_CONTAINS(run.err, "was run with another config");
}

TEST(SweepCli, RealTrainKillAndResume) {
  const Scratch s = setup("real");
  write_file_atomic(s.study.string(),
                    "name: real\nconfig:\n"
                    "  task: {name: parity, params: {length: 8}}\n"
                    "  model: {d_model: 16, n_heads: 2, n_layers: 1}\n"
                    "  train: {steps: 200, batch_size: 8, eval_every: 50, eval_examples: 64, checkpoint_every: 20, log_every: 10}\n"
                    "grid: {model.attention: [path, rope], train.seed: [0, 1]}\n");
  const std::vector<std::string> args = {"sweep", s.study.string(), "--out", s.out.string(), "--workers", "2", "--progress", "plain"};
  const pid_t pid = spawn_cli(args, capture_dir() / "real.out", capture_dir() / "real.err");
  wait_until([&] {
    for (const auto& c : cell_dirs(s))
      if (fs::exists(c / "checkpoint.bin") || fs::exists(c / "summary.json")) return true;
    return false;
  });
  ::kill(pid, SIGKILL);
  wait_exit_code(pid);
  const CliResult again = run_cli(args);
  ASSERT_EQ(again.rc, 0) << again.err << again.out;
  const auto cells = cell_dirs(s);
  ASSERT_EQ(cells.size(), 4u);
  for (const auto& c : cells) {
    const YAML::Node summary = YAML::Load(read_file((c / "summary.json").string()));
    const std::string status = summary["status"].as<std::string>();
    EXPECT_TRUE(status == "completed" || status == "early_stopped") << c << ": " << status;
    EXPECT_TRUE(fs::exists(c / "config.yaml"));
    EXPECT_FALSE(fs::exists(c / "summary.failed.json"));
  }
  EXPECT_TRUE(YAML::Load(read_file((s.out / "manifest.json").string()))["complete"].as<bool>());
}

// A finished cell whose summary.json is truncated is retried with --resume from its final
// checkpoint: it evaluates again and its summary holds the same evaluation (before, the retry
// wrote a "completed" summary with no evaluation and `table` dropped that seed without a word).
TEST(SweepCli, RealTrainTruncatedSummaryIsRedoneWithItsEvaluation) {
  const Scratch s = setup("truncated");
  write_file_atomic(s.study.string(),
                    "name: truncated\nconfig:\n"
                    "  task: {name: parity, params: {length: 8}}\n"
                    "  model: {d_model: 16, n_heads: 2, n_layers: 1}\n"
                    "  train: {steps: 6, batch_size: 4, eval_every: 3, eval_examples: 16, log_every: 3, threads: 1}\n"
                    "grid: {train.seed: [0, 1]}\n");
  const std::vector<std::string> args = {"sweep", s.study.string(), "--out", s.out.string(), "--workers", "1", "--progress", "plain"};
  ASSERT_EQ(run_cli(args).rc, 0);
  const fs::path cell = cell_dirs(s).back(), summary = cell / "summary.json";
  const YAML::Node before = YAML::Load(read_file(summary.string()));
  write_file_atomic(summary.string(), read_file(summary.string()).substr(0, 60));
  const CliResult again = run_cli(args);
  ASSERT_EQ(again.rc, 0) << again.err << again.out;
  EXPECT_TRUE(fs::exists(cell / "summary.failed.json"));  // the truncated one, kept by the sweep
  const YAML::Node after = YAML::Load(read_file(summary.string()));
  EXPECT_EQ(after["status"].as<std::string>(), "completed");
  ASSERT_TRUE(after["eval"]["val"]) << read_file(summary.string());
  EXPECT_EQ(after["eval"]["val"]["errors"].as<int64_t>(), before["eval"]["val"]["errors"].as<int64_t>());
  EXPECT_EQ(after["final_train_loss"].as<double>(), before["final_train_loss"].as<double>());
  const CliResult table = run_cli({"table", s.out.string(), "--no-plots"});
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_EQ(table.err.find("not used"), std::string::npos) << table.err;
}

// scripts/reproduce.sh --collect: a finished sweep (here a 4-step quickstart on the CPU) becomes
// results/<study>/ with tables, cells.jsonl.gz and a PROVENANCE.md whose dates and wall time come from the
// sweep's invocations.tsv; a study without sweep state is a one-line error.
TEST(SweepCli, ReproduceCollectExportsAFinishedSweep) {
  const fs::path root = fresh_dir("collect"), sweeps = root / "sweeps", results = root / "results";
  const fs::path out = sweeps / "quickstart";
  const CliResult r = run_cli({"sweep", std::string(SB_SOURCE_DIR) + "/experiments/quickstart.yaml", "--out", out.string(),
                               "--set", "train.steps=4", "--set", "optim.warmup_steps=0", "--set", "train.eval_every=0",
                               "--workers", "2", "--progress", "plain"});
  ASSERT_EQ(r.rc, 0) << r.err;
  write_file_atomic((out / "invocations.tsv").string(),
                    "2026-11-22T05:40:04Z\tabc123\tCPU test\t60.4\t0\tstatebench sweep quickstart\n");
  const std::string script = std::string(SB_SOURCE_DIR) + "/scripts/reproduce.sh";
  const std::string build = fs::path(SB_CLI_PATH).parent_path().string();
  const std::string env = "SWEEPS='" + sweeps.string() + "' RESULTS='" + results.string() + "' ";
  const fs::path log = root / "collect.log";
  const int rc = std::system((env + "bash '" + script + "' --build '" + build + "' --collect quickstart > '" + log.string() +
                              "' 2>&1").c_str());
  ASSERT_EQ(rc, 0) << read_file(log.string());
  const fs::path res = results / "quickstart";
  const std::string prov = read_file((res / "PROVENANCE.md").string());
  EXPECT_CONTAINS(prov, "cells: 12 (0 skipped by the protocol)");
  EXPECT_CONTAINS(prov, "Dates (UTC): 2026-11-22T05:40:04Z to 2026-11-22T05:41:04Z");
  EXPECT_CONTAINS(prov, "Wall time of the study: 60 s over 1 invocation(s)");
  EXPECT_CONTAINS(prov, "`statebench table results/quickstart`");
  EXPECT_CONTAINS(read_file((res / "tables.md").string()), "# quickstart");
  EXPECT_TRUE(fs::exists(res / "tables.csv"));
  EXPECT_TRUE(fs::exists(res / "manifest.json"));
  EXPECT_EQ(lines_of(read_file_gzip((res / "cells.jsonl.gz").string())).size(), 12u);  // one line per cell's summary
  EXPECT_FALSE(fs::exists(res / "cells"));
  EXPECT_FALSE(fs::exists(results / "quickstart.tmp"));
  // No sweep state for the study: exit 2, one line naming the missing file.
  const int bad = std::system((env + "bash '" + script + "' --build '" + build + "' --collect fflm > '" + log.string() +
                               "' 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(bad), 2);
  EXPECT_CONTAINS(read_file(log.string()), "--collect: no sweep state");
}

// scripts/reproduce.sh with a statebench that does not start (e.g. a staged binary without its
// libraries): exit 2 before any sweep, naming the binary and its first error line; no invocation is
// recorded (a line without a commit would enter the study's provenance).
TEST(SweepCli, ReproduceRefusesABinaryThatDoesNotRun) {
  const fs::path root = fresh_dir("broken_binary"), build = root / "build", sweeps = root / "sweeps";
  fs::create_directories(build);
  const fs::path sb = build / "statebench";
  write_file_atomic(sb.string(), "#!/bin/sh\necho 'statebench: error while loading shared libraries: libfmt.so.9' >&2\nexit 127\n");
  fs::permissions(sb, fs::perms::owner_all);
  const std::string script = std::string(SB_SOURCE_DIR) + "/scripts/reproduce.sh";
  const fs::path log = root / "run.log";
  const int rc = std::system(("SWEEPS='" + sweeps.string() + "' bash '" + script + "' --build '" + build.string() +
                              "' --devices cpu quickstart > '" + log.string() + "' 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  const std::string err = read_file(log.string());
  EXPECT_CONTAINS(err, "reproduce.sh: error: '" + sb.string() + "' does not run: statebench: error while loading");
  EXPECT_FALSE(fs::exists(sweeps / "quickstart" / "invocations.tsv"));
}

// ---- plugins -------------------------------------------------------------------------------------

const char* kPluginStudy =
    "config:\n"
    "  task: {name: modular_counter, params: {length: 8, modulus: 3}, eval: [{split: val}]}\n"
    "  model: {d_model: 16, n_heads: 2, n_layers: 1}\n"
    "  train: {steps: 6, batch_size: 4, eval_examples: 8, eval_every: 0, threads: 1}\n"
    "grid: {train.seed: [0, 1]}\n";

void expect_plugin_cells(const Scratch& s, const std::string& plugin) {
  const auto cells = cell_dirs(s);
  ASSERT_EQ(cells.size(), 2u);
  for (const auto& c : cells) {
    const YAML::Node summary = YAML::Load(read_file((c / "summary.json").string()));
    EXPECT_EQ(summary["status"].as<std::string>(), "completed") << c;
    EXPECT_EQ(summary["task"].as<std::string>(), "modular_counter");
    ASSERT_EQ(summary["provenance"]["plugins"].size(), 1u) << c;
    EXPECT_EQ(summary["provenance"]["plugins"][0].as<std::string>(), plugin);
    EXPECT_CONTAINS(summary["provenance"]["command"].as<std::string>(), "--plugin " + plugin + " train ");
  }
}

TEST(SweepCli, PluginTaskIsSweptThroughThePluginOption) {
  Scratch s = setup("plugin_option");
  write_file_atomic(s.study.string(), std::string("name: plugin_option\n") + kPluginStudy);
  const std::vector<std::string> sweep = {"sweep", s.study.string(), "--out", s.out.string(), "--progress", "plain"};
  const CliResult without = run_cli(sweep);  // the task is unknown, and the error says how to load it
  EXPECT_EQ(without.rc, 2);
  for (const char* part : {"unknown task 'modular_counter'", "--plugin FILE.so", "STATEBENCH_PLUGIN_PATH", "`plugins:`"})
    EXPECT_CONTAINS(without.err, part);
  std::vector<std::string> with = {"--plugin", SB_EXAMPLE_PLUGIN};
  with.insert(with.end(), sweep.begin(), sweep.end());
  const CliResult r = run_cli(with);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_CONTAINS(r.out, "2 finished (0 failed)");
  expect_plugin_cells(s, fs::absolute(SB_EXAMPLE_PLUGIN).lexically_normal().string());
}

TEST(SweepCli, StudyNamesItsPluginsRelativeToItself) {
  Scratch s = setup("plugin_key");
  fs::create_directories(s.dir / "plugins");
  fs::copy_file(SB_EXAMPLE_PLUGIN, s.dir / "plugins" / "my_task.so");
  write_file_atomic(s.study.string(), std::string("name: plugin_key\nplugins: [plugins/my_task.so]\n") + kPluginStudy);
  const CliResult r = run_cli({"sweep", s.study.string(), "--out", s.out.string(), "--progress", "plain"});
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  expect_plugin_cells(s, fs::absolute(s.dir / "plugins" / "my_task.so").lexically_normal().string());
  write_file_atomic(s.study.string(), std::string("name: plugin_key\nplugins: missing.so\n") + kPluginStudy);
  const CliResult bad = run_cli({"sweep", s.study.string(), "--out", s.out.string()});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_CONTAINS(bad.err, "study '" + s.study.string() + "': plugins: plugin file '" + (s.dir / "missing.so").string() +
                               "' does not exist");
}

// ---- the Slurm launcher without Slurm ----------------------------------------------------------------

TEST(SweepCli, SlurmDryRunPrintsTheBatchScriptAndSubmitsNothing) {
  const Scratch s = setup("slurm_dry");
  const CliResult r = run_cli({"sweep", s.study.string(), "--out", s.out.string(), "--launcher", "slurm", "--partition",
                               "gpu", "--account", "lab", "--time", "1:00:00", "--cpus-per-task", "2", "--mem", "4G",
                               "--max-running", "3", "--sbatch-arg=--qos=high", "--slurm-dry-run"});
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* line : {"# 6 cells would be submitted as one job array: sbatch --parsable --qos=high ",
                           "#SBATCH --array=0-5%3\n", "#SBATCH --partition=gpu\n", "#SBATCH --account=lab\n",
                           "#SBATCH --time=1:00:00\n", "#SBATCH --cpus-per-task=2\n", "#SBATCH --mem=4G\n",
                           " sweep-task ", "--device cpu --threads 2\n", "nothing was submitted (--slurm-dry-run)"})
    EXPECT_CONTAINS(r.out, line);
  EXPECT_FALSE(fs::exists(s.out));
}

TEST(SweepCli, LauncherOptionsThatDoNotFitAreOneLineErrors) {
  const Scratch s = setup("slurm_opts");
  auto expect_error = [&](std::vector<std::string> extra, const std::string& message) {
    std::vector<std::string> args = {"sweep", s.study.string(), "--out", s.out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.rc, 2) << show(args);
    EXPECT_EQ(r.err, "statebench: error: " + message + "\n");
  };
  expect_error({"--partition", "gpu"}, "--partition needs --launcher slurm");
  expect_error({"--launcher", "slurm", "--devices", "cpu"}, "--devices is for --launcher local; on Slurm use --gpus-per-task");
  expect_error({"--launcher", "slurm", "--time", "1 h"}, "--time '1 h': no spaces, quotes or backslashes allowed");
  expect_error({"--status", "--wait"}, "--status: give it without --wait (it only reads the sweep directory and the queue)");
  expect_error({"--status"}, "--status: '" + s.out.string() + "' holds no sweep yet (no manifest.json); --out names the sweep directory");
  EXPECT_FALSE(fs::exists(s.out));
}

TEST(SweepCli, StatusAndSweepTaskWorkOnALocalSweep) {
  const Scratch s = setup("slurm_status", "grid: {train.seed: [0, 1, 2]}\n");
  ::setenv("SB_FAKE_TRAIN_SECONDS", "0", 1);
  ASSERT_EQ(run_cli(sweep_args(s)).rc, 0);
  const auto cells = cell_dirs(s);
  ASSERT_EQ(cells.size(), 3u);
  // A repeated task on a finished cell runs nothing ...
  const CliResult again = run_cli({"sweep-task", s.out.string(), cells[0].filename().string(), "--train-exe", s.script.string()});
  EXPECT_EQ(again.rc, 0) << again.err;
  EXPECT_CONTAINS(again.out, "already finished (completed): nothing to do");
  EXPECT_EQ(runs_of(cells[0]).size(), 2u);
  // ... one whose run ended without a summary runs it once more; a failed one is reported.
  fs::remove(cells[1] / "summary.json");
  write_file_atomic((cells[2] / "summary.json").string(), "{\"status\": \"failed\", \"message\": \"out of memory\"}\n");
  const CliResult status = run_cli({"sweep", s.study.string(), "--out", s.out.string(), "--status"});
  EXPECT_EQ(status.rc, 0) << status.err;
  EXPECT_CONTAINS(status.out, "1/3 done, 0 running, 0 queued, 1 failed, 1 not submitted");
  EXPECT_CONTAINS(status.out, "failed        " + cells[2].filename().string() + "  out of memory\n");
  EXPECT_CONTAINS(status.out, "log: " + (cells[2] / "log.txt").string());
  EXPECT_CONTAINS(status.out, "2 cells to submit");
  const CliResult task = run_cli({"sweep-task", s.out.string(), cells[1].filename().string(), "--train-exe", s.script.string()});
  EXPECT_EQ(task.rc, 0) << task.err << task.out;
  EXPECT_EQ(runs_of(cells[1]).size(), 4u);
  EXPECT_TRUE(fs::exists(cells[1] / "summary.json"));
  const CliResult unknown = run_cli({"sweep-task", s.out.string(), "no-such-cell"});
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_CONTAINS(unknown.err, "has no cell 'no-such-cell'");
  ::unsetenv("SB_FAKE_TRAIN_SECONDS");
}

}  // namespace
}  // namespace sb::test
