// finished_run.hpp: a finished run directory reopened (`statebench eval`, `statebench export`):
// summary.json says it finished, checkpoint.bin holds its final parameters and the effective
// config they were trained under. evaluate_run() scores those parameters on further splits and
// lengths and merges the results into RUN_DIR/eval.json (docs/run-format.md), atomically; the
// run's own files are only read.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/param_store.hpp"
#include "tasks/registry.hpp"
#include "train/checkpoint.hpp"
#include "train/config.hpp"
#include "train/run_summary.hpp"

namespace sb {

struct FinishedRun {
  std::string dir;
  RunSummary summary;
  CheckpointInfo checkpoint;  // checkpoint.bin's header (validated, checksum included)
  TrainConfig config;         // the effective config stored in the checkpoint
};

// sb::Error naming the file for a directory without summary.json (an unfinished run), a run that
// did not finish (diverged, failed), a missing or corrupted checkpoint, or a checkpoint of another
// step than the summary's (it would not hold the final parameters).
FinishedRun open_finished_run(const std::string& dir);

// Fills `params` (a Transformer's, built from run.config.model) with the checkpoint's parameters;
// double stores receive the stored floats converted exactly.
template <class S>
void load_run_parameters(const FinishedRun& run, ParamStore<S>& params);

struct EvalRequest {
  std::vector<std::string> splits;  // empty: the splits of the run's task.eval, in order
  std::vector<int64_t> lengths;     // empty: the training length only (keys "SPLIT")
  int64_t examples = 0;             // 0: as the run's own task.eval entry, else train.eval_examples
  std::string device;               // "": the run's train.device; else cpu or cuda
  int64_t threads = -1;             // < 0: the run's train.threads
  std::string command;              // for provenance
};

struct EvalRunResult {
  std::vector<std::pair<std::string, EvalSummary>> results;  // key ("val", "val@64") -> evaluation
  std::string file;                                          // the eval.json written
  std::string device;
};

// Scores the run's checkpoint on every (split, length) of the request with the examples its
// training evaluation would use (train.seed), then merges them into RUN_DIR/eval.json under their
// keys (an entry of the same key is replaced, every other entry kept) with one atomic write under
// an exclusive lock on the run directory. Every check (the run, the task, each split and length,
// memory) comes before any work; an unreadable eval.json is an error, never overwritten.
EvalRunResult evaluate_run(const std::string& dir, const TaskRegistry& tasks, const EvalRequest& request);

}  // namespace sb
