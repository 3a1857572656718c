// curves.hpp: learning curves of a study's runs and their figures. A run's curve comes from its
// metrics.jsonl (a live sweep's cells/<id>/, or a run directory), else from its study's
// curves.jsonl.gz (results/: every cell's metrics lines with "cell": ID first, tools/curves.sh).
// One SVG per table cell (model, depth, train length): training loss and evaluation accuracy
// against step, one line per seed. docs/tables.md, "Learning curves".
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "report/tables.hpp"

namespace sb::report {

struct RunCurve {
  std::vector<std::pair<int64_t, double>> loss;  // (step, training loss) of the "train" lines
  struct Eval {
    int64_t step = 0;
    std::map<std::string, std::pair<double, double>> accuracy;  // key -> (token, sequence); NaN unknown
  };
  std::vector<Eval> evals;  // the "eval" lines, in file order
  std::string source;       // the file it was read from
};

// The curves of the study's runs, by run id (a run without metrics.jsonl or a line in its
// study's curves.jsonl.gz has none). sb::Error naming the file and line for an unreadable file or
// a line that is not a JSON object.
std::map<std::string, RunCurve> load_curves(const Study& study);

// Each run as it stood at training step `step` (table --at-step), so that studies cut at different
// points, or run at different commits, compare at one budget: a run that ended by then (its summary's
// steps <= step) keeps its summary; a run that went past it, finished or not, takes the last
// evaluation of its curve at or before that step (token and sequence accuracy; the other fields
// unknown) and counts as completed there; a run with no evaluation by then, or that had not
// reached the step, is unfinished (no value). The study's name gains " (at step N)".
void cut_at_step(Study& study, int64_t step);

// Writes DIR/curves_<model>_d<depth>_L<length>.svg per cell with a curve: loss (left) and the
// metric's eval key's token (solid) and sequence (dashed) accuracy (right) against step, a
// colour per seed (the chosen learning rate's runs). Creates DIR; returns the files written.
// sb::Error when no run of the study has a curve.
std::vector<std::string> write_curve_plots(const Study& study, const TableOptions& options, const std::string& dir);

}  // namespace sb::report
