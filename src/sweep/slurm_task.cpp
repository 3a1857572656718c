// slurm_task.cpp: one cell of a sweep run by a Slurm array task (see slurm_task.hpp). The cell's
// command comes from OUT/manifest.json (base config, `set`, the cell's overrides), written by the
// submission right before sbatch; the child is `statebench train`, as in the local runner.
#include "sweep/slurm_task.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/utc_time.hpp"
#include "sweep/manifest.hpp"
#include "sweep/runner.hpp"
#include "sweep/slurm.hpp"

namespace sb::sweep {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

void say(const std::string& text) {
  std::fputs(fmt::format("statebench sweep-task {}: {}\n", utc_now(), text).c_str(), stdout);
  std::fflush(stdout);
}

bool stopped(const CellTaskOptions& o) { return o.stop && o.stop->load(); }

}  // namespace

int run_cell_task(const CellTaskOptions& o) {
  const fs::path out = fs::absolute(o.out_dir).lexically_normal();
  const Manifest m = read_manifest((out / "manifest.json").string());
  const ManifestCell* cell = nullptr;
  for (const auto& c : m.cells)
    if (c.id == o.cell_id) cell = &c;
  if (!cell) fail("sweep '{}' has no cell '{}' (see its manifest.json)", out.string(), o.cell_id);
  const fs::path dir = fs::path(cell->dir).is_absolute() ? fs::path(cell->dir) : out / cell->dir;
  fs::create_directories(dir);
  const auto job = current_slurm_job();
  std::string job_name = "none";
  if (job) job_name = job->array_task_id ? fmt::format("{}_{} (id {})", job->array_job_id, *job->array_task_id, job->job_id)
                                         : job->job_id;
  say(fmt::format("cell {} in {} (Slurm job {}) on {}", cell->id, dir.string(), job_name, host_name()));

  // The cell's lock: another task (a duplicate or a requeued one) or a local sweep may run it now.
  int lock = -1;
  for (bool told = false; (lock = lock_file((dir / "lock").string())) < 0;) {
    if (!told) say("another process runs this cell (it holds its lock): waiting for it");
    told = true;
    if (stopped(o)) return 143;
    std::this_thread::sleep_for(std::chrono::duration<double>(o.poll_seconds));
  }
  const std::string summary = (dir / "summary.json").string();
  if (const auto r = read_cell_result(summary, m.metric)) {
    if (r->final()) {
      ::close(lock);
      say(fmt::format("already finished ({}): nothing to do", r->status));
      return 0;
    }
    fs::rename(summary, dir / "summary.failed.json");  // retried now
  }

  CellCommand command{o.plugins, m.base, m.set, dir.string(), o.device, o.cpu_threads, false};
  for (const auto& [key, value] : cell->overrides) command.set.push_back(key + "=" + value);
  command.resume = fs::exists(dir / "checkpoint.bin");
  LaunchSpec spec;
  spec.dir = dir.string();
  spec.device = o.device;
  spec.lock_fd = lock;
  spec.args = cell_train_args(command);
  std::string shown = "statebench";
  for (const auto& a : spec.args) shown += " " + a;
  say((command.resume ? "resuming: " : "running: ") + shown + "  (output: " + (dir / "log.txt").string() + ")");

  ProcessLauncher launcher(o.train_exe);
  const auto started = Clock::now();
  const int64_t handle = launcher.start(spec);
  LaunchExit exit{handle, 0, 0};
  bool forwarded = false, killed = false;
  Clock::time_point forwarded_at;
  for (;;) {
    const auto exits = launcher.wait(o.poll_seconds);
    if (!exits.empty()) {
      exit = exits.front();
      break;
    }
    if (stopped(o) && !forwarded) {
      say("stopped by Slurm (SIGTERM): stopping statebench train");
      launcher.signal_all(SIGTERM);
      forwarded = true;
      forwarded_at = Clock::now();
    }
    if (forwarded && !killed && Clock::now() - forwarded_at > std::chrono::duration<double>(o.grace_seconds)) {
      launcher.signal_all(SIGKILL);
      killed = true;
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - started).count();
  auto r = read_cell_result(summary, m.metric);
  if (!r) {
    Provenance p;
    p.commit = build_commit();
    p.version = STATEBENCH_VERSION;
    p.device = o.device;
    p.date = utc_now();
    p.command = shown;
    p.host = host_name();
    p.plugins = o.plugins;
    p.slurm = job;
    // Slurm signals every process of a cancelled task: the child may end by that SIGTERM first.
    const bool by_slurm = forwarded || stopped(o) || (job && exit.signal == SIGTERM);
    const std::string message =
        by_slurm ? "stopped by Slurm (SIGTERM: scancel, the time limit or preemption) while statebench train ran; "
                    "run the sweep again to finish it"
                  : missing_summary_message(dir.string(), exit);
    write_failed_summary(dir.string(), message, wall, exit, p);
    r = read_cell_result(summary, m.metric);
  }
  ::close(lock);  // after the summary is in place: a waiting task then finds it
  say(fmt::format("cell {}: {}{}", cell->id, r->status, r->final() ? "" : ": " + r->message));
  if (r->final()) return 0;
  return forwarded || stopped(o) ? 143 : 1;
}

}  // namespace sb::sweep
