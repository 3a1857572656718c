// trainer.hpp: `statebench train` as a library call. Builds the task and the model from a
// TrainConfig, trains with evaluation at intervals, early stopping, checkpoints and resume, and
// writes the run directory described in docs/run-format.md.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/utc_time.hpp"
#include "tasks/registry.hpp"
#include "train/config.hpp"
#include "train/evaluation.hpp"  // eval_chunk
#include "train/memory_estimate.hpp"
#include "train/run_summary.hpp"

namespace sb {

// A testing aid (`statebench train --stop-after`, docs/run-format.md): the process ends as kill -9
// would end it at one boundary between the run's writes.
struct StopPoint {
  enum Kind { none, metrics, checkpoint, summary };
  Kind kind = none;
  int64_t step = 0;  // metrics: right after step S's metrics.jsonl lines, before its checkpoint;
                     // checkpoint: right after step S's checkpoint; summary: while writing it
};

struct TrainOptions {
  std::string out_dir;       // run directory (created)
  bool resume = false;       // continue from out_dir/checkpoint.bin if present
  std::string command;       // the command line, for provenance
  std::vector<std::string> plugins;  // plugin files loaded, for provenance
  std::optional<SlurmJob> slurm;     // the Slurm job it runs in, for provenance
  bool progress = true;      // progress line on stderr
  // Stop after this many steps as a crash would (checkpoint written, no summary); 0 = off.
  // Lets tests prove that resuming equals the uninterrupted run.
  int64_t interrupt_at_step = 0;
  // Set (by a signal handler): the run stops after the step in progress as interrupt_at_step does
  // (checkpoint written, no summary), unless that step was its last.
  const std::atomic<bool>* interrupt = nullptr;
  StopPoint stop_after;
};

struct TrainOutcome {
  std::string status;        // completed, early_stopped, diverged, failed, already_finished, interrupted
  int64_t steps = 0;
  int exit_code = 0;         // 0 completed/early stopped/already finished, 1 diverged/failed
};

// Throws sb::Error for bad input (unknown task or split, a run directory that is a file or cannot
// be written, a run already in out_dir without resume, a run larger than the memory available, a
// checkpoint of another config, a task producing invalid examples) before anything is written.
// Resumed at the checkpoint of its last step (summary.json lost), the run evaluates again and
// writes the summary an uninterrupted run writes. A finished run (a readable summary.json) is
// left alone: status already_finished.
TrainOutcome train(const TrainConfig& config, const TaskRegistry& tasks, const TrainOptions& options);

// The memory the run would need (memory_estimate.hpp), from its config and tasks, allocating
// nothing: for --dry-run. sb::Error for an unknown task or split.
MemoryEstimate estimate_run_memory(const TrainConfig& config, const TaskRegistry& tasks);

// "cpu (2 threads)" or the GPU's name: the device string recorded in provenance.
std::string describe_cpu_device(int64_t threads);

}  // namespace sb
