// slurm_task.hpp: one array task of a Slurm sweep (`statebench sweep-task OUT CELL`): runs one
// cell of the sweep in OUT as the local runner would: under the cell's lock (a second task for the
// same cell waits, then finds it finished), resuming from its checkpoint, reusing a finished
// summary, writing a failure record when `statebench train` ends without one.
#pragma once
#include <atomic>
#include <string>
#include <vector>

namespace sb::sweep {

struct CellTaskOptions {
  std::string out_dir;               // the sweep directory (its manifest.json names the cell's command)
  std::string cell_id;
  std::vector<std::string> plugins;  // plugin files the train child loads
  std::string train_exe = "/proc/self/exe";
  std::string device = "cpu";        // cpu, cuda:N
  int cpu_threads = 0;               // > 0: --set train.threads=N (cpu cells)
  const std::atomic<bool>* stop = nullptr;  // set by SIGTERM (scancel, time limit, preemption)
  double grace_seconds = 20;         // after forwarding the stop, SIGKILL the child after this long
  double poll_seconds = 0.2;
};

// Returns the task's exit code: 0 when the cell has a final summary (completed, early stopped,
// diverged), 1 when it failed, 143 when stopped (the cell stays resumable, with a failure record
// saying so). sb::Error for a sweep directory or cell id that does not exist.
int run_cell_task(const CellTaskOptions& options);

}  // namespace sb::sweep
