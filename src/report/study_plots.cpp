// study_plots.cpp: heatmap and length-generalisation figures of a study (see study_plots.hpp);
// heatmap columns are train lengths, with the settings bound to the length in their tick labels.
#include "report/study_plots.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.hpp"

namespace sb::report {

namespace {

std::string value_label(const CellValue& v, Field field) {
  if (v.stats.n == 0) return v.diverged && v.failed ? "div/fail" : v.diverged ? "div" : v.failed ? "fail" : "-";
  return field == Field::loss ? fmt::format("{:.4g}", v.stats.mean) : fmt::format("{:.3f}", v.stats.mean);
}

double scale_max(const Study& study, const Metric& m) {
  if (m.field != Field::loss) return 1.0;
  double hi = 0;
  for (const RunRecord& r : study.runs) {
    const double v = metric_value(r, m.key, m.field);
    if (std::isfinite(v)) hi = std::max(hi, v);
  }
  return hi > 0 ? hi : 1.0;
}

// Title, colour scale and the train-length columns (with the settings bound to the length).
HeatmapSpec heatmap_frame(const Study& study, const Metric& m, const CellGrid& grid, const std::string& what) {
  HeatmapSpec s;
  s.title = fmt::format("{}: {} (mean over seeds)", what, m.name());
  s.x_label = "train length";
  s.vmax = scale_max(study, m);
  // Settings bound to the length (Study::length_keys): ticks "64 (4)" under "train length (num_kv_pairs)".
  if (!study.length_keys.empty()) s.x_label += fmt::format(" ({})", fmt::join(length_key_names(study), ", "));
  for (int64_t L : grid.lengths()) {
    const std::string tick = L > 0 ? fmt::format("{}", L) : "?";
    s.x_ticks.push_back(study.length_keys.empty()
                            ? tick
                            : fmt::format("{} ({})", tick, fmt::join(length_setting_values(study, L), ", ")));
  }
  return s;
}

// One heatmap row: the model at this depth, every train length.
void add_row(HeatmapSpec& s, const Metric& m, const CellGrid& grid, const std::string& model, int64_t depth) {
  std::vector<double> values;
  std::vector<std::string> labels;
  for (int64_t L : grid.lengths()) {
    const Cell* cell = grid.find(model, depth, L);
    const CellValue v = cell ? cell_value(*cell, m.key, m.field) : CellValue{};
    values.push_back(v.stats.mean);
    labels.push_back(value_label(v, m.field));
  }
  s.values.push_back(std::move(values));
  s.labels.push_back(std::move(labels));
}

}  // namespace

HeatmapSpec heatmap_spec(const Study& study, const Metric& m, const CellGrid& grid, const std::string& model) {
  HeatmapSpec s = heatmap_frame(study, m, grid, model);
  s.y_label = "depth (layers)";
  for (int64_t depth : grid.depths(model)) {
    s.y_ticks.push_back(fmt::format("{}", depth));
    add_row(s, m, grid, model, depth);
  }
  return s;
}

std::optional<HeatmapSpec> models_heatmap_spec(const Study& study, const Metric& m, const CellGrid& grid) {
  std::set<int64_t> depths;
  for (const auto& model : study.models) {
    const auto d = grid.depths(model);
    if (d.size() != 1) return std::nullopt;
    depths.insert(d.front());
  }
  if (study.models.empty()) return std::nullopt;
  HeatmapSpec s = heatmap_frame(study, m, grid, study.info.name.empty() ? "models" : study.info.name);
  s.y_label = depths.size() == 1 ? fmt::format("model (depth {})", *depths.begin()) : "model [depth]";
  for (auto it = study.models.rbegin(); it != study.models.rend(); ++it) {  // rows bottom to top: first model on top
    const int64_t depth = grid.depths(*it).front();
    s.y_ticks.push_back(depths.size() == 1 ? *it : fmt::format("{} [{}]", *it, depth));
    add_row(s, m, grid, *it, depth);
  }
  return s;
}

std::optional<LinePlotSpec> length_plot_spec(const Study& study, const Metric& m, const CellGrid& grid,
                                             const std::string& model) {
  const RunRecord* any = nullptr;
  for (const RunRecord& r : study.runs)
    if (r.model == model && r.eval(m.key)) any = &r;
  if (!any) return std::nullopt;
  const std::string split = any->eval(m.key)->split;
  std::vector<std::pair<int64_t, std::string>> keys;  // (at_length, key) of `split`, any run of the model
  for (const RunRecord& r : study.runs) {
    if (r.model != model) continue;
    for (const EvalResult& e : r.evals)
      if (e.split == split && std::none_of(keys.begin(), keys.end(), [&](const auto& k) { return k.second == e.key; }))
        keys.push_back({e.at_length, e.key});
  }
  if (std::none_of(keys.begin(), keys.end(), [](const auto& k) { return k.first > 0; })) return std::nullopt;
  LinePlotSpec s;
  s.title = fmt::format("{}: {}.{} vs evaluation length", model, split, to_string(m.field));
  s.x_label = "evaluation length";
  s.y_label = to_string(m.field);
  s.ymax = scale_max(study, m);
  const bool several_lengths = grid.lengths().size() > 1;
  if (!several_lengths && grid.lengths().front() > 0) s.marker_x = static_cast<double>(grid.lengths().front()), s.marker_label = "train length";
  for (int64_t depth : grid.depths(model))
    for (int64_t L : grid.lengths()) {
      const Cell* cell = grid.find(model, depth, L);
      if (!cell) continue;
      Series series;
      series.name = several_lengths ? fmt::format("depth {}, L={}", depth, L) : fmt::format("depth {}", depth);
      for (const auto& [at, key] : keys) {
        const int64_t x = at > 0 ? at : L;
        if (x <= 0) continue;
        series.points.push_back({static_cast<double>(x), cell_value(*cell, key, m.field).stats.mean});
      }
      s.series.push_back(std::move(series));
    }
  return s;
}

std::string file_stem(const std::string& model) {
  std::string out;
  for (char c : model) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
    if (keep) out += c;
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "model" : out;
}

std::vector<std::string> write_study_plots(const Study& study, const TableOptions& options, const std::string& dir) {
  const Metric m = parse_metric(options.metric, study);
  const CellGrid grid(study, m);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create the plot directory '{}': {}", dir, ec.message());
  std::vector<std::string> files;
  const std::optional<HeatmapSpec> combined = models_heatmap_spec(study, m, grid);
  if (combined)
    files.push_back(write_figure(heatmap_figure(*combined), (std::filesystem::path(dir) / "heatmap_models").string()));
  std::set<std::string> stems;
  for (const auto& model : study.models) {
    std::string stem = file_stem(model);
    for (int k = 2; stems.count(stem); ++k) stem = fmt::format("{}_{}", file_stem(model), k);
    stems.insert(stem);
    const std::filesystem::path d(dir);
    if (!combined)
      files.push_back(write_figure(heatmap_figure(heatmap_spec(study, m, grid, model)), (d / ("heatmap_" + stem)).string()));
    if (const auto spec = length_plot_spec(study, m, grid, model))
      files.push_back(write_figure(line_plot_figure(*spec), (d / ("length_" + stem)).string()));
  }
  return files;
}

}  // namespace sb::report
