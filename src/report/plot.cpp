// plot.cpp: the SVG writer and the heatmap and line-plot layouts (see plot.hpp).
#include "report/plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>
#include <variant>

#include "io/atomic_file.hpp"

namespace sb::report {

namespace {

const Rgb kBlack{0, 0, 0}, kWhite{255, 255, 255}, kGrey{120, 120, 120},
    kGridGrey{215, 215, 215}, kMissing{235, 235, 235};

std::string hex(Rgb c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

double luminance(Rgb c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b; }

std::string format_tick(double v) { return fmt::format("{:g}", v); }

}  // namespace

double text_width(const std::string& text, int scale) {
  constexpr int kAdvance = 6;  // px per character at scale 1 (monospace at 10 px: 0.6 em)
  return text.empty() ? 0.0 : static_cast<double>((kAdvance * static_cast<int>(text.size()) - 1) * scale);
}

std::string to_svg(const Figure& f) {
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"{2}\"/>\n",
      f.width, f.height, hex(f.background));
  for (const Figure::Item& item : f.items) {
    if (const auto* r = std::get_if<Figure::Rect>(&item)) {
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}/>\n", r->x, r->y, r->w, r->h,
                         hex(r->fill), r->stroke ? fmt::format(" stroke=\"{}\" stroke-width=\"1\"", hex(*r->stroke)) : "");
    } else if (const auto* l = std::get_if<Figure::Line>(&item)) {
      out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n", l->x1, l->y1,
                         l->x2, l->y2, hex(l->color), l->width, l->dashed ? " stroke-dasharray=\"6 4\"" : "");
    } else if (const auto* p = std::get_if<Figure::Polyline>(&item)) {
      std::string points;
      for (const auto& [x, y] : p->points) points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x, y);
      out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n", points,
                         hex(p->color), p->width, p->dashed ? " stroke-dasharray=\"6 4\"" : "");
    } else if (const auto* c = std::get_if<Figure::Circle>(&item)) {
      out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"/>\n", c->cx, c->cy, c->r, hex(c->fill));
    } else if (const auto* t = std::get_if<Figure::Text>(&item)) {
      const char* anchor = t->anchor == Anchor::start ? "start" : t->anchor == Anchor::middle ? "middle" : "end";
      out += fmt::format(
          "<text x=\"{}\" y=\"{}\" font-family=\"monospace\" font-size=\"{}\" text-anchor=\"{}\" "
          "dominant-baseline=\"central\" fill=\"{}\"{}>{}</text>\n",
          t->x, t->y, 10 * t->scale, anchor, hex(t->color),
          t->vertical ? fmt::format(" transform=\"rotate(-90 {} {})\"", t->x, t->y) : "", xml_escape(t->text));
    }
  }
  return out + "</svg>\n";
}

std::string write_figure(const Figure& figure, const std::string& path) {
  write_file_atomic(path + ".svg", to_svg(figure));
  return path + ".svg";
}

Rgb scale_colour(double t) {
  // Stops chosen for this project: dark blue-violet, blue, teal, green, yellow.
  static const Rgb stops[] = {{45, 20, 90}, {45, 95, 170}, {30, 160, 150}, {120, 200, 85}, {250, 230, 75}};
  t = std::isnan(t) ? 0.0 : std::clamp(t, 0.0, 1.0);
  const double pos = t * 4;
  const int i = std::min(3, static_cast<int>(pos));
  const double f = pos - i;
  auto mix = [&](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::lround(a + (b - a) * f)); };
  return {mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g), mix(stops[i].b, stops[i + 1].b)};
}

Figure heatmap_figure(const HeatmapSpec& s) {
  const int S = 2;  // text scale
  const size_t rows = s.y_ticks.size(), cols = s.x_ticks.size();
  double cell_w = 96, tick_w = 0;
  for (const auto& row : s.labels)
    for (const auto& l : row) cell_w = std::max(cell_w, text_width(l, S) + 20);
  for (const auto& t : s.x_ticks) cell_w = std::max(cell_w, text_width(t, S) + 16);  // ticks such as "256 (16)"
  for (const auto& t : s.y_ticks) tick_w = std::max(tick_w, text_width(t, S));
  // Rows at least 56 px, the grid at least 260 px high (room for the vertical label and the scale).
  const double cell_h = std::max(56.0, std::ceil(260.0 / static_cast<double>(std::max<size_t>(rows, 1)))), left = 50 + tick_w + 14, top = 70, grid_w = cell_w * static_cast<double>(cols),
               grid_h = cell_h * static_cast<double>(rows);
  const double legend_x = left + grid_w + 36, legend_w = 24;
  Figure f;
  f.width = static_cast<int>(std::max(legend_x + legend_w + 80, text_width(s.title, S) + 40));
  f.height = static_cast<int>(top + grid_h + 80);
  f.add(Figure::Text{f.width / 2.0, 30, s.title, S, Anchor::middle, false, kBlack});
  for (size_t r = 0; r < rows; ++r) {
    const double y = top + grid_h - cell_h * static_cast<double>(r + 1);  // row 0 at the bottom
    for (size_t c = 0; c < cols; ++c) {
      const double x = left + cell_w * static_cast<double>(c);
      const double v = r < s.values.size() && c < s.values[r].size() ? s.values[r][c] : NAN;
      const Rgb fill = std::isnan(v) ? kMissing : scale_colour((v - s.vmin) / (s.vmax - s.vmin));
      f.add(Figure::Rect{x, y, cell_w, cell_h, fill, kWhite});
      const std::string label = r < s.labels.size() && c < s.labels[r].size() ? s.labels[r][c] : "";
      f.add(Figure::Text{x + cell_w / 2, y + cell_h / 2, label, S, Anchor::middle, false, luminance(fill) < 140 ? kWhite : kBlack});
    }
    f.add(Figure::Text{left - 10, y + cell_h / 2, s.y_ticks[r], S, Anchor::end, false, kBlack});
  }
  for (size_t c = 0; c < cols; ++c)
    f.add(Figure::Text{left + cell_w * (static_cast<double>(c) + 0.5), top + grid_h + 18, s.x_ticks[c], S, Anchor::middle, false, kBlack});
  f.add(Figure::Text{left + grid_w / 2, top + grid_h + 52, s.x_label, S, Anchor::middle, false, kBlack});
  f.add(Figure::Text{22, top + grid_h / 2, s.y_label, S, Anchor::middle, true, kBlack});
  // Colour scale: vmax at the top, vmin at the bottom, inside a 1-pixel black frame.
  constexpr int kSteps = 64;
  f.add(Figure::Rect{legend_x - 1, top - 1, legend_w + 2, grid_h + 2, kBlack, std::nullopt});
  for (int i = 0; i < kSteps; ++i) {
    const double y0 = std::floor(top + grid_h * i / kSteps), y1 = std::ceil(top + grid_h * (i + 1) / kSteps);
    f.add(Figure::Rect{legend_x, y0, legend_w, y1 - y0, scale_colour(1 - (i + 0.5) / kSteps), std::nullopt});
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = s.vmin + (s.vmax - s.vmin) * i / 4, y = top + grid_h * (1 - i / 4.0);
    f.add(Figure::Line{legend_x + legend_w, y, legend_x + legend_w + 5, y, kBlack, 2});
    f.add(Figure::Text{legend_x + legend_w + 14, y, format_tick(v), S, Anchor::start, false, kBlack});
  }
  return f;
}

Figure line_plot_figure(const LinePlotSpec& s) {
  const int S = 2;
  static const Rgb palette[] = {{40, 90, 200}, {230, 120, 20}, {40, 160, 60}, {210, 40, 40},
                                {130, 70, 180}, {140, 90, 50}, {220, 90, 170}, {90, 90, 90}};
  std::set<double> xs;
  for (const Series& series : s.series)
    for (const auto& p : series.points) xs.insert(p.first);
  double legend_w = 0;
  for (const Series& series : s.series) legend_w = std::max(legend_w, text_width(series.name, S));
  const bool dense = s.x_ticks > 0;
  const double left = 110, top = 88, plot_h = 320;
  const double plot_w = dense ? 520.0 : std::max(420.0, 90.0 * static_cast<double>(xs.size()));
  Figure f;
  f.width = static_cast<int>(std::max(left + plot_w + 40 + legend_w + 60, text_width(s.title, S) + 40));
  f.height = static_cast<int>(top + plot_h + 90);
  const bool log_x = s.log_x && !dense && !xs.empty() && *xs.begin() > 0;
  auto tx = [&](double x) { return log_x ? std::log2(x) : x; };
  double lo = xs.empty() ? 0 : tx(*xs.begin()), hi = xs.empty() ? 1 : tx(*xs.rbegin());
  if (dense) lo = std::min(lo, 0.0);
  if (hi - lo < 1e-9) lo -= 1, hi += 1;
  const double pad = (hi - lo) * (dense ? 0.02 : 0.08);
  lo -= pad, hi += pad;
  auto px = [&](double x) { return left + (tx(x) - lo) / (hi - lo) * plot_w; };
  auto py = [&](double y) { return top + plot_h - (std::clamp(y, s.ymin, s.ymax) - s.ymin) / (s.ymax - s.ymin) * plot_h; };
  f.add(Figure::Text{f.width / 2.0, 30, s.title, S, Anchor::middle, false, kBlack});
  for (int i = 0; i <= 5; ++i) {  // y grid and ticks
    const double v = s.ymin + (s.ymax - s.ymin) * i / 5, y = py(v);
    f.add(Figure::Line{left, y, left + plot_w, y, kGridGrey, 1});
    f.add(Figure::Text{left - 10, y, format_tick(v), S, Anchor::end, false, kBlack});
  }
  std::vector<double> ticks(xs.begin(), xs.end());  // at the data's x values, or evenly spaced
  if (dense && !xs.empty()) {
    ticks.clear();
    const double raw = (*xs.rbegin() - std::min(*xs.begin(), 0.0)) / s.x_ticks;
    const double unit = raw > 0 ? std::pow(10.0, std::floor(std::log10(raw))) : 1;
    const double step = raw / unit <= 1 ? unit : raw / unit <= 2 ? 2 * unit : raw / unit <= 5 ? 5 * unit : 10 * unit;
    for (double x = std::ceil(std::min(*xs.begin(), 0.0) / step) * step; x <= *xs.rbegin() + 1e-9 * step; x += step)
      ticks.push_back(x);
  }
  for (double x : ticks) {
    f.add(Figure::Line{px(x), top, px(x), top + plot_h, kGridGrey, 1});
    f.add(Figure::Text{px(x), top + plot_h + 18, format_tick(x), S, Anchor::middle, false, kBlack});
  }
  if (s.marker_x) {
    f.add(Figure::Line{px(*s.marker_x), top, px(*s.marker_x), top + plot_h, kGrey, 2, true});
    f.add(Figure::Text{px(*s.marker_x), top - 20, s.marker_label, S, Anchor::middle, false, kGrey});  // above the plot
  }
  f.add(Figure::Line{left, top + plot_h, left + plot_w, top + plot_h, kBlack, 2});
  f.add(Figure::Line{left, top, left, top + plot_h, kBlack, 2});
  f.add(Figure::Text{left + plot_w / 2, top + plot_h + 56, s.x_label + (log_x ? " (log scale)" : ""), S, Anchor::middle, false, kBlack});
  f.add(Figure::Text{26, top + plot_h / 2, s.y_label, S, Anchor::middle, true, kBlack});
  for (size_t i = 0; i < s.series.size(); ++i) {
    const Series& series = s.series[i];
    const Rgb colour = palette[static_cast<size_t>(series.colour >= 0 ? series.colour : static_cast<int>(i)) % std::size(palette)];
    auto points = series.points;
    std::sort(points.begin(), points.end());
    const double width = dense ? 2 : 3;
    if (dense) {  // one polyline per stretch without gaps
      Figure::Polyline line{{}, colour, width, series.dashed};
      for (size_t k = 0; k <= points.size(); ++k) {
        if (k < points.size() && !std::isnan(points[k].second)) {
          line.points.emplace_back(px(points[k].first), py(points[k].second));
          continue;
        }
        if (line.points.size() > 1) f.add(line);
        if (line.points.size() == 1)  // a lone value (one evaluation): a dot
          f.add(Figure::Circle{line.points[0].first, line.points[0].second, series.dashed ? 3.0 : 4.0, colour});
        line.points.clear();
      }
    }
    for (size_t k = 1; k < points.size() && !dense; ++k)
      if (!std::isnan(points[k - 1].second) && !std::isnan(points[k].second))
        f.add(Figure::Line{px(points[k - 1].first), py(points[k - 1].second), px(points[k].first), py(points[k].second), colour,
                           width, series.dashed});
    if (!dense)
      for (const auto& [x, y] : points)
        if (!std::isnan(y)) f.add(Figure::Circle{px(x), py(y), 5, colour});
    const double ly = top + 14 + 28 * static_cast<double>(i), lx = left + plot_w + 30;
    f.add(Figure::Line{lx, ly, lx + 26, ly, colour, width, series.dashed});
    if (!dense) f.add(Figure::Circle{lx + 13, ly, 5, colour});
    f.add(Figure::Text{lx + 36, ly, series.name, S, Anchor::start, false, kBlack});
  }
  return f;
}

Figure beside(const Figure& a, const Figure& b) {
  Figure f = a;
  const double dx = a.width;
  f.width = a.width + b.width;
  f.height = std::max(a.height, b.height);
  for (Figure::Item item : b.items) {
    std::visit(
        [&](auto& it) {
          using T = std::decay_t<decltype(it)>;
          if constexpr (std::is_same_v<T, Figure::Line>) it.x1 += dx, it.x2 += dx;
          else if constexpr (std::is_same_v<T, Figure::Circle>) it.cx += dx;
          else if constexpr (std::is_same_v<T, Figure::Polyline>)
            for (auto& p : it.points) p.first += dx;
          else it.x += dx;
        },
        item);
    f.add(std::move(item));
  }
  return f;
}

}  // namespace sb::report
