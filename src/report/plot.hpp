// plot.hpp: figures as lists of shapes (rectangles, lines, circles, text) rendered as SVG. Two
// layouts: a heatmap with a colour scale and printed cell values, and a line plot with a legend
// (a tick per x value, or evenly spaced ticks for long curves); figures placed side by side.
// No dependencies beyond the standard library.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace sb::report {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

enum class Anchor { start, middle, end };

struct Figure {
  struct Rect {
    double x, y, w, h;
    Rgb fill;
    std::optional<Rgb> stroke;  // 1-pixel outline
  };
  struct Line {
    double x1, y1, x2, y2;
    Rgb color;
    double width = 1;
    bool dashed = false;
  };
  struct Circle {
    double cx, cy, r;
    Rgb fill;
  };
  // Monospace text centred vertically on y, 10 * scale px high; vertical text reads bottom to top
  // (rotated -90 degrees about (x, y)).
  struct Text {
    double x, y;
    std::string text;
    int scale = 2;
    Anchor anchor = Anchor::start;
    bool vertical = false;
    Rgb color{};
  };
  // Connected segments through the points (one SVG element for a long curve), 0.1 px precision.
  struct Polyline {
    std::vector<std::pair<double, double>> points;
    Rgb color;
    double width = 1;
    bool dashed = false;
  };
  using Item = std::variant<Rect, Line, Circle, Text, Polyline>;

  int width = 0, height = 0;
  Rgb background{255, 255, 255};
  std::vector<Item> items;  // drawn in order

  void add(Item item) { items.push_back(std::move(item)); }
};

// Width in pixels the layouts reserve for `text` at `scale` (6 * scale px per character: monospace
// at 10 * scale px).
double text_width(const std::string& text, int scale);

std::string to_svg(const Figure& figure);
// Writes PATH.svg (atomically); returns its path.
std::string write_figure(const Figure& figure, const std::string& path_without_extension);

// The colour scale of heatmaps: t in [0, 1] from dark blue-violet through teal and green to yellow
// (t is clamped).
Rgb scale_colour(double t);

struct HeatmapSpec {
  std::string title, x_label, y_label;
  std::vector<std::string> x_ticks;              // columns, left to right
  std::vector<std::string> y_ticks;              // rows, bottom to top
  std::vector<std::vector<double>> values;       // [rows][columns]; NaN = no value (grey)
  std::vector<std::vector<std::string>> labels;  // [rows][columns], printed in the cells
  double vmin = 0, vmax = 1;                     // the colour scale's range
};
Figure heatmap_figure(const HeatmapSpec& spec);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order; NaN y = gap
  int colour = -1;      // palette index; -1 = the series' position
  bool dashed = false;
};
struct LinePlotSpec {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  double ymin = 0, ymax = 1;
  bool log_x = true;                // log2 x axis (evaluation lengths)
  std::optional<double> marker_x;   // a dashed vertical line (e.g. the training length) ...
  std::string marker_label;         // ... labelled with this
  // 0: a tick (and a dot) at every x value, the plot as wide as they need (evaluation lengths);
  // N: a linear x axis from 0 (or below) with about N round ticks (1, 2 or 5 x 10^k apart), a
  // fixed width, lines only (learning curves).
  int x_ticks = 0;
};
Figure line_plot_figure(const LinePlotSpec& spec);
// `a` and `b` side by side (b to the right of a), on a's background.
Figure beside(const Figure& a, const Figure& b);

}  // namespace sb::report
