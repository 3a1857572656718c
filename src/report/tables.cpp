// tables.cpp: metric spec, cell grouping with best learning rate and the five tables (see
// tables.hpp; cell texts and rendering live in table_render.cpp).
#include "report/tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"

namespace sb::report {

namespace {

constexpr Field kFields[] = {Field::token_accuracy, Field::sequence_accuracy, Field::error_rate,
                             Field::sequence_error_rate, Field::loss};

bool parse_field(const std::string& s, Field& out) {
  for (Field f : kFields)
    if (s == to_string(f)) return out = f, true;
  return false;
}

bool better(double a, double b, bool higher) { return higher ? a > b : a < b; }

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// "L=64", with the settings bound to the length: "L=64 (num_kv_pairs=4)" (Study::length_keys).
std::string length_label(const Study& study, int64_t length) {
  const std::string label = length > 0 ? fmt::format("L={}", length) : "L=?";
  const std::string bound = length_settings_text(study, length);
  return bound.empty() ? label : label + " (" + bound + ")";
}

void append(std::vector<std::string>& to, const std::vector<std::string>& items) {
  to.insert(to.end(), items.begin(), items.end());
}

void note_length_keys(const Study& study, Table& t) {
  if (study.length_keys.empty()) return;
  const std::vector<std::string> names = length_key_names(study);
  const bool one = names.size() == 1;
  t.notes.push_back(fmt::format("{} {} one value per train length, so {} shown with L, not in the model label",
                                join(names, ", "), one ? "takes" : "take", one ? "it is" : "they are"));
}

double threshold_of(const Study& study, const TableOptions& o) {
  return o.threshold ? *o.threshold : study.info.threshold ? *study.info.threshold : 0.9;
}

std::string spread_words(const std::string& spread) {
  return spread == "range" ? "mean [min, max] over seeds, (n) = seeds" : "mean ± sd over seeds, (n) = seeds";
}

std::string lr_words(const CellGrid& grid, const Metric& m) {
  if (!grid.compares_lrs()) return "";
  std::vector<std::string> lrs;
  for (double lr : grid.lrs()) lrs.push_back(fmt::format("{}", lr));
  return fmt::format("; best learning rate per cell by mean {} (of {})", m.name(), join(lrs, ", "));
}

std::string lr_suffix(const Cell& cell) { return cell.best_lr ? fmt::format(" lr={}", *cell.best_lr) : ""; }

}  // namespace

// ---- metric -------------------------------------------------------------------------------------

const char* to_string(Field f) {
  switch (f) {
    case Field::token_accuracy: return "token_accuracy";
    case Field::sequence_accuracy: return "sequence_accuracy";
    case Field::error_rate: return "error_rate";
    case Field::sequence_error_rate: return "sequence_error_rate";
    case Field::loss: return "loss";
  }
  return "?";
}

std::string Metric::name() const { return key + "." + to_string(field); }
bool Metric::higher_is_better() const { return field == Field::token_accuracy || field == Field::sequence_accuracy; }

Metric parse_metric(const std::string& spec_in, const Study& study) {
  const std::string spec = !spec_in.empty() ? spec_in : study.info.metric;
  const std::string first_key = study.eval_keys.empty() ? "val" : study.eval_keys.front();
  Metric m;
  if (spec.empty()) return m.key = first_key, m;
  const size_t dot = spec.rfind('.');
  if (dot != std::string::npos && parse_field(spec.substr(dot + 1), m.field)) {
    m.key = spec.substr(0, dot);
  } else if (parse_field(spec, m.field)) {
    m.key = first_key;
  } else {
    std::vector<std::string> names;
    for (Field f : kFields) names.push_back(to_string(f));
    fail("unknown metric '{}': expected KEY.FIELD with FIELD one of {}", spec, join(names, ", "));
  }
  if (!study.eval_keys.empty() &&
      std::find(study.eval_keys.begin(), study.eval_keys.end(), m.key) == study.eval_keys.end())
    fail("metric '{}': no run has eval key '{}' (keys: {})", spec, m.key, join(study.eval_keys, ", "));
  return m;
}

double metric_value(const RunRecord& run, const std::string& key, Field field) {
  const EvalResult* e = run.eval(key);
  if (!e || !has_result(run.status)) return kNaN;
  switch (field) {
    case Field::token_accuracy: return e->token_accuracy;
    case Field::sequence_accuracy: return e->sequence_accuracy;
    case Field::error_rate:
      if (!std::isnan(e->error_rate)) return e->error_rate;
      return e->scored > 0 && e->errors >= 0 ? static_cast<double>(e->errors) / static_cast<double>(e->scored) : kNaN;
    case Field::sequence_error_rate:
      if (e->sequences > 0 && e->sequence_errors >= 0)
        return static_cast<double>(e->sequence_errors) / static_cast<double>(e->sequences);
      return 1 - e->sequence_accuracy;
    case Field::loss: return e->loss;
  }
  return kNaN;
}

Stats compute_stats(const std::vector<double>& values) {
  Stats s;
  double sum = 0;
  for (double v : values) {
    if (std::isnan(v)) continue;
    s.min = s.n ? std::min(s.min, v) : v;
    s.max = s.n ? std::max(s.max, v) : v;
    sum += v, ++s.n;
  }
  if (s.n == 0) return s;
  s.mean = sum / s.n;
  if (s.n > 1) {
    double sq = 0;
    for (double v : values)
      if (!std::isnan(v)) sq += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(sq / (s.n - 1));
  }
  return s;
}

// ---- cells --------------------------------------------------------------------------------------

CellValue cell_value(const Cell& cell, const std::string& key, Field field) {
  CellValue v;
  std::vector<double> values;
  for (const RunRecord* r : cell.chosen) {
    if (r->status == RunStatus::diverged) ++v.diverged;
    else if (r->status == RunStatus::failed) ++v.failed;
    else if (is_pending(r->status)) ++v.pending;
    else values.push_back(metric_value(*r, key, field));
  }
  v.stats = compute_stats(values);
  return v;
}

CellGrid::CellGrid(const Study& study, const Metric& metric) {
  std::set<int64_t> lengths;
  for (const RunRecord& r : study.runs) {
    cells_[{r.model, r.depth, r.train_length}].runs.push_back(&r);
    lengths.insert(r.train_length);
  }
  lengths_.assign(lengths.begin(), lengths.end());
  const bool max_lr = study.info.protocol == "max_lr";
  for (auto& [where, cell] : cells_) {
    // Runs with no known learning rate (pending cells known only from the manifest) join every group.
    std::map<double, std::vector<const RunRecord*>> by_lr;
    std::vector<const RunRecord*> no_lr;
    for (const RunRecord* r : cell.runs) (r->lr ? by_lr[*r->lr] : no_lr).push_back(r);
    if (by_lr.empty()) by_lr[-1.0] = {};
    for (auto& [lr, runs] : by_lr) runs.insert(runs.end(), no_lr.begin(), no_lr.end());
    if (by_lr.size() < 2 && !max_lr) {
      cell.chosen = cell.runs;
      continue;
    }
    compares_lrs_ = true;
    double best = kNaN;
    for (const auto& [lr, runs] : by_lr) {
      Cell one;
      one.chosen = runs;
      const double mean = cell_value(one, metric.key, metric.field).stats.mean;
      if (!std::isnan(mean) && (std::isnan(best) || better(mean, best, metric.higher_is_better()))) {
        best = mean, cell.chosen = runs;
        if (lr >= 0) cell.best_lr = lr;
      }
    }
    if (std::isnan(best)) cell.chosen = cell.runs;  // nothing finished: show the statuses of all
  }
}

const Cell* CellGrid::find(const std::string& model, int64_t depth, int64_t length) const {
  const auto it = cells_.find({model, depth, length});
  return it == cells_.end() ? nullptr : &it->second;
}

std::vector<int64_t> CellGrid::depths(const std::string& model) const {
  std::set<int64_t> out;
  for (const auto& [where, cell] : cells_)
    if (std::get<0>(where) == model) out.insert(std::get<1>(where));
  return {out.begin(), out.end()};
}

std::vector<double> CellGrid::lrs() const {
  std::set<double> out;
  for (const auto& [where, cell] : cells_)
    for (const RunRecord* r : cell.runs)
      if (r->lr) out.insert(*r->lr);
  return {out.begin(), out.end()};
}

// ---- tables -------------------------------------------------------------------------------------

Table accuracy_grid(const Study& study, const TableOptions& o) {
  const Metric m = parse_metric(o.metric, study);
  const CellGrid grid(study, m);
  std::vector<std::string> keys = o.keys;
  if (keys.empty()) keys = {m.key};
  if (keys.size() == 1 && keys[0] == "all") keys = study.eval_keys;
  for (const auto& k : keys)
    if (std::find(study.eval_keys.begin(), study.eval_keys.end(), k) == study.eval_keys.end())
      fail("--keys: no run has eval key '{}' (keys: {})", k, join(study.eval_keys, ", "));
  Table t;
  t.id = "grid";
  const std::string what = keys.size() == 1 && keys[0] == m.key ? m.name() : fmt::format("{} of {}", to_string(m.field), join(keys, ", "));
  t.title = fmt::format("Accuracy grid: {} ({}{})", what, spread_words(o.spread), lr_words(grid, m));
  t.header = {"model", "depth"};
  for (int64_t L : grid.lengths())
    for (const auto& k : keys) t.header.push_back(keys.size() == 1 ? length_label(study, L) : length_label(study, L) + " " + k);
  bool symbols = false;
  for (const auto& model : study.models) {
    for (int64_t depth : grid.depths(model)) {
      std::vector<std::string> row{model, fmt::format("{}", depth)};
      for (int64_t L : grid.lengths()) {
        for (const auto& k : keys) {
          const Cell* cell = grid.find(model, depth, L);
          std::string text = cell ? format_cell(cell_value(*cell, k, m.field), m.field, o.spread) : "-";
          symbols |= text == "-" || text.find("div") != std::string::npos || text.find("fail") != std::string::npos;
          if (cell && text != "-") text += lr_suffix(*cell);
          row.push_back(text);
        }
      }
      t.rows.push_back(std::move(row));
    }
  }
  if (symbols) t.notes.push_back("- = no result (not run, skipped by the protocol, unfinished or unreadable); div / fail = every run diverged / failed; [k div] = k seeds diverged and are left out");
  if (const auto unused = unused_runs(study, m.key); !unused.empty())  // (n) counts only the seeds used
    t.notes.push_back(fmt::format("not used ({} run{}): {}{}", unused.size(), unused.size() == 1 ? "" : "s",
                                  join({unused.begin(), unused.begin() + std::min<size_t>(unused.size(), 10)}, "; "),
                                  unused.size() > 10 ? "; ..." : ""));
  note_length_keys(study, t);
  return t;
}

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
  enum class State { pass, fail, open };
  for (const auto& model : study.models) {
    std::vector<std::string> row{model};
    const std::vector<int64_t> depths = grid.depths(model);
    for (int64_t L : grid.lengths()) {
      std::string answer;
      bool all_failed = true;
      for (int64_t depth : depths) {
        const Cell* cell = grid.find(model, depth, L);
        State state = State::open;
        if (cell) {
          double value = kNaN;
          if (best) {
            for (const RunRecord* r : cell->runs) {
              const double v = metric_value(*r, m.key, m.field);
              if (!std::isnan(v) && (std::isnan(value) || better(v, value, higher))) value = v;
            }
          } else {
            value = cell_value(*cell, m.key, m.field).stats.mean;  // chosen = best lr by mean
          }
          const bool pass = !std::isnan(value) && (higher ? value >= threshold : value <= threshold);
          const bool open = std::any_of(cell->runs.begin(), cell->runs.end(), [](const RunRecord* r) {
            return is_pending(r->status) || r->status == RunStatus::failed;
          });
          state = pass ? State::pass : open ? State::open : State::fail;
        }
        if (state == State::pass) {
          answer = all_failed ? fmt::format("{}", depth) : fmt::format("? (<= {})", depth);
          break;
        }
        all_failed &= state == State::fail;
      }
      if (answer.empty()) answer = all_failed && !depths.empty() ? fmt::format("> {}", depths.back()) : "?";
      row.push_back(answer);
    }
    t.rows.push_back(std::move(row));
  }
  std::set<int64_t> all_depths;
  for (const RunRecord& r : study.runs) all_depths.insert(r.depth);
  std::vector<std::string> ds;
  for (int64_t d : all_depths) ds.push_back(fmt::format("{}", d));
  t.notes.push_back(fmt::format("depths run: {}; > d = no depth up to d reaches the threshold; ? = a smaller depth (or every depth) has no decided result yet (unfinished, missing or failed runs)", join(ds, ", ")));
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
  auto seed_text = [](const RunRecord* r) { return r->seed ? fmt::format("{}", *r->seed) : r->id; };
  for (const auto& [where, runs] : groups) {
    std::vector<std::string> lead{study.models[std::get<0>(where)]};
    if (show_depth) lead.push_back(fmt::format("{}", std::get<1>(where)));
    if (show_length) lead.push_back(fmt::format("{}", std::get<2>(where))), append(lead, length_setting_values(study, std::get<2>(where)));
    if (show_lr) lead.push_back(std::get<3>(where) >= 0 ? fmt::format("{}", std::get<3>(where)) : "?");
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
        if (used == 0) {
          text = diverged && failed ? "div/fail" : diverged ? "div" : failed ? "fail" : "-";
        } else {
          const Interval bound = used == 1 && single->error_ci95 ? *single->error_ci95 : clopper_pearson(errors, scored);
          text = format_errors(errors, scored, bound);
          if (diverged) text += fmt::format(" [{} div]", diverged);
          if (failed) text += fmt::format(" [{} fail]", failed);
        }
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

Table length_table(const Study& study, const TableOptions& o) {
  const Metric m = parse_metric(o.metric, study);
  const CellGrid grid(study, m);
  // Columns: per split with @LENGTH keys, the plain key (training length) then @LENGTH ascending.
  std::vector<std::string> splits;
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> by_split;
  for (const RunRecord& r : study.runs)
    for (const EvalResult& e : r.evals) {
      auto& list = by_split[e.split];
      if (std::none_of(list.begin(), list.end(), [&](const auto& p) { return p.second == e.key; }))
        list.push_back({e.at_length, e.key});
    }
  for (const auto& k : study.eval_keys) {
    const size_t at = k.rfind('@');
    const std::string split = at == std::string::npos ? k : k.substr(0, at);
    const auto& list = by_split[split];
    const bool has_at = std::any_of(list.begin(), list.end(), [](const auto& p) { return p.first > 0; });
    if (has_at && std::find(splits.begin(), splits.end(), split) == splits.end()) splits.push_back(split);
  }
  std::vector<std::string> columns;
  Table t;
  t.id = "length";
  const bool show_length = grid.lengths().size() > 1;
  t.header = {"model", "depth"};
  if (show_length) t.header.push_back("train L"), append(t.header, length_key_names(study));
  for (const auto& s : splits) {
    auto list = by_split[s];
    std::sort(list.begin(), list.end());
    for (const auto& [len, key] : list) {
      columns.push_back(key);
      t.header.push_back(len > 0 ? key : key + " (train L)");
    }
  }
  t.title = fmt::format("Length generalisation: {} by evaluation length ({}{}{})", to_string(m.field),
                        spread_words(o.spread), show_length ? "" : "; trained at " + length_label(study, grid.lengths().front()),
                        lr_words(grid, m));
  for (const auto& model : study.models)
    for (int64_t depth : grid.depths(model))
      for (int64_t L : grid.lengths()) {
        const Cell* cell = grid.find(model, depth, L);
        if (!cell) continue;
        std::vector<std::string> row{model, fmt::format("{}", depth)};
        if (show_length) row.push_back(fmt::format("{}", L)), append(row, length_setting_values(study, L));
        for (const auto& k : columns) row.push_back(format_cell(cell_value(*cell, k, m.field), m.field, o.spread));
        if (cell->best_lr) row.back() += lr_suffix(*cell);
        t.rows.push_back(std::move(row));
      }
  return t;
}

Table runs_table(const Study& study, const TableOptions& o) {
  const Metric m = parse_metric(o.metric, study);
  Table t;
  t.id = "runs";
  t.title = fmt::format("Runs: {} of every eval key", to_string(m.field));
  t.header = {"id", "model", "depth", "L"};
  append(t.header, length_key_names(study));
  append(t.header, {"seed", "lr", "status", "steps"});
  for (const auto& k : study.eval_keys) t.header.push_back(k);
  t.header.push_back("message");
  for (const RunRecord& r : study.runs) {
    std::vector<std::string> row{r.id, r.model, fmt::format("{}", r.depth), fmt::format("{}", r.train_length)};
    append(row, length_setting_values(study, r.train_length));
    append(row, {r.seed ? fmt::format("{}", *r.seed) : "-", r.lr ? fmt::format("{}", *r.lr) : "-", to_string(r.status),
                 r.steps ? fmt::format("{}", *r.steps) : "-"});
    for (const auto& k : study.eval_keys) row.push_back(format_number(metric_value(r, k, m.field), m.field));
    row.push_back(r.message);
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::vector<Table> build_tables(const Study& study, const TableOptions& o) {
  if (o.spread != "std" && o.spread != "range") fail("--spread: expected std or range, got '{}'", o.spread);
  const Metric m = parse_metric(o.metric, study);
  std::vector<std::string> ids = o.tables;
  if (ids.empty()) {
    // The min-depth table answers nothing the grid does not when every run has the same depth.
    const bool several_depths = std::any_of(study.runs.begin(), study.runs.end(),
                                            [&](const RunRecord& r) { return r.depth != study.runs.front().depth; });
    ids = {"grid"};
    if (several_depths) ids.push_back("min-depth");
    const bool flipflop = std::any_of(study.runs.begin(), study.runs.end(), [](const RunRecord& r) {
      const auto it = r.settings.find("task.name");
      return it != r.settings.end() && it->second == "flipflop";
    });
    const bool ff_keys = std::any_of(study.eval_keys.begin(), study.eval_keys.end(),
                                     [](const std::string& k) { return k == "sparse" || k == "dense"; });
    if (flipflop || ff_keys || m.field == Field::error_rate) ids.push_back("errors");
    if (std::any_of(study.eval_keys.begin(), study.eval_keys.end(), [](const std::string& k) { return k.find('@') != std::string::npos; }))
      ids.push_back("length");
  }
  std::vector<Table> out;
  for (const auto& id : ids) {
    if (id == "grid") out.push_back(accuracy_grid(study, o));
    else if (id == "min-depth") out.push_back(min_depth_table(study, o));
    else if (id == "errors") out.push_back(error_table(study, o));
    else if (id == "length") out.push_back(length_table(study, o));
    else if (id == "runs") out.push_back(runs_table(study, o));
    else fail("--tables: unknown table '{}' (grid, min-depth, errors, length, runs)", id);
  }
  return out;
}

}  // namespace sb::report
