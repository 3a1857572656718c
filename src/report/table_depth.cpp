// table_depth.cpp: the tables of decisions and counts (tables.hpp): minimum depth (with how many
// runs pass at that depth), flip-flop style error counts with exact 95% bounds, and the per-run
// listing; each with its CSV form of plain numbers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "report/table_parts.hpp"
#include "report/tables.hpp"

namespace sb::report {

using namespace parts;

Table min_depth_table(const Study& study, const TableOptions& o) {
  if (o.min_depth_over != "best" && o.min_depth_over != "mean")
    fail("--min-depth-over: expected best or mean, got '{}'", o.min_depth_over);
  const Metric m = parse_metric(o.metric, study);
  const CellGrid grid(study, m);
  const double threshold = threshold_of(study, o);
  const bool higher = m.higher_is_better(), best = o.min_depth_over == "best";
  Table t;
  t.id = "min-depth";
  t.title = fmt::format("Minimum depth: smallest depth whose {} {} {} {} {}", best ? "best" : "mean", m.name(),
                        higher ? ">=" : "<=", threshold,
                        best ? "(best over seeds and learning rates)" : "(mean over seeds, best learning rate)");
  t.header = {"model"};
  for (int64_t L : grid.lengths()) t.header.push_back(length_label(study, L));
  t.csv_header = {"model", "L"};
  append(t.csv_header, length_key_names(study));
  append(t.csv_header, {"min_depth", "answer", "passed", "runs"});
  enum class State { pass, fail, open };
  for (const auto& model : study.models) {
    std::vector<std::string> row{model};
    const std::vector<int64_t> depths = grid.depths(model);
    for (int64_t L : grid.lengths()) {
      // Each depth's state and, where it passes, its counts. A depth skipped by the protocol below
      // a depth that fails (min_depth order deepest_first: the deepest did not reach) fails too,
      // as the protocol takes it; a skipped depth above a pass is never read.
      std::vector<State> states;
      std::vector<bool> skipped;
      std::vector<std::pair<int, int>> counts;  // (passing, with a value) at each depth
      for (int64_t depth : depths) {
        const Cell* cell = grid.find(model, depth, L);
        State state = State::open;
        bool only_skipped = false;
        int passed = 0, n = 0;
        if (cell) {
          double value = kNaN;
          Cell scope = *cell;  // best: every run (all learning rates); mean: the chosen ones
          if (best) scope.chosen = cell->runs;
          const std::vector<SeedValue> values = seed_values(scope, m.key, m.field);
          std::vector<double> xs;
          for (const SeedValue& v : values) xs.push_back(v.value);
          const Stats s = compute_stats(xs);
          value = best ? s.best(m.field) : cell_value(*cell, m.key, m.field).stats.mean;  // chosen = best lr by mean
          const bool pass = passes(value, m.field, threshold);
          passed = count_passing(values, m.field, threshold), n = s.n;
          // Skipped by the protocol (a smaller depth reached under the study's rule): not decided
          // under another metric or threshold.
          const bool open = std::any_of(cell->runs.begin(), cell->runs.end(), [](const RunRecord* r) {
            return is_pending(r->status) || r->status == RunStatus::failed || r->status == RunStatus::skipped;
          });
          only_skipped = !cell->runs.empty() && std::all_of(cell->runs.begin(), cell->runs.end(), [](const RunRecord* r) {
            return r->status == RunStatus::skipped;
          });
          state = pass ? State::pass : open ? State::open : State::fail;
        }
        states.push_back(state), skipped.push_back(only_skipped), counts.emplace_back(passed, n);
      }
      for (size_t i = depths.size(); i-- > 1;)
        if (states[i] == State::fail)
          for (size_t j = 0; j < i; ++j)
            if (skipped[j]) states[j] = State::fail;
      std::string answer;
      bool all_failed = true;
      for (size_t i = 0; i < depths.size(); ++i) {
        const int64_t depth = depths[i];
        const auto [passed, n] = counts[i];
        if (states[i] == State::pass) {
          answer = all_failed ? fmt::format("{}", depth) : fmt::format("? (<= {})", depth);
          std::vector<std::string> csv{model, csv_integer(L)};
          append(csv, length_setting_values(study, L));
          append(csv, {all_failed ? csv_integer(depth) : "", answer, csv_integer(passed), csv_integer(n)});
          t.csv_rows.push_back(std::move(csv));
          if (all_failed) answer += fmt::format(" ({}/{})", passed, n);
          break;
        }
        all_failed &= states[i] == State::fail;
      }
      if (answer.empty()) {
        answer = all_failed && !depths.empty() ? fmt::format("> {}", depths.back()) : "?";
        std::vector<std::string> csv{model, csv_integer(L)};
        append(csv, length_setting_values(study, L));
        append(csv, {"", answer, "", ""});
        t.csv_rows.push_back(std::move(csv));
      }
      row.push_back(answer);
    }
    t.rows.push_back(std::move(row));
  }
  std::set<int64_t> all_depths;
  for (const RunRecord& r : study.runs) all_depths.insert(r.depth);
  std::vector<std::string> ds;
  for (int64_t d : all_depths) ds.push_back(fmt::format("{}", d));
  t.notes.push_back(fmt::format("depths run: {}; d (k/n) = k of the n runs with a value at depth d pass; > d = no depth up to d reaches the threshold; ? = a smaller depth (or every depth) has no decided result yet (unfinished, missing or failed runs)", join(ds, ", ")));
  note_length_keys(study, t);
  return t;
}

Table error_table(const Study& study, const TableOptions& o) {
  std::vector<std::string> keys;
  for (const auto& k : study.eval_keys) {
    const bool counted = std::any_of(study.runs.begin(), study.runs.end(), [&](const RunRecord& r) {
      const EvalResult* e = r.eval(k);
      return e && e->scored >= 0 && e->errors >= 0;
    });
    if (counted) keys.push_back(k);
  }
  // Rows: (model, depth, train length, lr), in model order.
  using Where = std::tuple<size_t, int64_t, int64_t, double>;
  std::map<Where, std::vector<const RunRecord*>> groups;
  std::set<int64_t> depths, lengths;
  std::set<double> lrs;
  for (const RunRecord& r : study.runs) {
    const size_t mi = static_cast<size_t>(std::find(study.models.begin(), study.models.end(), r.model) - study.models.begin());
    groups[{mi, r.depth, r.train_length, r.lr ? *r.lr : -1.0}].push_back(&r);
    depths.insert(r.depth), lengths.insert(r.train_length), lrs.insert(r.lr ? *r.lr : -1.0);
  }
  const bool show_depth = depths.size() > 1, show_length = lengths.size() > 1, show_lr = lrs.size() > 1;
  Table t;
  t.id = "errors";
  std::string fixed;
  if (!show_depth) fixed += fmt::format(", depth {}", *depths.begin());
  if (!show_length) fixed += ", " + length_label(study, *lengths.begin());
  t.title = fmt::format("Error rates: errors/scored = rate% [exact 95% interval], summed over seeds{}", fixed);
  t.header = {"model"};
  if (show_depth) t.header.push_back("depth");
  if (show_length) t.header.push_back("L"), append(t.header, length_key_names(study));
  if (show_lr) t.header.push_back("lr");
  t.header.push_back("seeds");
  for (const auto& k : keys) t.header.push_back(k);
  t.csv_header = {"model", "depth", "L"};
  append(t.csv_header, length_key_names(study));
  append(t.csv_header, {"lr", "seeds", "key", "errors", "scored", "error_rate", "ci95_lo", "ci95_hi", "runs", "diverged", "failed"});
  auto seed_text = [](const RunRecord* r) { return r->seed ? fmt::format("{}", *r->seed) : r->id; };
  for (const auto& [where, runs] : groups) {
    std::vector<std::string> lead{study.models[std::get<0>(where)]};
    if (show_depth) lead.push_back(fmt::format("{}", std::get<1>(where)));
    if (show_length) lead.push_back(fmt::format("{}", std::get<2>(where))), append(lead, length_setting_values(study, std::get<2>(where)));
    if (show_lr) lead.push_back(std::get<3>(where) >= 0 ? fmt::format("{}", std::get<3>(where)) : "?");
    std::vector<std::string> csv_lead{study.models[std::get<0>(where)], csv_integer(std::get<1>(where)),
                                      std::get<2>(where) > 0 ? csv_integer(std::get<2>(where)) : ""};
    append(csv_lead, length_setting_values(study, std::get<2>(where)));
    csv_lead.push_back(std::get<3>(where) >= 0 ? fmt::format("{}", std::get<3>(where)) : "");
    auto row_for = [&](const std::vector<const RunRecord*>& rs, const std::string& seeds_label) {
      std::vector<std::string> row = lead;
      row.push_back(seeds_label);
      for (const auto& k : keys) {
        int64_t errors = 0, scored = 0;
        int used = 0, diverged = 0, failed = 0;
        const EvalResult* single = nullptr;
        for (const RunRecord* r : rs) {
          if (r->status == RunStatus::diverged) ++diverged;
          if (r->status == RunStatus::failed) ++failed;
          const EvalResult* e = r->eval(k);
          if (!has_result(r->status) || !e || e->scored < 0 || e->errors < 0) continue;
          errors += e->errors, scored += e->scored, ++used, single = e;
        }
        std::string text;
        std::vector<std::string> csv = csv_lead;
        append(csv, {seeds_label, k});
        if (used == 0) {
          text = diverged && failed ? "div/fail" : diverged ? "div" : failed ? "fail" : "-";
          append(csv, {"", "", "", "", ""});
        } else {
          const Interval bound = used == 1 && single->error_ci95 ? *single->error_ci95 : clopper_pearson(errors, scored);
          text = format_errors(errors, scored, bound);
          append(csv, {csv_integer(errors), csv_integer(scored),
                       csv_number(static_cast<double>(errors) / static_cast<double>(scored)), csv_number(bound.lo),
                       csv_number(bound.hi)});
          if (diverged) text += fmt::format(" [{} div]", diverged);
          if (failed) text += fmt::format(" [{} fail]", failed);
        }
        append(csv, {csv_integer(used), csv_integer(diverged), csv_integer(failed)});
        t.csv_rows.push_back(std::move(csv));
        row.push_back(text);
      }
      return row;
    };
    std::vector<std::string> seeds;
    for (const RunRecord* r : runs)
      if (has_result(r->status)) seeds.push_back(seed_text(r));
    t.rows.push_back(row_for(runs, seeds.empty() ? "-" : join(seeds, ",")));
    if (o.per_seed && runs.size() > 1)
      for (const RunRecord* r : runs) t.rows.push_back(row_for({r}, seed_text(r)));
  }
  t.notes.push_back("intervals: Clopper-Pearson 95% for the summed counts (a single run's own error_ci95 when one run contributes); 0 errors still give an upper bound");
  return t;
}

Table runs_table(const Study& study, const TableOptions& o) {
  const Metric m = parse_metric(o.metric, study);
  Table t;
  t.id = "runs";
  const std::vector<Field> fields = shown_fields(study, m, study.eval_keys);
  t.title = fmt::format("Runs: {} of every eval key{}", to_string(m.field),
                        fields.size() > 1 ? fmt::format(", {} beside it", to_string(fields[1])) : "");
  t.header = {"id", "model", "depth", "L"};
  append(t.header, length_key_names(study));
  append(t.header, {"seed", "lr", "status", "steps"});
  for (const auto& k : study.eval_keys)
    for (Field f : fields) t.header.push_back(f == m.field ? k : k + " " + short_name(f));
  t.header.push_back("message");
  t.csv_header = {"id", "model", "depth", "L"};
  append(t.csv_header, length_key_names(study));
  append(t.csv_header, {"seed", "lr", "status", "steps"});
  for (const auto& k : study.eval_keys)
    for (Field f : fields) t.csv_header.push_back(k + " " + to_string(f));
  t.csv_header.push_back("message");
  for (const RunRecord& r : study.runs) {
    std::vector<std::string> row{r.id, r.model, fmt::format("{}", r.depth), fmt::format("{}", r.train_length)};
    append(row, length_setting_values(study, r.train_length));
    append(row, {r.seed ? fmt::format("{}", *r.seed) : "-", r.lr ? fmt::format("{}", *r.lr) : "-", to_string(r.status),
                 r.steps ? fmt::format("{}", *r.steps) : "-"});
    std::vector<std::string> csv = row;
    for (auto& c : csv) c = c == "-" ? "" : c;
    for (const auto& k : study.eval_keys)
      for (Field f : fields) {
        row.push_back(format_number(metric_value(r, k, f), f));
        csv.push_back(csv_number(metric_value(r, k, f)));
      }
    row.push_back(r.message);
    csv.push_back(r.message);
    t.rows.push_back(std::move(row));
    t.csv_rows.push_back(std::move(csv));
  }
  return t;
}

}  // namespace sb::report
