// runner.hpp: runs a plan's cells as child processes (`statebench train BASE --set ... --out
// CELLDIR --device D [--resume]`), at most one per worker slot, asking the protocol scheduler for
// runnable cells as results arrive. Resumable: finished cells are reused, unfinished ones resumed,
// failed ones retried; per-cell flock files keep two processes from running one cell at once.
// The process launcher is an interface so tests can substitute a fake one.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sweep/plan.hpp"
#include "train/run_summary.hpp"

namespace sb::sweep {

// ---- launching ----------------------------------------------------------------------------------

struct LaunchSpec {
  size_t cell = 0;                // index into Plan::cells
  std::string dir;                // the cell's run directory (exists)
  std::string device;             // "cpu", "cuda:0", ...
  std::vector<std::string> args;  // after the executable: train BASE --set ... --out DIR --device D [--resume]
  int lock_fd = -1;               // the cell's lock: the child must keep it open while it lives
};

struct LaunchExit {
  int64_t handle = -1;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // > 0: killed by this signal
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual int64_t start(const LaunchSpec& spec) = 0;  // a handle; sb::Error if it cannot start
  // Children that ended since the last call; waits up to timeout_s for the first one.
  virtual std::vector<LaunchExit> wait(double timeout_s) = 0;
  virtual void signal_all(int sig) = 0;  // to every running child (its whole process group)
};

// fork/exec of `exe` (default /proc/self/exe, i.e. this statebench binary) in its own process
// group, stdin from /dev/null, stdout and stderr appended to DIR/log.txt.
class ProcessLauncher final : public Launcher {
 public:
  explicit ProcessLauncher(std::string exe = "/proc/self/exe");
  int64_t start(const LaunchSpec& spec) override;
  std::vector<LaunchExit> wait(double timeout_s) override;
  void signal_all(int sig) override;

 private:
  std::string exe_;
  std::vector<int64_t> pids_;  // running children
};

// ---- devices and worker slots -----------------------------------------------------------------

// Parses "cpu,cuda:0,cuda:1" (also "cuda" = "cuda:0"); sb::Error for anything else or repeats.
std::vector<std::string> parse_devices(const std::string& list);
// One device per worker slot. workers > 0: that many slots, dealt round-robin over `devices`;
// workers == 0: max(1, cores / cpu_threads) slots for cpu plus one per cuda device.
std::vector<std::string> make_slots(const std::vector<std::string>& devices, int workers, int cores, int cpu_threads);
// Cells that progress at full speed at once over these slots (for time estimates made without
// measurements): one per cpu slot, and per GPU min(its slots, 2): concurrent small cells on one
// GPU overlap about 2x (8 small runs on an H100: 13.0 s time-sliced, 6.5 s under MPS).
double concurrent_lanes(const std::vector<std::string>& slots);

// ---- running ------------------------------------------------------------------------------------

struct RunningCell {
  size_t cell = 0;
  std::string device;
  bool resumed = false;
  std::chrono::steady_clock::time_point started;
};

struct SweepCounts {
  size_t total = 0, finished = 0, failed = 0, skipped = 0, running = 0, pending = 0, waiting = 0;
  size_t reused = 0;  // finished before this sweep started
};

// Receives what happens, for progress display. Default: nothing.
class SweepObserver {
 public:
  virtual ~SweepObserver() = default;
  virtual void on_reused(const Cell&, const CellResult&) {}
  virtual void on_start(const Cell&, const RunningCell&) {}
  // ran_here: false when another process (a child left by an earlier, killed sweep) finished it.
  virtual void on_finish(const Cell&, const CellResult&, const SweepCounts&, bool ran_here) {}
  virtual void on_skip(const Cell&, const SweepCounts&) {}
  virtual void on_waiting(const Cell&) {}  // its lock is held by another process
  // Every poll (about 10 times a second): the state and the running cells.
  virtual void on_tick(const SweepCounts&, const std::vector<RunningCell>&) {}
};

struct RunnerOptions {
  std::string out_dir;                  // the sweep directory (OUT)
  std::vector<std::string> plugins;     // plugin files every cell loads (`--plugin F` before `train`)
  std::vector<std::string> slots;       // one device per worker slot (make_slots)
  int cpu_threads = 0;                  // > 0: cpu cells get --set train.threads=N
  const std::atomic<bool>* interrupt = nullptr;  // set (by a signal handler) to stop
  // > 0: stop the sweep (like an interrupt) when this many cells run by it failed before any
  // succeeded: a systematic problem (a broken binary, a missing file) should not burn the grid.
  int stop_after_initial_failures = 0;
  double poll_seconds = 0.1;
  double terminate_grace_seconds = 10;  // after SIGTERM, SIGKILL stragglers after this long
};

struct SweepResult {
  SweepCounts counts;
  bool interrupted = false;       // by options.interrupt, or by the initial-failure stop:
  std::string stopped_because;    // non-empty for the latter: the first failure's message
  std::vector<Scheduler::GroupStatus> groups;  // min_depth: each group's outcome (Plan::groups order)
};

// Prepares OUT (cells/, study.yaml, manifest.json), takes OUT/sweep.lock (sb::Error if another
// sweep holds it), refuses cell directories run with another config, then runs the plan.
// On interrupt: SIGTERM to every child, waits, leaves them unfinished (resumable).
SweepResult run_sweep(const Plan& plan, Launcher& launcher, const RunnerOptions& options, SweepObserver* observer = nullptr);

// The config file cells are run with: the study's base file, or OUT/base.yaml for an inline config.
std::string base_config_path(const Plan& plan, const std::string& out_dir);

// What one cell runs: `[--plugin F]... train BASE [--set S]... --out DIR --device D [--resume]`.
struct CellCommand {
  std::vector<std::string> plugins;    // absolute plugin files
  std::string base_config;             // base_config_path()
  std::vector<std::string> set;        // the study's `set` (and --set), then the cell's axis overrides
  std::string dir, device;             // the cell's run directory (absolute); cpu, cuda:N
  int cpu_threads = 0;                 // > 0 and device cpu: --set train.threads=N
  bool resume = false;                 // DIR/checkpoint.bin exists
};
std::vector<std::string> cell_train_args(const CellCommand& command);

// Whether OUT holds this cell's directory with a config.yaml of another config (fingerprint) than the
// cell's: the base config or `set` changed after it ran. sb::Error if that file cannot be read.
bool cell_run_with_other_config(const Cell& cell, const std::string& out_dir);

// Creates OUT, refuses a directory that belongs to another study or cells run with another config,
// writes study.yaml (and base.yaml for an inline config). The caller holds OUT/sweep.lock.
void prepare_sweep_dir(const Plan& plan, const std::string& out_dir);

// An exclusive flock on OUT/sweep.lock or a cell's lock file (created if absent), close-on-exec;
// -1 when another process holds it.
int lock_file(const std::string& path);
// Closes a descriptor (e.g. lock_file's, releasing its lock) at the end of its scope; -1: none.
struct FdCloser {
  int fd = -1;
  explicit FdCloser(int descriptor) : fd(descriptor) {}
  ~FdCloser();
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
};

// The summary.json the sweep writes for a cell whose child ended without one.
void write_failed_summary(const std::string& dir, const std::string& message, double wall_seconds,
                          const LaunchExit& exit, const std::optional<Provenance>& provenance = std::nullopt);
// Its message: "statebench train exited with code 3 without writing summary.json: <last log line>".
std::string missing_summary_message(const std::string& dir, const LaunchExit& exit);

}  // namespace sb::sweep
