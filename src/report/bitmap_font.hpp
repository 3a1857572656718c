// bitmap_font.hpp: a 5x7 pixel bitmap font for printable ASCII (32..126), used to draw labels into
// raster images (plot.cpp). Glyphs advance 6 pixels (one column of spacing); other characters
// draw as an empty box.
#pragma once
#include <cstdint>

namespace sb::report {

inline constexpr int kGlyphWidth = 5, kGlyphHeight = 7, kGlyphAdvance = 6;

// The 7 rows of the glyph for `c`, top first; bit (4 - x) of a row is pixel column x.
const uint8_t* glyph_rows(char c);
// Rows the glyph is drawn below the top of the 7-row cell (2 for the descenders g, p, q, y).
int glyph_drop(char c);

}  // namespace sb::report
