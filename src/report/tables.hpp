// tables.hpp: the expressivity tables built from a loaded Study (results.hpp): accuracy grid,
// per-seed distributions, minimum depth, error counts with exact bounds, length generalisation and
// a per-run listing; the metric spec ("val.token_accuracy"), grouping of runs into (model, depth,
// train length) cells with the best learning rate, and Markdown / CSV rendering (CSV: numbers in
// their own columns). docs/tables.md has examples.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "report/results.hpp"

namespace sb::report {

enum class Field { token_accuracy, sequence_accuracy, error_rate, sequence_error_rate, loss };

// "KEY.FIELD" (KEY an eval key such as val, sparse or val@512).
struct Metric {
  std::string key;
  Field field = Field::token_accuracy;
  std::string name() const;  // "val.token_accuracy"
  bool higher_is_better() const;
};
const char* to_string(Field f);
bool higher_is_better(Field f);  // the accuracies
// The other accuracy, shown beside it: token <-> sequence; nullopt for error rates and loss.
std::optional<Field> companion(Field f);
// A column word: "token", "seq", "error", "seq error", "loss".
const char* short_name(Field f);
// Parses "KEY.FIELD" or "FIELD" (key = the study's first eval key); "" = the manifest's metric,
// else the first eval key's token accuracy. sb::Error for an unknown field or an eval key that no
// run has.
Metric parse_metric(const std::string& spec, const Study& study);
// The field of eval `key` in a run with a result; NaN when absent or not computable.
double metric_value(const RunRecord& run, const std::string& key, Field field);

struct Stats {
  int n = 0;
  double mean = kNaN, sd = kNaN, min = kNaN, max = kNaN;  // sd: sample standard deviation (n - 1)
  double median = kNaN;                                   // the middle value (mean of the two for even n)
  double best(Field f) const { return higher_is_better(f) ? max : min; }
};
Stats compute_stats(const std::vector<double>& values);  // NaNs are skipped

// The runs of one (model, depth, train length): all of them, and those at the learning rate that
// gives the best mean (over seeds) of the main metric when several learning rates were run.
struct Cell {
  std::vector<const RunRecord*> runs;
  std::vector<const RunRecord*> chosen;
  std::optional<double> best_lr;  // set when several learning rates were compared
  // When several learning rates were compared: one Cell per rate, ascending (chosen = its runs, with
  // those of no known rate; best_lr = the rate).
  std::vector<Cell> rates;
};

// One chosen run of a cell and its value of one eval key and field (NaN without a result).
struct SeedValue {
  const RunRecord* run = nullptr;
  std::string seed;  // "3", or the run's id when its seed is unknown
  double value = kNaN;
};
// The cell's chosen runs in seed order (skipped runs left out).
std::vector<SeedValue> seed_values(const Cell& cell, const std::string& key, Field field);
// The value as the tables print it, or why there is none: "div", "fail", "-" (pending).
std::string seed_text(const SeedValue& v, Field field);
// How many values pass the threshold (>= for accuracies, <= for error rates and loss).
int count_passing(const std::vector<SeedValue>& values, Field field, double threshold);
bool passes(double value, Field field, double threshold);

// Aggregate of one eval key and field over a cell's chosen runs.
struct CellValue {
  Stats stats;       // over runs with a result
  int diverged = 0;  // chosen runs that diverged
  int failed = 0;    // ... that failed
  int pending = 0;   // ... not finished (unfinished, missing, unreadable)
};
CellValue cell_value(const Cell& cell, const std::string& key, Field field);

class CellGrid {
 public:
  CellGrid(const Study& study, const Metric& metric);
  const Cell* find(const std::string& model, int64_t depth, int64_t length) const;
  std::vector<int64_t> depths(const std::string& model) const;  // ascending, over all lengths
  const std::vector<int64_t>& lengths() const { return lengths_; }  // train lengths, ascending
  bool compares_lrs() const { return compares_lrs_; }
  std::vector<double> lrs() const;

 private:
  std::map<std::tuple<std::string, int64_t, int64_t>, Cell> cells_;
  std::vector<int64_t> lengths_;
  bool compares_lrs_ = false;
};

struct TableOptions {
  std::string metric;                 // see parse_metric
  std::vector<std::string> keys;      // eval keys of the accuracy grid; empty = the metric's key; "all"
  std::string spread = "std";         // "std": mean ± sd (n); "range": mean [min, max] (n)
  std::optional<double> threshold;    // min-depth threshold; default the manifest's, else 0.9
  std::string min_depth_over = "best";  // "best" (max over seeds) or "mean" (mean over seeds)
  bool per_seed = false;              // error table: one row per seed under each aggregate row
  std::vector<std::string> tables;    // grid, seeds, min-depth(-token), errors, length, runs; empty = automatic
};

struct Table {
  std::string id;     // "grid", "seeds", "min-depth", "min-depth-token", "errors", "length", "runs"
  std::string title;  // one line
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // lines printed under the table
  // The CSV form: every number in its own column (mean, sd, n, ..., one column per seed), one
  // row per cell and field; empty: render_csv writes header and rows.
  std::vector<std::string> csv_header;
  std::vector<std::vector<std::string>> csv_rows;
};

// The tables for `study`. Automatic selection: grid and seeds always; min-depth when the runs have
// two or more depths, and beside it min-depth-token (the same key's token accuracy >= 0.9) when the
// metric is a sequence accuracy that differs from the token accuracy; errors when the task is flipflop, an eval key is sparse or dense, or the
// metric is an error rate; length when an eval key has "@LENGTH". sb::Error for an unknown table
// name or option value.
std::vector<Table> build_tables(const Study& study, const TableOptions& options);

Table accuracy_grid(const Study& study, const TableOptions& options);
Table seeds_table(const Study& study, const TableOptions& options);
Table min_depth_table(const Study& study, const TableOptions& options);
Table error_table(const Study& study, const TableOptions& options);
Table length_table(const Study& study, const TableOptions& options);
Table runs_table(const Study& study, const TableOptions& options);

// "0.987" (3 decimals; loss: 4 significant digits); "-" for NaN.
std::string format_number(double v, Field field);
// "0.987 ± 0.004 (3)", "0.987 [0.980, 0.990] (3)", "0.987 (1)"; "-" when n = 0.
std::string format_stats(const Stats& s, Field field, const std::string& spread);
// A cell of the accuracy grid: the stats, or "div" / "fail" / "div/fail" / "-" when no run of the
// chosen learning rate has a result, plus " [k div]" / " [k fail]" for some seeds lost.
std::string format_cell(const CellValue& v, Field field, const std::string& spread);
// "errors/scored = rate% [lo%, hi%]" with the exact 95% bound.
std::string format_errors(int64_t errors, int64_t scored, const Interval& bound);
// A percentage with three significant digits and no exponent ("0", "6.90", "0.00857").
std::string format_percent(double fraction);

// Headline (study, protocol, run counts) and the tables.
std::string render_markdown(const Study& study, const std::vector<Table>& tables);
// Per table: a "# title" line, the CSV header and rows (csv_header/csv_rows when set), "# note"
// lines; a blank line between tables.
std::string render_csv(const std::vector<Table>& tables);
std::string csv_field(const std::string& s);  // quoted when it holds a comma, quote or newline

}  // namespace sb::report
