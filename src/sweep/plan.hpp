// plan.hpp: a study expanded into cells (one train run each: its overrides, stable id, run
// directory and validated config) and the protocol scheduler that decides, as results arrive,
// which cells may run now and which are skipped (min_depth; max_lr with stop_at), plus reading a
// cell's summary.json.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sweep/study.hpp"
#include "train/config.hpp"

namespace sb::sweep {

// What a task check reports about a cell's task (for time estimates); 0 = unknown.
struct TaskShape {
  int64_t seq_len = 0, vocab = 0;
};
// Builds/validates a cell's task (name, params, eval splits and lengths); throws sb::Error. It may
// resolve the config's task.eval in place (task.eval[].scale into lengths), as train will.
using TaskCheck = std::function<TaskShape(TrainConfig&)>;

struct CellAxis {
  std::string key;  // config key path
  AxisValue value;
};

struct Cell {
  size_t index = 0;
  std::string id;              // "<slug>-<hash8>", e.g. attention=path,n_layers=2,seed=0-3fa2c1d0
  std::string dir;             // relative to the sweep directory: cells/<id>
  std::vector<CellAxis> axes;  // one per study axis, in study order
  std::string group;           // staged protocols: the axes other than the stage axis and those
                               // decided together (min_depth best_over, max_lr train.seed), a slug
  TrainConfig config;          // base + set + axes, validated
  TaskShape shape;

  std::vector<std::string> overrides() const;  // "key=value" per axis, in axis order
  const AxisValue* value(const std::string& key) const;
  std::string label() const;                   // "attention=path,n_layers=2,seed=0" (display)
};

struct Plan {
  Study study;
  std::vector<Cell> cells;  // Cartesian order: first grid axis slowest, the zip index fastest
  // Staged protocols only (min_depth; max_lr with stop_at): per group, the cell indices of each
  // stage in the order they run (depths increasing, or with `gate_first` the deepest, then the
  // others increasing; learning rates as listed). A group stops at the first stage whose metric
  // reaches `threshold` (best over the stage's cells for min_depth, their mean for max_lr) and
  // skips its later stages; with `gate_first`, stage 0 decides the group only when it does not
  // reach (no depth reaches: the later stages are skipped), and when no later stage reaches, stage
  // 0 is the group's answer.
  struct Group {
    std::string key;
    std::vector<std::string> labels;          // stage labels (axis value labels), in run order
    std::vector<std::vector<size_t>> stages;  // stages[d] = cells of labels[d]
  };
  std::vector<Group> groups;
  std::string stage_axis;        // the axis the stages walk ("" without stages)
  double threshold = 0;          // a stage reaches when its best (min_depth) / mean (max_lr) >= this
  bool gate_first = false;       // min_depth order deepest_first (above)
  bool stage_mean = false;       // decide on the mean over the stage's cells instead of the best
  bool higher_is_better = true;  // false (error_rate, loss): best = lowest, reaching = <= threshold
  std::string metric;  // the protocol's metric (grid: val.token_accuracy, shown in progress)
};

// Expands and validates every cell (base + set + the cell's axis values through parse_config,
// then `check` if given). Errors are one line: "study 'F': grid 'model.n_layers' value 'x': ...".
// A min_depth or max_lr metric must name an eval key of every cell (task.eval: SPLIT or
// SPLIT@LENGTH), and a cell's early stop (train.target_accuracy on train.target_metric) must not
// end training before the protocol's threshold on that metric can be reached.
Plan make_plan(const Study& study, const TaskCheck& check = {});

// The id of a cell with these axis values: a readable slug (shortest unique key suffix = value
// label, filesystem-safe, truncated) plus 8 hex digits of a hash of the sorted key=value texts.
std::string cell_id(const std::vector<CellAxis>& axes);

// ---- results ----------------------------------------------------------------------------------

struct CellResult {
  std::string status;            // completed | early_stopped | diverged | failed
  std::optional<double> metric;  // the requested metric from summary.json's eval, if present
  double wall_seconds = 0;
  std::string message;
  bool final() const { return status != "failed"; }  // failed cells are retried by a new sweep
};

// Reads `summary_path` (a train summary.json); nullopt when it does not exist. An unreadable
// file reads as status failed. `metric` is "<eval key>.<field>" (split at the last '.').
std::optional<CellResult> read_cell_result(const std::string& summary_path, const std::string& metric);

// ---- the protocol scheduler ---------------------------------------------------------------------

enum class CellState { pending, running, finished, skipped };
const char* to_string(CellState s);

class Scheduler {
 public:
  explicit Scheduler(const Plan& plan);

  // Pending cells the protocol allows to start now (grid, max_lr: every pending cell, in plan
  // order; staged protocols: the pending cells of each undecided group's current stage, earlier
  // stages first, then plan order).
  std::vector<size_t> runnable() const;
  void start(size_t cell);  // pending -> running
  // pending|running -> finished with this result; a staged protocol may decide the cell's group
  // and skip its later stages: returns the cells skipped by this call.
  std::vector<size_t> finish(size_t cell, const CellResult& result);
  // pending|running -> pending (interrupted, to be resumed later).
  void abandon(size_t cell);
  // Resume: record a result found on disk without deciding anything yet (pending -> finished);
  // after every restore(), settle() applies the protocol and returns the cells it skipped.
  void restore(size_t cell, const CellResult& result);
  std::vector<size_t> settle();

  bool done() const;  // every cell finished or skipped
  CellState state(size_t cell) const { return state_.at(cell); }
  const std::optional<CellResult>& result(size_t cell) const { return result_.at(cell); }
  size_t count(CellState s) const;

  struct GroupStatus {
    size_t stage = 0;                   // index of the current stage
    bool decided = false;
    std::optional<size_t> reached;      // the stage that answers: the first that reached the threshold
                                        // (gate_first: stage 0 when only it did)
  };
  const std::vector<GroupStatus>& groups() const { return groups_; }

 private:
  std::vector<size_t> advance(size_t group);

  const Plan& plan_;
  std::vector<CellState> state_;
  std::vector<std::optional<CellResult>> result_;
  std::vector<size_t> group_of_;  // staged protocols: cell -> group
  std::vector<GroupStatus> groups_;
};

}  // namespace sb::sweep
