// tables.cpp: metric spec, statistics, cell grouping with the best learning rate, seed values,
// the helpers the table builders share (table_parts.hpp) and the automatic table selection (see
// tables.hpp; the tables: table_grid.cpp, table_depth.cpp; texts and rendering: table_render.cpp).
#include "report/tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.hpp"
#include "report/table_parts.hpp"

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

}  // namespace

// ---- shared by the table builders (table_parts.hpp) -------------------------------------------

namespace parts {

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

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

std::string status_counts(const Study& study) {
  std::map<std::string, int> counts;
  for (const RunRecord& r : study.runs) ++counts[to_string(r.status)];
  std::vector<std::string> parts;
  for (const auto& [status, n] : counts) parts.push_back(fmt::format("{} {}", n, status));
  return fmt::format("{} run{}: {}", study.runs.size(), study.runs.size() == 1 ? "" : "s", join(parts, ", "));
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

std::vector<Field> shown_fields(const Study& study, const Metric& m, const std::vector<std::string>& keys) {
  std::vector<Field> out{m.field};
  const std::optional<Field> other = companion(m.field);
  if (!other) return out;
  const bool known = std::any_of(study.runs.begin(), study.runs.end(), [&](const RunRecord& r) {
    return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return !std::isnan(metric_value(r, k, *other)); });
  });
  if (known) out.push_back(*other);
  return out;
}

std::vector<std::string> study_seeds(const Study& study) {
  std::vector<std::pair<int64_t, std::string>> seeds;  // numeric seeds first, in order; then ids
  for (const RunRecord& r : study.runs) {
    if (r.status == RunStatus::skipped) continue;
    const std::pair<int64_t, std::string> s = r.seed ? std::pair{*r.seed, fmt::format("{}", *r.seed)} : std::pair{INT64_MAX, r.id};
    if (std::find(seeds.begin(), seeds.end(), s) == seeds.end()) seeds.push_back(s);
  }
  std::sort(seeds.begin(), seeds.end());
  std::vector<std::string> out;
  for (const auto& [n, text] : seeds) out.push_back(text);
  return out;
}

std::string csv_number(double v) { return std::isnan(v) ? "" : fmt::format("{:.6g}", v); }
std::string csv_integer(int64_t v) { return fmt::format("{}", v); }

std::vector<std::string> csv_lead_header(const Study& study) {
  std::vector<std::string> h{"model", "depth", "L"};
  append(h, length_key_names(study));
  h.push_back("lr");
  return h;
}

std::optional<double> rate_of(const Cell& cell) {
  if (cell.best_lr) return cell.best_lr;
  for (const RunRecord* r : cell.chosen)
    if (r->lr) return r->lr;
  return std::nullopt;
}

std::vector<std::string> csv_lead(const Study& study, const std::string& model, int64_t depth, int64_t length,
                                  const Cell* cell) {
  std::vector<std::string> row{model, csv_integer(depth), length > 0 ? csv_integer(length) : ""};
  append(row, length_setting_values(study, length));
  const std::optional<double> lr = cell ? rate_of(*cell) : std::nullopt;
  row.push_back(lr ? fmt::format("{}", *lr) : "");
  return row;
}

}  // namespace parts

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

bool higher_is_better(Field f) { return f == Field::token_accuracy || f == Field::sequence_accuracy; }

std::optional<Field> companion(Field f) {
  if (f == Field::token_accuracy) return Field::sequence_accuracy;
  if (f == Field::sequence_accuracy) return Field::token_accuracy;
  return std::nullopt;
}

const char* short_name(Field f) {
  switch (f) {
    case Field::token_accuracy: return "token";
    case Field::sequence_accuracy: return "seq";
    case Field::error_rate: return "error";
    case Field::sequence_error_rate: return "seq error";
    case Field::loss: return "loss";
  }
  return "?";
}

std::string Metric::name() const { return key + "." + to_string(field); }
bool Metric::higher_is_better() const { return report::higher_is_better(field); }

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
    fail("{} '{}': expected KEY.FIELD with FIELD one of {}", spec_in.empty() ? "the study's metric (manifest.json)" : "--metric",
         spec, parts::join(names, ", "));
  }
  if (!study.eval_keys.empty() &&
      std::find(study.eval_keys.begin(), study.eval_keys.end(), m.key) == study.eval_keys.end()) {
    const std::string keys = parts::join(study.eval_keys, ", ");
    if (!spec_in.empty()) fail("--metric {}: no run has eval key '{}' (keys: {})", spec, m.key, keys);
    fail("the study's metric '{}' (manifest.json): no run has eval key '{}' (keys: {}); choose one with --metric", spec,
         m.key, keys);
  }
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
  std::vector<double> sorted;
  for (double v : values)
    if (!std::isnan(v)) sorted.push_back(v);
  std::sort(sorted.begin(), sorted.end());
  const size_t h = sorted.size() / 2;
  s.median = sorted.size() % 2 ? sorted[h] : (sorted[h - 1] + sorted[h]) / 2;
  if (s.n > 1) {
    double sq = 0;
    for (double v : values)
      if (!std::isnan(v)) sq += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(sq / (s.n - 1));
  }
  return s;
}

// ---- seeds --------------------------------------------------------------------------------------

std::vector<SeedValue> seed_values(const Cell& cell, const std::string& key, Field field) {
  std::vector<SeedValue> out;
  for (const RunRecord* r : cell.chosen) {
    if (r->status == RunStatus::skipped) continue;
    out.push_back({r, r->seed ? fmt::format("{}", *r->seed) : r->id, metric_value(*r, key, field)});
  }
  std::stable_sort(out.begin(), out.end(), [](const SeedValue& a, const SeedValue& b) {
    if (a.run->seed && b.run->seed) return *a.run->seed < *b.run->seed;
    return a.run->seed.has_value() && !b.run->seed.has_value();
  });
  return out;
}

std::string seed_text(const SeedValue& v, Field field) {
  if (!std::isnan(v.value)) return format_number(v.value, field);
  if (v.run->status == RunStatus::diverged) return "div";
  if (v.run->status == RunStatus::failed) return "fail";
  return "-";
}

bool passes(double value, Field field, double threshold) {
  return !std::isnan(value) && (higher_is_better(field) ? value >= threshold : value <= threshold);
}

int count_passing(const std::vector<SeedValue>& values, Field field, double threshold) {
  return static_cast<int>(std::count_if(values.begin(), values.end(), [&](const SeedValue& v) { return passes(v.value, field, threshold); }));
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

namespace {
// The runs of one learning rate that were run or are still to run (those skipped by the protocol left out).
size_t seeds_run(const std::vector<const RunRecord*>& runs) {
  return static_cast<size_t>(
      std::count_if(runs.begin(), runs.end(), [](const RunRecord* r) { return r->status != RunStatus::skipped; }));
}
}  // namespace

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
    std::vector<Cell> groups;  // one per rate (-1: none known)
    for (auto& [lr, runs] : by_lr) {
      Cell& one = groups.emplace_back();
      one.chosen = std::move(runs);
      if (lr >= 0) one.best_lr = lr;
    }
    // Only the rates run on the most seeds compete: a rate tried on one seed is no match for a mean over five.
    size_t most = 0;
    for (const Cell& one : groups) most = std::max(most, seeds_run(one.chosen));
    double best = kNaN;
    for (const Cell& one : groups) {
      if (seeds_run(one.chosen) < most) continue;
      const double mean = cell_value(one, metric.key, metric.field).stats.mean;
      if (!std::isnan(mean) && (std::isnan(best) || better(mean, best, metric.higher_is_better())))
        best = mean, cell.chosen = one.chosen, cell.best_lr = one.best_lr;
    }
    if (std::isnan(best)) cell.chosen = cell.runs;  // nothing finished: show the statuses of all
    for (Cell& one : groups)
      if (one.best_lr) cell.rates.push_back(std::move(one));
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

// ---- selection -----------------------------------------------------------------------------------

namespace {

// The token reading of a sequence-accuracy depth study: the minimum depth whose token accuracy on the
// same eval key reaches kTokenThreshold (the threshold of statebench's token-accuracy studies).
constexpr double kTokenThreshold = 0.9;
Table token_min_depth_table(const Study& study, const TableOptions& o, const Metric& m) {
  TableOptions token = o;
  token.metric = m.key + ".token_accuracy";
  token.threshold = kTokenThreshold;
  Table t = min_depth_table(study, token);
  t.id = "min-depth-token";
  return t;
}

}  // namespace

std::vector<Table> build_tables(const Study& study, const TableOptions& o) {
  if (o.spread != "std" && o.spread != "range") fail("--spread: expected std or range, got '{}'", o.spread);
  const Metric m = parse_metric(o.metric, study);
  std::vector<std::string> ids = o.tables;
  if (ids.empty()) {
    // The min-depth table answers nothing the grid does not when every run has the same depth.
    const bool several_depths = std::any_of(study.runs.begin(), study.runs.end(),
                                            [&](const RunRecord& r) { return r.depth != study.runs.front().depth; });
    ids = {"grid", "seeds"};
    if (several_depths) ids.push_back("min-depth");
    // Its token reading, unless each word has one label (token = sequence accuracy on every run).
    const bool token_differs = std::any_of(study.runs.begin(), study.runs.end(), [&](const RunRecord& r) {
      const EvalResult* e = r.eval(m.key);
      return e && std::isfinite(e->token_accuracy) && std::isfinite(e->sequence_accuracy) &&
             e->token_accuracy != e->sequence_accuracy;
    });
    if (several_depths && m.field == Field::sequence_accuracy && token_differs) ids.push_back("min-depth-token");
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
    else if (id == "seeds") out.push_back(seeds_table(study, o));
    else if (id == "min-depth") out.push_back(min_depth_table(study, o));
    else if (id == "min-depth-token") out.push_back(token_min_depth_table(study, o, m));
    else if (id == "errors") out.push_back(error_table(study, o));
    else if (id == "length") out.push_back(length_table(study, o));
    else if (id == "runs") out.push_back(runs_table(study, o));
    else fail("--tables: unknown table '{}' (grid, seeds, min-depth, min-depth-token, errors, length, runs)", id);
  }
  return out;
}

}  // namespace sb::report
