// png.hpp: a dependency-free PNG encoder for 8-bit RGB images. The zlib stream uses stored
// (uncompressed) deflate blocks; CRC-32 and Adler-32 are computed here. Images with at most 256
// distinct colours are written as palette PNGs (a third of the size), others as truecolour.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sb::report {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

struct Image {
  int width = 0, height = 0;
  std::vector<Rgb> pixels;  // [height, width], row-major, top row first
  Image() = default;
  Image(int w, int h, Rgb fill) : width(w), height(h), pixels(static_cast<size_t>(w) * static_cast<size_t>(h), fill) {}
  Rgb& at(int x, int y) { return pixels[static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)]; }
  const Rgb& at(int x, int y) const {
    return pixels[static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)];
  }
};

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);  // chainable: crc32(b, m, crc32(a, n))
uint32_t adler32(const uint8_t* data, size_t n);
// zlib stream (RFC 1950) of stored deflate blocks (RFC 1951, BTYPE 00).
std::string zlib_stored(const std::string& raw);
// The PNG file bytes. sb::Error for an empty image.
std::string encode_png(const Image& image);

}  // namespace sb::report
