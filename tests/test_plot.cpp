// test_plot.cpp: the figure writers. SVGs are checked for balanced tags, escaping, cell colours
// and values, markers and legends; write_study_plots for the files of a small study (SVG only).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "io/atomic_file.hpp"
#include "report/plot.hpp"
#include "report/study_plots.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;

std::string hex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Balanced tags: every opening tag closed in order, one root <svg>.
bool well_formed(const std::string& xml, std::string* why) {
  std::vector<std::string> stack;
  int roots = 0;
  for (size_t at = xml.find('<'); at != std::string::npos; at = xml.find('<', at + 1)) {
    const size_t close = xml.find('>', at);
    if (close == std::string::npos) return *why = "unterminated tag", false;
    const std::string tag = xml.substr(at + 1, close - at - 1);
    if (tag.empty() || tag[0] == '?') continue;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return *why = "mismatched </" + tag.substr(1) + ">", false;
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" />"));
    if (stack.empty()) ++roots;
    if (tag.back() != '/') stack.push_back(name);
  }
  if (!stack.empty()) return *why = "unclosed <" + stack.back() + ">", false;
  return roots == 1;
}

HeatmapSpec small_heatmap() {
  HeatmapSpec s;
  s.title = "path: val.token_accuracy <&>";
  s.x_label = "train length";
  s.y_label = "depth";
  s.x_ticks = {"16", "32"};
  s.y_ticks = {"1", "2"};
  s.values = {{0.1, 0.5}, {0.95, std::nan("")}};
  s.labels = {{"0.100", "0.500"}, {"0.950", "-"}};
  return s;
}

TEST(Plot, HeatmapCellsScaleAndLabels) {
  const Figure f = heatmap_figure(small_heatmap());
  EXPECT_GT(f.width, 300);
  const std::string svg = to_svg(f);
  auto lum = [](Rgb c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b; };
  int cells = 0;
  const std::vector<double> values = {0.1, 0.5, 0.95};
  for (size_t i = 0; i < f.items.size(); ++i) {
    const auto* r = std::get_if<Figure::Rect>(&f.items[i]);
    if (!r || !r->stroke) continue;
    ++cells;
    const bool missing = r->fill == (Rgb{235, 235, 235});
    const bool known = std::any_of(values.begin(), values.end(), [&](double v) { return scale_colour(v) == r->fill; });
    EXPECT_TRUE(missing || known);
    // The cell is drawn with its colour and white outline, its label centred on it in a readable ink.
    EXPECT_NE(svg.find("fill=\"" + hex(r->fill) + "\" stroke=\"#ffffff\""), std::string::npos) << hex(r->fill);
    ASSERT_LT(i + 1, f.items.size());
    const auto* label = std::get_if<Figure::Text>(&f.items[i + 1]);
    ASSERT_NE(label, nullptr);
    EXPECT_DOUBLE_EQ(label->x, r->x + r->w / 2);
    EXPECT_DOUBLE_EQ(label->y, r->y + r->h / 2);
    EXPECT_EQ(label->color, lum(r->fill) < 140 ? (Rgb{255, 255, 255}) : (Rgb{0, 0, 0}));
    EXPECT_FALSE(label->text.empty());
  }
  EXPECT_EQ(cells, 4);
  // Row 0 (depth 1) is the bottom row: the 0.1 cell lies below the 0.95 cell.
  double y_low = -1, y_high = -1;
  for (const Figure::Item& item : f.items)
    if (const auto* r = std::get_if<Figure::Rect>(&item); r && r->stroke) {
      if (r->fill == scale_colour(0.1)) y_low = r->y;
      if (r->fill == scale_colour(0.95)) y_high = r->y;
    }
  EXPECT_GT(y_low, y_high);
  // The colour scale runs from dark (0) to bright (1).
  for (double t = 0; t < 1; t += 0.125) EXPECT_LT(lum(scale_colour(t)), lum(scale_colour(t + 0.125)));
  EXPECT_EQ(scale_colour(-1), scale_colour(0));
  EXPECT_EQ(scale_colour(2), scale_colour(1));
}

TEST(Plot, SvgIsWellFormedAndHoldsTheValues) {
  const std::string svg = to_svg(heatmap_figure(small_heatmap()));
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why;
  for (const char* label : {">0.100</text>", ">0.500</text>", ">0.950</text>", ">-</text>", ">train length</text>"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_NE(svg.find("val.token_accuracy &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("rotate(-90"), std::string::npos);  // the vertical axis label
  EXPECT_EQ(svg.find("<&>"), std::string::npos);
}

TEST(Plot, LinePlotMarkersAndLegend) {
  LinePlotSpec s;
  s.title = "path: val.token_accuracy vs evaluation length";
  s.x_label = "evaluation length";
  s.y_label = "token_accuracy";
  s.series = {{"depth 1", {{64, 0.9}, {128, 0.6}, {256, 0.3}}}, {"depth 2", {{64, 1.0}, {128, std::nan("")}, {256, 0.8}}}};
  s.marker_x = 64, s.marker_label = "train length";
  const Figure f = line_plot_figure(s);
  std::vector<const Figure::Circle*> markers;
  for (const Figure::Item& item : f.items)
    if (const auto* c = std::get_if<Figure::Circle>(&item)) markers.push_back(c);
  ASSERT_EQ(markers.size(), 2u + 3 + 2);  // two legend swatches, five points (NaN skipped)
  // y = 1 is above y = 0.3, x = 256 right of x = 64 (log2 spacing: 128 halfway).
  const auto* a = markers[0];  // depth 1 at x = 64 (drawn before its legend swatch)
  const auto* b = markers[1];  // depth 1 at x = 128
  const auto* c = markers[2];  // depth 1 at x = 256
  EXPECT_NEAR(b->cx - a->cx, c->cx - b->cx, 1e-9);
  EXPECT_LT(a->cy, c->cy);
  std::string why;
  const std::string svg = to_svg(f);
  EXPECT_TRUE(well_formed(svg, &why)) << why;
  EXPECT_NE(svg.find(">depth 2</text>"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<circle "), markers.size());
  for (const auto* m : markers) EXPECT_NE(svg.find(fmt::format("<circle cx=\"{}\" cy=\"{}\"", m->cx, m->cy)), std::string::npos);
}

TEST(Plot, StudyPlotsWriteFilesPerModel) {
  Study study;
  study.eval_keys = {"val", "val@64"};
  for (const char* model : {"path", "path+rope"})
    for (int depth : {1, 2}) {
      RunRecord r;
      r.model = model, r.attention = "path", r.depth = depth, r.train_length = 16, r.seed = 0, r.lr = 1e-3;
      r.status = RunStatus::completed;
      EvalResult v, at;
      v.key = v.split = "val", v.token_accuracy = 0.25 * depth;
      at.key = "val@64", at.split = "val", at.at_length = 64, at.token_accuracy = 0.1 * depth;
      r.evals = {v, at};
      study.runs.push_back(r);
      if (std::find(study.models.begin(), study.models.end(), model) == study.models.end()) study.models.push_back(model);
    }
  const fs::path dir = fs::path(SB_TEST_TMP) / "plot_study";
  fs::remove_all(dir);
  const auto files = write_study_plots(study, {}, dir.string());
  EXPECT_EQ(files.size(), 4u);
  for (const char* f : {"heatmap_path.svg", "heatmap_path_rope.svg", "length_path.svg", "length_path_rope.svg"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  for (const auto& f : files) EXPECT_EQ(fs::path(f).extension(), ".svg") << f;
  EXPECT_FALSE(fs::exists(dir / "heatmap_path.png"));
  // The depth-2 cell (0.5) in its colour.
  EXPECT_NE(read_file((dir / "heatmap_path.svg").string()).find("fill=\"" + hex(scale_colour(0.5)) + "\""), std::string::npos);
  const std::string svg = read_file((dir / "length_path.svg").string());
  std::string why;
  EXPECT_TRUE(well_formed(svg, &why)) << why;
  EXPECT_NE(svg.find(">train length</text>"), std::string::npos);
  EXPECT_EQ(file_stem("path+rope (d_model=128)"), "path_rope_d_model_128");
}

// Every model at one depth (MQAR-like): one model x length heatmap instead of a 1-row one per model.
TEST(Plot, SingleDepthModelsShareOneHeatmap) {
  Study study;
  study.info.name = "mq";
  study.eval_keys = {"val"};
  for (const char* model : {"path", "rope", "fox"})
    for (int64_t L : {64, 128}) {
      RunRecord r;
      r.model = model, r.attention = model, r.depth = 2, r.train_length = L, r.seed = 0;
      r.status = RunStatus::completed;
      EvalResult v;
      v.key = v.split = "val", v.token_accuracy = std::string(model) == "path" ? 1.0 : L == 64 ? 0.5 : 0.0;
      r.evals = {v};
      study.runs.push_back(r);
      if (std::find(study.models.begin(), study.models.end(), model) == study.models.end()) study.models.push_back(model);
    }
  const Metric m = parse_metric("val.token_accuracy", study);
  const CellGrid grid(study, m);
  const auto spec = models_heatmap_spec(study, m, grid);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->y_ticks, (std::vector<std::string>{"fox", "rope", "path"}));  // bottom to top: path on top
  EXPECT_EQ(spec->y_label, "model (depth 2)");
  EXPECT_EQ(spec->x_ticks, (std::vector<std::string>{"64", "128"}));
  EXPECT_EQ(spec->labels[2], (std::vector<std::string>{"1.000", "1.000"}));
  EXPECT_EQ(spec->labels[0], (std::vector<std::string>{"0.500", "0.000"}));
  const fs::path dir = fs::path(SB_TEST_TMP) / "plot_models";
  fs::remove_all(dir);
  EXPECT_EQ(write_study_plots(study, {}, dir.string()).size(), 1u);
  EXPECT_TRUE(fs::exists(dir / "heatmap_models.svg"));
  EXPECT_FALSE(fs::exists(dir / "heatmap_path.svg"));
  // A second depth for one model brings back the per-model heatmaps.
  RunRecord extra = study.runs.front();
  extra.depth = 3;
  study.runs.push_back(extra);
  EXPECT_FALSE(models_heatmap_spec(study, m, CellGrid(study, m)).has_value());
}

}  // namespace
}  // namespace sb::report
