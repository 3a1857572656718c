// curves.cpp: reading runs' learning curves (metrics.jsonl, or a study's curves.jsonl.gz through
// zlib) and drawing one loss + accuracy figure per table cell (see curves.hpp).
#include "report/curves.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "report/plot.hpp"
#include "report/study_plots.hpp"

namespace sb::report {

namespace fs = std::filesystem;

namespace {

double number_or_nan(const Json* v) { return v && v->is_number() ? v->get<double>() : NAN; }

// Adds one metrics line (a "train" or "eval" object) to `c`.
void add_line(RunCurve& c, const Json& j) {
  const Json* kind = json_field(j, "kind");
  const Json* step = json_field(j, "step");
  if (!kind || !kind->is_string() || !step || !step->is_number_integer()) return;
  if (*kind == "train") {
    c.loss.emplace_back(step->get<int64_t>(), number_or_nan(json_field(j, "loss")));
  } else if (*kind == "eval") {
    RunCurve::Eval e;
    e.step = step->get<int64_t>();
    if (const Json* eval = json_field(j, "eval"); eval && eval->is_object())
      for (const auto& [key, v] : eval->items())
        e.accuracy[key] = {number_or_nan(json_field(v, "token_accuracy")), number_or_nan(json_field(v, "sequence_accuracy"))};
    c.evals.push_back(std::move(e));
  }
}

// Calls `each(line number, object)` for every non-blank line of `text`; sb::Error for a line that
// is not a JSON object.
template <class F>
void each_line(const std::string& text, const std::string& file, F each) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j;
    try {
      j = parse_json(line);
    } catch (const Error& e) {
      fail("'{}' line {}: {}", file, n, e.what());
    }
    if (!j.is_object()) fail("'{}' line {}: expected a JSON object", file, n);
    each(j);
  }
}

// A round upper end for a loss axis: 2.37 -> 3, 0.68 -> 0.7.
double nice_ceiling(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1;
  const double unit = std::pow(10.0, std::floor(std::log10(v)));
  return std::ceil(v / unit - 1e-9) * unit;
}

}  // namespace

std::map<std::string, RunCurve> load_curves(const Study& study) {
  std::map<std::string, RunCurve> out;
  std::map<std::string, std::map<std::string, RunCurve>> packed;  // study dir -> cell id -> curve
  for (const RunRecord& r : study.runs) {
    const fs::path own = fs::path(r.dir) / "metrics.jsonl";
    if (!r.dir.empty() && fs::is_regular_file(own)) {
      RunCurve c;
      c.source = own.string();
      each_line(read_file(own.string()), c.source, [&](const Json& j) { add_line(c, j); });
      out[r.id] = std::move(c);
      continue;
    }
    const fs::path file = fs::path(r.study_dir) / "curves.jsonl.gz";
    if (r.study_dir.empty() || !fs::is_regular_file(file)) continue;
    auto [it, fresh] = packed.try_emplace(r.study_dir);
    if (fresh)
      each_line(read_file_gzip(file.string()), file.string(), [&](const Json& j) {
        const Json* cell = json_field(j, "cell");
        if (!cell || !cell->is_string()) return;
        RunCurve& c = it->second[cell->get<std::string>()];
        c.source = file.string();
        add_line(c, j);
      });
    if (const auto c = it->second.find(r.id); c != it->second.end()) out[r.id] = c->second;
  }
  return out;
}

void cut_at_step(Study& study, int64_t step) {
  const std::map<std::string, RunCurve> curves = load_curves(study);
  size_t with_value = 0;  // runs with a value at `step`
  for (RunRecord& r : study.runs) {
    const bool ended = r.status == RunStatus::completed || r.status == RunStatus::early_stopped ||
                       r.status == RunStatus::diverged || r.status == RunStatus::failed;
    if (!ended && r.status != RunStatus::unfinished) continue;  // missing, skipped, unreadable: nothing to cut
    const auto it = curves.find(r.id);
    const RunCurve::Eval* last = nullptr;  // the last evaluation at or before `step`
    int64_t reached = 0;                   // the last step of its curve
    if (it != curves.end()) {
      for (const RunCurve::Eval& e : it->second.evals) {
        if (e.step <= step) last = &e;
        reached = std::max(reached, e.step);
      }
      for (const auto& [s, loss] : it->second.loss) reached = std::max(reached, s);
    }
    if (ended && (r.steps ? *r.steps : reached) <= step) {  // ended by then (a summary without steps: by its curve)
      with_value += r.status == RunStatus::completed || r.status == RunStatus::early_stopped;
      continue;
    }
    r.evals.clear();
    if (it == curves.end() || !last || (!ended && reached < step)) {
      r.status = RunStatus::unfinished;
      r.message = it == curves.end() ? fmt::format("no learning curve to read step {} from", step)
                  : !last            ? fmt::format("no evaluation by step {}", step)
                                     : fmt::format("stopped at step {}, before step {}", reached, step);
      continue;
    }
    ++with_value;
    r.status = RunStatus::completed;
    r.steps = last->step;
    for (const auto& [key, acc] : last->accuracy) {
      EvalResult e = eval_of_key(key);
      e.token_accuracy = acc.first, e.sequence_accuracy = acc.second;
      r.evals.push_back(std::move(e));
    }
  }
  if (with_value == 0) fail("no run of '{}' has an evaluation at or before step {}", study.dir, step);
  study.info.name += fmt::format(" (at step {})", step);
}

std::vector<std::string> write_curve_plots(const Study& study, const TableOptions& o, const std::string& dir) {
  const std::map<std::string, RunCurve> curves = load_curves(study);
  if (curves.empty())
    fail("no learning curves in '{}' (neither cells/*/metrics.jsonl nor curves.jsonl.gz)", study.dir);
  const Metric m = parse_metric(o.metric, study);
  const CellGrid grid(study, m);
  fs::create_directories(dir);
  std::vector<std::string> files;
  for (const auto& model : study.models)
    for (int64_t depth : grid.depths(model))
      for (int64_t L : grid.lengths()) {
        const Cell* cell = grid.find(model, depth, L);
        if (!cell) continue;
        LinePlotSpec loss, acc;
        const std::string where = fmt::format("{}, depth {}, L={}{}", model, depth, L,
                                              cell->best_lr ? fmt::format(", lr={}", *cell->best_lr) : "");
        loss.title = where + ": training loss";
        acc.title = fmt::format("{}: {} accuracy", where, m.key);
        loss.x_label = acc.x_label = "step";
        loss.y_label = "loss";
        acc.y_label = "accuracy (token solid, seq dashed)";
        loss.log_x = acc.log_x = false;
        loss.x_ticks = acc.x_ticks = 5;
        double top = 0;
        int colour = 0;
        for (const SeedValue& v : seed_values(*cell, m.key, m.field)) {
          const auto c = curves.find(v.run->id);
          if (c == curves.end()) continue;
          const std::string name = "seed " + v.seed;
          Series l{name, {}, colour}, token{name, {}, colour}, seq{name + " seq", {}, colour, true};
          for (const auto& [step, value] : c->second.loss) {
            l.points.emplace_back(static_cast<double>(step), value);
            if (std::isfinite(value)) top = std::max(top, value);
          }
          for (const RunCurve::Eval& e : c->second.evals)
            if (const auto a = e.accuracy.find(m.key); a != e.accuracy.end()) {
              token.points.emplace_back(static_cast<double>(e.step), a->second.first);
              seq.points.emplace_back(static_cast<double>(e.step), a->second.second);
            }
          loss.series.push_back(std::move(l));
          acc.series.push_back(std::move(token));
          acc.series.push_back(std::move(seq));
          ++colour;
        }
        if (loss.series.empty()) continue;
        loss.ymax = nice_ceiling(top);
        const std::string stem = fmt::format("curves_{}_d{}_L{}", file_stem(model), depth, L);
        files.push_back(write_figure(beside(line_plot_figure(loss), line_plot_figure(acc)), (fs::path(dir) / stem).string()));
      }
  return files;
}

}  // namespace sb::report
