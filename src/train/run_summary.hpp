// run_summary.hpp: summary.json, the record of a finished run and its commit point: `train` writes
// it last (atomically), `sweep` reads a cell's status and metric from it, `table` its settings and
// evaluation. One type with to_json/from_json; docs/run-format.md lists the fields. Reading is
// lenient (absent fields stay unknown, numbers may be numeric strings); a wrong type is an
// sb::Error naming the field.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "train/stats.hpp"

namespace sb {

inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// One entry of "eval" (the evaluation of one split at one length). Unknown numbers are NaN
// (written as null), unknown counts -1, unknown split "" and length/examples 0 (not written).
struct EvalSummary {
  double token_accuracy = kUnknown, sequence_accuracy = kUnknown;
  int64_t scored = -1, errors = -1;
  double error_rate = kUnknown;
  std::optional<Interval> error_ci95;  // exact (Clopper-Pearson) 95% bounds
  int64_t sequences = -1, sequence_errors = -1;
  std::optional<Interval> sequence_error_ci95;
  double loss = kUnknown;
  std::string split;
  int64_t length = 0, examples = 0;

  static EvalSummary from_counts(const EvalCounts& counts, std::string split, int64_t length, int64_t examples);
  // A numeric field by its JSON name ("token_accuracy", "errors", ...); nullopt when unknown or
  // not a numeric field.
  std::optional<double> number(const std::string& field) const;
};

struct ModelSummary {
  std::string attention;
  std::vector<std::string> layers;  // per-layer attention
  std::optional<int64_t> n_layers, d_model, n_heads, head_dim, params;
};

// The Slurm job a run ran in (from the job's environment): its own job id, and for an array task
// the array's job id and the task's index.
struct SlurmJob {
  std::string job_id, array_job_id;
  std::optional<int64_t> array_task_id;
};

struct Provenance {
  std::string commit, version, device, date, command, host;
  std::vector<std::string> plugins;  // plugin files loaded (absolute); written when any
  std::optional<SlurmJob> slurm;     // written when the run ran under Slurm
};

struct RunSummary {
  std::string status;   // completed | early_stopped | diverged | failed
  std::string message;  // why it diverged or failed, else ""
  std::optional<int64_t> steps, target_steps;  // optimiser steps taken; configured
  std::optional<double> wall_seconds, tokens_per_second, final_train_loss;  // NaN: written as null
  std::optional<std::string> task;
  std::vector<std::pair<std::string, std::string>> task_params;  // the task's parameters, as strings
  std::optional<ModelSummary> model;
  std::optional<int64_t> seed;
  std::optional<double> lr;
  std::optional<std::string> config_fingerprint;
  std::vector<std::pair<std::string, EvalSummary>> eval;  // KEY ("val", "val@512") -> the final evaluation
  std::optional<Provenance> provenance;
  // A failure record the sweep writes for a cell whose `train` ended without a summary.
  std::optional<int64_t> signal, exit_code;
  std::optional<std::string> log_tail, written_by;

  const EvalSummary* find_eval(const std::string& key) const;  // nullptr if absent
};

void to_json(nlohmann::ordered_json& j, const EvalSummary& e);
void from_json(const nlohmann::ordered_json& j, EvalSummary& e);  // sb::Error naming the field
void to_json(nlohmann::ordered_json& j, const RunSummary& s);
void from_json(const nlohmann::ordered_json& j, RunSummary& s);  // sb::Error naming the field

// The summary in `text`; sb::Error ("not valid JSON (...)", "expected a JSON object", or a field).
RunSummary parse_run_summary(const std::string& text);
// Reads `path` (sb::Error naming the file when it cannot be read, parse errors as above).
RunSummary read_run_summary(const std::string& path);
// One line of JSON and a newline, atomically (temp + fsync + rename).
void write_run_summary(const std::string& path, const RunSummary& summary);

}  // namespace sb
