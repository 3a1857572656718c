// tables_fixture.hpp: hand-written run and sweep directories for the `statebench table` tests
// (test_tables*.cpp): RunSpec -> summary.json, write_sweep -> manifest.json + cells/, the shared
// 2 x 2 x 2 x 2 grid of runs, and lookups of a table's row and cell by leading labels and column header.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/atomic_file.hpp"
#include "report/tables.hpp"
#include "train/stats.hpp"

namespace sb::report::tables_test {

namespace fs = std::filesystem;

inline fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(SB_TEST_TMP) / ("tables_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct EvalSpec {
  double acc;
  int64_t scored = 1000, errors = -1;  // errors -1: round((1 - acc) * scored)
  std::optional<std::pair<double, double>> ci = std::nullopt;
  std::optional<double> seq = std::nullopt;  // sequence accuracy; default acc / 2
};

inline std::string eval_json(const EvalSpec& e) {
  const int64_t errors = e.errors >= 0 ? e.errors : std::llround((1 - e.acc) * static_cast<double>(e.scored));
  const Interval ci = e.ci ? Interval{e.ci->first, e.ci->second} : clopper_pearson(errors, e.scored);
  return fmt::format(
      "{{\"token_accuracy\": {}, \"sequence_accuracy\": {}, \"scored\": {}, \"errors\": {}, \"error_rate\": {}, "
      "\"error_ci95\": [{}, {}], \"sequences\": 100, \"sequence_errors\": 3, \"sequence_error_ci95\": [0.01, 0.08], "
      "\"loss\": 0.25}}",
      e.acc, e.seq ? *e.seq : e.acc / 2, e.scored, errors, static_cast<double>(errors) / static_cast<double>(e.scored), ci.lo, ci.hi);
}

struct RunSpec {
  std::string attention = "path";
  int depth = 1;
  int length = 16;
  int seed = 0;
  double lr = 3e-4;
  std::string status = "completed";
  std::string task = "word_problem";
  int d_model = 64;
  int head_dim = 32;  // a derived setting: in summary.json, never in the manifest's overrides
  int target_steps = 100;  // summary.json "target_steps" (the configured steps)
  std::vector<std::pair<std::string, std::string>> params;  // more task_params: {"num_kv_pairs", "4"}
  std::vector<std::pair<std::string, EvalSpec>> evals;
};

inline std::string summary_json(const RunSpec& r) {
  std::string evals, layers, params;
  std::string fingerprint = fmt::format("{}-{}-{}-{}-{}-{}-{}-{}", r.task, r.attention, r.depth, r.length, r.seed, r.lr,
                                        r.d_model, r.target_steps);
  for (const auto& [key, value] : r.params) params += fmt::format(", \"{}\": \"{}\"", key, value), fingerprint += "-" + value;
  for (const auto& [key, e] : r.evals) evals += fmt::format("{}\"{}\": {}", evals.empty() ? "" : ", ", key, eval_json(e));
  for (int i = 0; i < r.depth; ++i) layers += fmt::format("{}\"{}\"", i ? ", " : "", r.attention);
  return fmt::format(
      "{{\"status\": \"{}\", \"message\": \"{}\", \"steps\": 100, \"target_steps\": {}, \"wall_seconds\": 1.5, "
      "\"tokens_per_second\": 1e5, \"final_train_loss\": 0.1, \"task\": \"{}\", "
      "\"task_params\": {{\"group\": \"A5\", \"length\": \"{}\"{}}}, "
      "\"model\": {{\"attention\": \"{}\", \"layers\": [{}], \"n_layers\": {}, \"d_model\": {}, \"n_heads\": 2, \"head_dim\": {}}}, "
      "\"seed\": {}, \"lr\": {}, \"config_fingerprint\": \"{}\", \"eval\": {{{}}}, "
      "\"provenance\": {{\"commit\": \"abc123\", \"device\": \"cpu (2 threads)\"}}}}\n",
      r.status, r.status == "diverged" ? "non-finite loss" : "", r.target_steps, r.task, r.length, params, r.attention, layers, r.depth, r.d_model,
      r.head_dim, r.seed, r.lr, fingerprint, evals);
}

// "path_d1_L16_s0_lr0.0003", plus "_dm128" for a d_model other than 64 and "_VALUE" per param.
inline std::string cell_id(const RunSpec& r) {
  std::string id = fmt::format("{}_d{}_L{}_s{}_lr{}", r.attention, r.depth, r.length, r.seed, r.lr);
  if (r.d_model != 64) id += fmt::format("_dm{}", r.d_model);
  for (const auto& [key, value] : r.params) id += "_" + value;
  return id;
}

inline void write_run(const fs::path& dir, const RunSpec& r) {
  fs::create_directories(dir);
  write_file_atomic((dir / "summary.json").string(), summary_json(r));
}

// A sweep directory with manifest.json; cells listed in `skip` are in the manifest but not written.
inline fs::path write_sweep(const std::string& name, const std::vector<RunSpec>& runs, const std::vector<std::string>& skip = {},
                     const std::string& protocol = "grid", const std::string& options = "{\"threshold\": 0.9}") {
  const fs::path dir = scratch(name);
  std::string cells;
  for (const RunSpec& r : runs) {
    const std::string id = cell_id(r);
    cells += fmt::format(
        "{}  {{\"id\": \"{}\", \"dir\": \"cells/{}\", \"overrides\": {{\"model.attention\": \"{}\", \"model.n_layers\": \"{}\", "
        "\"model.d_model\": \"{}\", \"task.params.length\": \"{}\", \"train.seed\": \"{}\", \"optim.lr\": \"{}\"}}}}",
        cells.empty() ? "" : ",\n", id, id, r.attention, r.depth, r.d_model, r.length, r.seed, r.lr);
    if (std::find(skip.begin(), skip.end(), id) == skip.end()) write_run(dir / "cells" / id, r);
  }
  write_file_atomic((dir / "manifest.json").string(),
                    fmt::format("{{\"study\": \"{}\", \"protocol\": \"{}\", \"protocol_options\": {}, \"axes\": "
                                "[\"model.attention\", \"model.n_layers\", \"task.params.length\", \"train.seed\"], "
                                "\"cells\": [\n{}\n]}}\n",
                                name, protocol, options, cells));
  return dir;
}

// 2 models x 2 depths x 2 lengths x 2 seeds; val token accuracies chosen by hand, val@64 = val / 2.
inline const std::map<std::string, std::pair<double, double>> kAcc = {
    {"path_d1_L16", {0.80, 0.90}}, {"path_d1_L32", {0.70, 0.80}}, {"path_d2_L16", {0.95, 1.00}},
    {"path_d2_L32", {0.88, 0.94}}, {"rope_d1_L16", {0.50, 0.60}}, {"rope_d1_L32", {0.40, 0.50}},
    {"rope_d2_L16", {0.85, 0.93}}, {"rope_d2_L32", {0.60, 0.70}}};

inline std::vector<RunSpec> grid_runs() {
  std::vector<RunSpec> runs;
  for (const char* att : {"path", "rope"})
    for (int depth : {1, 2})
      for (int length : {16, 32})
        for (int seed : {0, 1}) {
          RunSpec r;
          r.attention = att, r.depth = depth, r.length = length, r.seed = seed;
          const auto acc = kAcc.at(fmt::format("{}_d{}_L{}", att, depth, length));
          const double a = seed == 0 ? acc.first : acc.second;
          r.evals = {{"val", {a}}, {"val@64", {a / 2}}};
          runs.push_back(r);
        }
  return runs;
}

inline const std::vector<std::string>& row_of(const Table& t, const std::vector<std::string>& lead) {
  for (const auto& row : t.rows)
    if (std::equal(lead.begin(), lead.end(), row.begin())) return row;
  static const std::vector<std::string> none;
  ADD_FAILURE() << "no row starting with " << lead.front() << " in " << t.title;
  return none;
}

inline std::string cell(const Table& t, const std::vector<std::string>& lead, const std::string& column) {
  const auto& row = row_of(t, lead);
  const auto it = std::find(t.header.begin(), t.header.end(), column);
  if (it == t.header.end()) {
    ADD_FAILURE() << "no column " << column << " in " << t.title;
    return "";
  }
  const size_t c = static_cast<size_t>(it - t.header.begin());
  return c < row.size() ? row[c] : "";
}

// RFC 4180 records ("" inside quotes is a quote); a blank line is an empty record.
inline std::vector<std::vector<std::string>> parse_csv(const std::string& csv) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < csv.size(); ++i) {
    const char c = csv[i];
    if (quoted) {
      if (c == '"' && i + 1 < csv.size() && csv[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      fields.push_back(field), field.clear(), any = true;
    } else if (c == '\n') {
      if (any || !field.empty()) fields.push_back(field);
      records.push_back(fields), fields.clear(), field.clear(), any = false;
    } else {
      field += c, any = true;
    }
  }
  if (quoted) ADD_FAILURE() << "unterminated quoted CSV field";
  return records;
}

}  // namespace sb::report::tables_test
