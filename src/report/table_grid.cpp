// table_grid.cpp: the tables of cells' values over seeds (tables.hpp): the accuracy grid (mean and
// spread, the other accuracy beside it), the per-seed distributions (each seed, median, best, how
// many pass the threshold) and length generalisation; each with its CSV form of plain numbers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>

#include "core/error.hpp"
#include "report/table_parts.hpp"
#include "report/tables.hpp"

namespace sb::report {

using namespace parts;

namespace {

// CSV columns of a cell's statistics over seeds, then one per seed of the study.
std::vector<std::string> stats_header(const std::vector<std::string>& seeds) {
  std::vector<std::string> h{"n", "mean", "sd", "min", "max", "median", "best"};
  for (const auto& s : seeds) h.push_back("seed " + s);
  return h;
}

std::vector<std::string> stats_row(const std::vector<SeedValue>& values, Field field,
                                   const std::vector<std::string>& seeds) {
  std::vector<double> xs;
  for (const auto& v : values) xs.push_back(v.value);
  const Stats s = compute_stats(xs);
  std::vector<std::string> row{csv_integer(s.n), csv_number(s.mean), csv_number(s.sd), csv_number(s.min),
                               csv_number(s.max), csv_number(s.median), csv_number(s.best(field))};
  for (const auto& seed : seeds) {
    const auto it = std::find_if(values.begin(), values.end(), [&](const SeedValue& v) { return v.seed == seed; });
    row.push_back(it == values.end() ? "" : csv_number(it->value));
  }
  return row;
}

// " seq" / " token": the header suffix of a companion column.
std::string field_suffix(Field f, const Metric& m) { return f == m.field ? "" : std::string(" ") + short_name(f); }

std::string fields_words(const std::vector<Field>& fields, const std::string& of) {
  if (fields.size() == 1) return of;
  return fmt::format("{}; {} columns: {}", of, short_name(fields[1]), to_string(fields[1]));
}

}  // namespace

Table accuracy_grid(const Study& study, const TableOptions& o) {
  const Metric m = parse_metric(o.metric, study);
  const CellGrid grid(study, m);
  std::vector<std::string> keys = o.keys;
  if (keys.empty()) keys = {m.key};  // (parse_metric checked it where any run has an evaluation)
  if (keys.size() == 1 && keys[0] == "all") keys = study.eval_keys.empty() ? std::vector{m.key} : study.eval_keys;
  for (const auto& k : o.keys)
    if (k != "all" && std::find(study.eval_keys.begin(), study.eval_keys.end(), k) == study.eval_keys.end())
      fail("--keys {}: no run has eval key '{}' ({})", join(o.keys, ","), k,
           study.eval_keys.empty() ? "no run has an evaluation: " + status_counts(study)
                                   : "keys: " + join(study.eval_keys, ", "));
  const std::vector<Field> fields = shown_fields(study, m, keys);
  const double threshold = threshold_of(study, o);
  Table t;
  t.id = "grid";
  const std::string what = keys.size() == 1 && keys[0] == m.key ? m.name() : fmt::format("{} of {}", to_string(m.field), join(keys, ", "));
  t.title = fmt::format("Accuracy grid: {} ({}{})", fields_words(fields, what), spread_words(o.spread), lr_words(grid, m));
  t.header = {"model", "depth"};
  for (int64_t L : grid.lengths())
    for (const auto& k : keys)
      for (Field f : fields)
        t.header.push_back((keys.size() == 1 ? length_label(study, L) : length_label(study, L) + " " + k) + field_suffix(f, m));
  const std::vector<std::string> seeds = study_seeds(study);
  t.csv_header = csv_lead_header(study);
  append(t.csv_header, {"key", "field"});
  append(t.csv_header, stats_header(seeds));
  t.csv_header.insert(t.csv_header.end() - static_cast<long>(seeds.size()), {"passed", "diverged", "failed", "pending"});
  bool symbols = false;
  for (const auto& model : study.models) {
    for (int64_t depth : grid.depths(model)) {
      std::vector<std::string> row{model, fmt::format("{}", depth)};
      for (int64_t L : grid.lengths()) {
        const Cell* cell = grid.find(model, depth, L);
        for (const auto& k : keys) {
          for (Field f : fields) {
            std::string text = cell ? format_cell(cell_value(*cell, k, f), f, o.spread) : "-";
            symbols |= text == "-" || text.find("div") != std::string::npos || text.find("fail") != std::string::npos;
            if (cell && text != "-") text += lr_suffix(*cell);
            row.push_back(text);
            if (!cell) continue;
            const CellValue v = cell_value(*cell, k, f);
            const std::vector<SeedValue> values = seed_values(*cell, k, f);
            std::vector<std::string> csv = csv_lead(study, model, depth, L, cell);
            append(csv, {k, to_string(f)});
            std::vector<std::string> stats = stats_row(values, f, seeds);
            stats.insert(stats.end() - static_cast<long>(seeds.size()),
                         {f == m.field ? csv_integer(count_passing(values, f, threshold)) : "", csv_integer(v.diverged),
                          csv_integer(v.failed), csv_integer(v.pending)});
            append(csv, stats);
            t.csv_rows.push_back(std::move(csv));
          }
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

namespace {

// The seeds table's row (and CSV rows) of one learning rate's runs of a cell (part.chosen); `chosen`
// marks the rate the other tables use where the cell compared several.
void add_seed_rows(Table& t, const Study& study, const CellGrid& grid, const Metric& m,
                   const std::vector<Field>& fields, double threshold, const std::string& model, int64_t depth,
                   int64_t L, const Cell& part, bool chosen) {
  std::vector<std::string> row{model, fmt::format("{}", depth), fmt::format("{}", L)};
  append(row, length_setting_values(study, L));
  const std::optional<double> lr = rate_of(part);
  if (grid.compares_lrs()) row.push_back(!lr ? "-" : chosen ? fmt::format("{} (best)", *lr) : fmt::format("{}", *lr));
  std::vector<std::vector<SeedValue>> by_field;
  for (Field f : fields) by_field.push_back(seed_values(part, m.key, f));
  std::vector<std::string> seeds;
  for (const auto& v : by_field[0]) seeds.push_back(v.seed);
  row.push_back(join(seeds, ","));
  for (size_t i = 0; i < fields.size(); ++i) {
    std::vector<std::string> texts;
    std::vector<double> xs;
    for (const auto& v : by_field[i]) texts.push_back(seed_text(v, fields[i])), xs.push_back(v.value);
    const Stats s = compute_stats(xs);
    append(row, {join(texts, " "), format_number(s.median, fields[i]), format_number(s.best(fields[i]), fields[i])});
    if (fields[i] == m.field) row.push_back(fmt::format("{}/{}", count_passing(by_field[i], m.field, threshold), s.n));
  }
  t.rows.push_back(std::move(row));
  for (size_t r = 0; r < by_field[0].size(); ++r) {
    std::vector<std::string> csv = csv_lead(study, model, depth, L, &part);
    const SeedValue& v = by_field[0][r];
    append(csv, {v.seed, to_string(v.run->status)});
    for (const auto& values : by_field) csv.push_back(csv_number(values[r].value));
    csv.push_back(std::isnan(v.value) ? "" : passes(v.value, m.field, threshold) ? "1" : "0");
    t.csv_rows.push_back(std::move(csv));
  }
}

}  // namespace

Table seeds_table(const Study& study, const TableOptions& o) {
  const Metric m = parse_metric(o.metric, study);
  const CellGrid grid(study, m);
  const std::vector<Field> fields = shown_fields(study, m, {m.key});
  const double threshold = threshold_of(study, o);
  const std::string pass = fmt::format("{} {}", m.higher_is_better() ? ">=" : "<=", threshold);
  Table t;
  t.id = "seeds";
  std::string of = fmt::format("{} ({})", m.name(), short_name(m.field));
  if (fields.size() > 1) of += fmt::format(" and {}.{} ({})", m.key, to_string(fields[1]), short_name(fields[1]));
  t.title = fmt::format("Seeds: {} of each seed, in the order of `seeds`; their median and best; passed = seeds whose "
                        "{} {}{}{}",
                        of, m.name(), pass, lr_words(grid, m),
                        grid.compares_lrs() ? ": a row per learning rate run, (best) marks it" : "");
  t.header = {"model", "depth", "L"};
  append(t.header, length_key_names(study));
  if (grid.compares_lrs()) t.header.push_back("lr");
  t.header.push_back("seeds");
  for (Field f : fields) {
    const std::string s = short_name(f);
    append(t.header, {s, s + " median", s + " best"});
    if (f == m.field) t.header.push_back("passed");
  }
  t.csv_header = csv_lead_header(study);
  append(t.csv_header, {"seed", "status"});
  for (Field f : fields) t.csv_header.push_back(to_string(f));
  t.csv_header.push_back("passed");
  for (const auto& model : study.models)
    for (int64_t depth : grid.depths(model))
      for (int64_t L : grid.lengths()) {
        const Cell* cell = grid.find(model, depth, L);
        if (!cell) continue;
        // One row per learning rate the cell compared (the chosen one marked), else one row.
        const std::span<const Cell> parts = cell->rates.empty() ? std::span<const Cell>(cell, 1) : cell->rates;
        for (const Cell& part : parts)
          if (!seed_values(part, m.key, m.field).empty())  // else only protocol-skipped runs
            add_seed_rows(t, study, grid, m, fields, threshold, model, depth, L, part,
                          parts.size() > 1 && part.best_lr == cell->best_lr);
      }
  t.notes.push_back("per seed: the value, or div / fail (diverged / failed: no value) or - (not finished); median and best over the seeds with a value, passed = k/n of them");
  note_length_keys(study, t);
  return t;
}

namespace {

// A column of the length table: an eval key (times == 0), or the split evaluated at `times` x each
// cell's training length (key = split).
struct LengthColumn {
  int64_t len = 0;  // the key's @LENGTH, 0 = the training length
  std::string key;
  int64_t times = 0;
};

// The multiples of its run's training length that a split's @LENGTH evaluations are, ascending, if
// every one is a whole multiple and they name fewer columns than the absolute lengths (a study that
// scores each length at 2x and 4x: val@2x, val@4x); else empty.
std::vector<int64_t> length_multiples(const Study& study, const std::string& split, size_t absolute_columns) {
  std::set<int64_t> times;
  for (const RunRecord& r : study.runs)
    for (const EvalResult& e : r.evals) {
      if (e.split != split || e.at_length <= 0) continue;
      if (r.train_length <= 0 || e.at_length % r.train_length != 0) return {};
      times.insert(e.at_length / r.train_length);
    }
  if (times.size() >= absolute_columns) return {};
  return {times.begin(), times.end()};
}

}  // namespace

Table length_table(const Study& study, const TableOptions& o) {
  const Metric m = parse_metric(o.metric, study);
  const CellGrid grid(study, m);
  // Columns: per split with @LENGTH keys, the plain key (training length) then @LENGTH ascending, or
  // the multiples of the training length where those are fewer.
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
  std::vector<LengthColumn> columns;
  Table t;
  t.id = "length";
  const bool show_length = grid.lengths().size() > 1;
  t.header = {"model", "depth"};
  if (show_length) t.header.push_back("train L"), append(t.header, length_key_names(study));
  for (const auto& s : splits) {
    auto list = by_split[s];
    std::sort(list.begin(), list.end());
    const size_t absolute = static_cast<size_t>(
        std::count_if(list.begin(), list.end(), [](const auto& p) { return p.first > 0; }));
    const std::vector<int64_t> times = length_multiples(study, s, absolute);
    for (const auto& [len, key] : list) {
      if (len > 0 && !times.empty()) continue;
      columns.push_back({len, key, 0});
      t.header.push_back(len > 0 ? key : key + " (train L)");
    }
    for (int64_t x : times) {
      columns.push_back({0, s, x});
      t.header.push_back(fmt::format("{}@{}x", s, x));
    }
  }
  t.title = fmt::format("Length generalisation: {} by evaluation length ({}{}{})", to_string(m.field),
                        spread_words(o.spread), show_length ? "" : "; trained at " + length_label(study, grid.lengths().front()),
                        lr_words(grid, m));
  const std::vector<std::string> seeds = study_seeds(study);
  t.csv_header = csv_lead_header(study);
  append(t.csv_header, {"key", "eval L", "field"});
  append(t.csv_header, stats_header(seeds));
  for (const auto& model : study.models)
    for (int64_t depth : grid.depths(model))
      for (int64_t L : grid.lengths()) {
        const Cell* cell = grid.find(model, depth, L);
        if (!cell) continue;
        std::vector<std::string> row{model, fmt::format("{}", depth)};
        if (show_length) row.push_back(fmt::format("{}", L)), append(row, length_setting_values(study, L));
        for (const LengthColumn& c : columns) {
          const int64_t len = c.times > 0 ? c.times * L : c.len;
          const std::string k = c.times > 0 ? fmt::format("{}@{}", c.key, len) : c.key;
          row.push_back(format_cell(cell_value(*cell, k, m.field), m.field, o.spread));
          std::vector<std::string> csv = csv_lead(study, model, depth, L, cell);
          append(csv, {k, len > 0 ? csv_integer(len) : L > 0 ? csv_integer(L) : "", to_string(m.field)});
          append(csv, stats_row(seed_values(*cell, k, m.field), m.field, seeds));
          t.csv_rows.push_back(std::move(csv));
        }
        if (cell->best_lr) row.back() += lr_suffix(*cell);
        t.rows.push_back(std::move(row));
      }
  return t;
}

}  // namespace sb::report
