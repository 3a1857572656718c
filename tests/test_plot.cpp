// test_plot.cpp: the figure writers. PNGs are decoded here with an independent reader (chunk
// CRCs, zlib header, stored blocks, Adler-32, filters) and checked for size and pixel colours of
// heatmap cells, glyphs and markers; SVGs are checked for balanced tags, escaping and cell values;
// the bitmap font for distinct glyphs; write_study_plots for the files of a small study.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "io/atomic_file.hpp"
#include "report/bitmap_font.hpp"
#include "report/plot.hpp"
#include "report/png.hpp"
#include "report/study_plots.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;
using sb::test::reference_crc32;

uint32_t be32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(b.at(at + k));
  return v;
}

uint32_t reference_adler32(const std::string& s) {
  uint64_t a = 1, b = 0;
  for (unsigned char c : s) a = (a + c) % 65521, b = (b + a) % 65521;
  return static_cast<uint32_t>((b << 16) | a);
}

// Inflates a zlib stream made only of stored blocks; fails the test on anything else.
std::string inflate_stored(const std::string& z, int* blocks = nullptr) {
  EXPECT_GE(z.size(), 6u);
  const unsigned cmf = static_cast<unsigned char>(z[0]), flg = static_cast<unsigned char>(z[1]);
  EXPECT_EQ(cmf & 0x0F, 8u);  // deflate
  EXPECT_EQ((cmf * 256 + flg) % 31, 0u);
  EXPECT_EQ(flg & 0x20, 0u);  // no preset dictionary
  std::string out;
  size_t at = 2;
  int count = 0;
  for (bool last = false; !last;) {
    const unsigned header = static_cast<unsigned char>(z.at(at));
    last = header & 1;
    EXPECT_EQ((header >> 1) & 3, 0u) << "not a stored block";
    const unsigned len = static_cast<unsigned char>(z.at(at + 1)) | static_cast<unsigned>(static_cast<unsigned char>(z.at(at + 2))) << 8;
    const unsigned nlen = static_cast<unsigned char>(z.at(at + 3)) | static_cast<unsigned>(static_cast<unsigned char>(z.at(at + 4))) << 8;
    EXPECT_EQ(len ^ 0xFFFFu, nlen);
    out += z.substr(at + 5, len);
    at += 5 + len;
    ++count;
  }
  EXPECT_EQ(at + 4, z.size());
  EXPECT_EQ(be32(z, at), reference_adler32(out));
  if (blocks) *blocks = count;
  return out;
}

struct Decoded {
  int width = 0, height = 0, colour_type = -1;
  std::vector<Rgb> pixels;
  Rgb at(int x, int y) const { return pixels.at(static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)); }
};

Decoded decode_png(const std::string& png) {
  Decoded d;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat, plte;
  std::vector<std::string> order;
  for (size_t at = 8; at < png.size();) {
    const uint32_t len = be32(png, at);
    const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, len);
    EXPECT_EQ(be32(png, at + 8 + len), reference_crc32(png.data() + at + 4, 4 + len)) << type;
    order.push_back(type);
    if (type == "IHDR") {
      d.width = static_cast<int>(be32(data, 0)), d.height = static_cast<int>(be32(data, 4));
      EXPECT_EQ(data[8], 8);
      d.colour_type = data[9];
      EXPECT_EQ(data.substr(10, 3), std::string(3, '\0'));
    } else if (type == "PLTE") {
      plte = data;
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + len;
  }
  EXPECT_EQ(order.front(), "IHDR");
  EXPECT_EQ(order.back(), "IEND");
  const std::string raw = inflate_stored(idat);
  const size_t bpp = d.colour_type == 3 ? 1 : 3;
  EXPECT_EQ(raw.size(), static_cast<size_t>(d.height) * (1 + bpp * static_cast<size_t>(d.width)));
  for (int y = 0; y < d.height; ++y) {
    const size_t row = static_cast<size_t>(y) * (1 + bpp * static_cast<size_t>(d.width));
    EXPECT_EQ(raw.at(row), 0) << "filter";
    for (int x = 0; x < d.width; ++x) {
      const size_t p = row + 1 + bpp * static_cast<size_t>(x);
      auto byte = [&](const std::string& s, size_t i) { return static_cast<uint8_t>(s.at(i)); };
      if (d.colour_type == 3) {
        const size_t i = byte(raw, p);
        d.pixels.push_back({byte(plte, 3 * i), byte(plte, 3 * i + 1), byte(plte, 3 * i + 2)});
      } else {
        d.pixels.push_back({byte(raw, p), byte(raw, p + 1), byte(raw, p + 2)});
      }
    }
  }
  return d;
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

TEST(Png, ChecksumsMatchKnownValues) {
  const std::string digits = "123456789", wiki = "Wikipedia";
  auto bytes = [](const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); };
  EXPECT_EQ(crc32(bytes(digits), digits.size()), 0xCBF43926u);
  EXPECT_EQ(crc32(bytes(digits) + 4, 5, crc32(bytes(digits), 4)), 0xCBF43926u);
  EXPECT_EQ(adler32(bytes(wiki), wiki.size()), 0x11E60398u);
  std::string big(200000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) >> 3);
  EXPECT_EQ(adler32(bytes(big), big.size()), reference_adler32(big));
  EXPECT_EQ(crc32(bytes(big), big.size()), reference_crc32(big.data(), big.size()));
}

TEST(Png, StoredBlocksSplitAt65535) {
  std::string raw(150000, 'x');
  for (size_t i = 0; i < raw.size(); i += 97) raw[i] = static_cast<char>(i);
  int blocks = 0;
  EXPECT_EQ(inflate_stored(zlib_stored(raw), &blocks), raw);
  EXPECT_EQ(blocks, 3);
  EXPECT_EQ(inflate_stored(zlib_stored(""), &blocks), "");
  EXPECT_EQ(blocks, 1);
}

TEST(Png, PaletteAndTruecolourRoundTrip) {
  Image small(3, 2, Rgb{255, 255, 255});
  small.at(0, 0) = {255, 0, 0}, small.at(2, 0) = {0, 0, 255}, small.at(1, 1) = {12, 34, 56};
  const Decoded a = decode_png(encode_png(small));
  EXPECT_EQ(a.colour_type, 3);
  ASSERT_EQ(a.width, 3);
  ASSERT_EQ(a.height, 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) EXPECT_EQ(a.at(x, y), small.at(x, y)) << x << "," << y;
  Image many(40, 30, Rgb{});
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) many.at(x, y) = {static_cast<uint8_t>(x * 6), static_cast<uint8_t>(y * 8), static_cast<uint8_t>(x + y)};
  const Decoded b = decode_png(encode_png(many));
  EXPECT_EQ(b.colour_type, 2);
  ASSERT_EQ(b.pixels.size(), many.pixels.size());
  EXPECT_TRUE(b.pixels == many.pixels);
  EXPECT_THROW(encode_png(Image()), std::exception);
}

TEST(Font, GlyphsAreDistinctAndDrawnRightSideUp) {
  std::set<std::vector<uint8_t>> seen;
  for (int c = 32; c <= 126; ++c) {
    const uint8_t* rows = glyph_rows(static_cast<char>(c));
    std::vector<uint8_t> g(rows, rows + kGlyphHeight);
    for (uint8_t r : g) EXPECT_LT(r, 32) << static_cast<char>(c);
    const bool blank = std::all_of(g.begin(), g.end(), [](uint8_t r) { return r == 0; });
    EXPECT_EQ(blank, c == ' ') << static_cast<char>(c);
    EXPECT_TRUE(seen.insert(g).second) << "glyph of '" << static_cast<char>(c) << "' repeats another";
  }
  // 'A' at scale 1, anchor start at (10, 20): rows drawn from y = 20 - 4.
  Figure f;
  f.width = 30, f.height = 30;
  f.add(Figure::Text{10, 20, "A", 1, Anchor::start, false, Rgb{0, 0, 0}});
  f.add(Figure::Text{10, 8, "L", 1, Anchor::start, true, Rgb{255, 0, 0}});
  const Image img = rasterize(f);
  const char* art[7] = {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"};
  for (int y = 0; y < 7; ++y)
    for (int x = 0; x < 5; ++x)
      EXPECT_EQ(img.at(10 + x, 16 + y) == (Rgb{0, 0, 0}), art[y][x] == '#') << x << "," << y;
  // Vertical "L" reads bottom to top: its stem is the bottom row, its foot the right column.
  const Rgb red{255, 0, 0};
  for (int x = 6; x <= 12; ++x) EXPECT_EQ(img.at(x, 7), red) << x;
  for (int y = 3; y <= 7; ++y) EXPECT_EQ(img.at(12, y), red) << y;
  EXPECT_NE(img.at(8, 4), red);
}

TEST(Plot, HeatmapPngCellsScaleAndLabels) {
  const Figure f = heatmap_figure(small_heatmap());
  const Decoded d = decode_png(encode_png(rasterize(f)));
  ASSERT_EQ(d.width, f.width);
  ASSERT_EQ(d.height, f.height);
  EXPECT_GT(d.width, 300);
  // Each cell: its colour near the corner, its label's colour somewhere inside.
  auto lum = [](Rgb c) { return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b; };
  int cells = 0;
  const std::vector<double> values = {0.1, 0.5, 0.95};
  for (const Figure::Item& item : f.items) {
    const auto* r = std::get_if<Figure::Rect>(&item);
    if (!r || !r->stroke) continue;
    ++cells;
    const int x0 = static_cast<int>(r->x), y0 = static_cast<int>(r->y);
    EXPECT_EQ(d.at(x0 + 5, y0 + 5), r->fill);
    const bool missing = r->fill == (Rgb{235, 235, 235});
    const bool known = std::any_of(values.begin(), values.end(), [&](double v) { return scale_colour(v) == r->fill; });
    EXPECT_TRUE(missing || known);
    const Rgb ink = lum(r->fill) < 140 ? Rgb{255, 255, 255} : Rgb{0, 0, 0};
    int text = 0;
    for (int y = y0 + 2; y < y0 + static_cast<int>(r->h) - 2; ++y)  // inside the white outline
      for (int x = x0 + 2; x < x0 + static_cast<int>(r->w) - 2; ++x) text += d.at(x, y) == ink;
    EXPECT_GE(text, missing ? 20 : 200) << "no label in the cell at " << x0 << "," << y0;
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
  const Decoded d = decode_png(encode_png(rasterize(f)));
  std::vector<const Figure::Circle*> markers;
  for (const Figure::Item& item : f.items)
    if (const auto* c = std::get_if<Figure::Circle>(&item)) markers.push_back(c);
  ASSERT_EQ(markers.size(), 2u + 3 + 2);  // two legend swatches, five points (NaN skipped)
  for (const auto* c : markers) EXPECT_EQ(d.at(static_cast<int>(c->cx), static_cast<int>(c->cy)), c->fill);
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
  EXPECT_EQ(files.size(), 8u);
  for (const char* f : {"heatmap_path.svg", "heatmap_path.png", "heatmap_path_rope.png", "length_path_rope.svg"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  const Decoded d = decode_png(read_file((dir / "heatmap_path.png").string()));
  int hits = 0;
  for (const Rgb& p : d.pixels) hits += p == scale_colour(0.5);
  EXPECT_GT(hits, 2000);  // the depth-2 cell (0.5)
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
  EXPECT_EQ(write_study_plots(study, {}, dir.string()).size(), 2u);
  EXPECT_TRUE(fs::exists(dir / "heatmap_models.png"));
  EXPECT_FALSE(fs::exists(dir / "heatmap_path.png"));
  // A second depth for one model brings back the per-model heatmaps.
  RunRecord extra = study.runs.front();
  extra.depth = 3;
  study.runs.push_back(extra);
  EXPECT_FALSE(models_heatmap_spec(study, m, CellGrid(study, m)).has_value());
}

}  // namespace
}  // namespace sb::report
