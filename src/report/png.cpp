// png.cpp: CRC-32, Adler-32, stored-block zlib and the PNG chunk writer (see png.hpp).
#include "report/png.hpp"

#include <array>
#include <map>

#include "core/error.hpp"

namespace sb::report {

namespace {

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

void put_chunk(std::string& out, const char type[4], const std::string& data) {
  put_be32(out, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out += body;
  put_be32(out, crc32(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = make_crc_table();
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t adler32(const uint8_t* data, size_t n) {
  constexpr uint32_t kMod = 65521;
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < n; ++i) {
    a = (a + data[i]) % kMod;
    b = (b + a) % kMod;
  }
  return (b << 16) | a;
}

std::string zlib_stored(const std::string& raw) {
  constexpr size_t kMaxBlock = 65535;
  std::string out;
  out.push_back(0x78);  // CMF: deflate, 32K window
  out.push_back(0x01);  // FLG: no dictionary, (0x78 * 256 + 0x01) % 31 == 0
  size_t pos = 0;
  do {
    const size_t len = std::min(kMaxBlock, raw.size() - pos);
    const bool last = pos + len == raw.size();
    out.push_back(last ? 1 : 0);  // BFINAL, BTYPE = 00 (stored)
    out.push_back(static_cast<char>(len & 0xFF));
    out.push_back(static_cast<char>(len >> 8));
    out.push_back(static_cast<char>(~len & 0xFF));
    out.push_back(static_cast<char>((~len >> 8) & 0xFF));
    out.append(raw, pos, len);
    pos += len;
  } while (pos < raw.size());
  put_be32(out, adler32(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
  return out;
}

std::string encode_png(const Image& image) {
  if (image.width <= 0 || image.height <= 0) fail("encode_png: empty image ({}x{})", image.width, image.height);
  std::map<uint32_t, int> palette;  // colour -> index, while at most 256 colours
  for (const Rgb& p : image.pixels) {
    palette.emplace((uint32_t{p.r} << 16) | (uint32_t{p.g} << 8) | p.b, 0);
    if (palette.size() > 256) break;
  }
  const bool indexed = palette.size() <= 256;
  std::string raw;  // filter byte 0 (None) then the row's samples
  raw.reserve(static_cast<size_t>(image.height) * (1 + static_cast<size_t>(image.width) * (indexed ? 1 : 3)));
  std::string plte;
  if (indexed) {
    int next = 0;
    for (auto& [colour, index] : palette) {
      index = next++;
      plte.push_back(static_cast<char>(colour >> 16));
      plte.push_back(static_cast<char>((colour >> 8) & 0xFF));
      plte.push_back(static_cast<char>(colour & 0xFF));
    }
  }
  for (int y = 0; y < image.height; ++y) {
    raw.push_back(0);
    for (int x = 0; x < image.width; ++x) {
      const Rgb& p = image.at(x, y);
      if (indexed) {
        raw.push_back(static_cast<char>(palette.at((uint32_t{p.r} << 16) | (uint32_t{p.g} << 8) | p.b)));
      } else {
        raw.push_back(static_cast<char>(p.r));
        raw.push_back(static_cast<char>(p.g));
        raw.push_back(static_cast<char>(p.b));
      }
    }
  }
  std::string png("\x89PNG\r\n\x1a\n", 8), ihdr;
  put_be32(ihdr, static_cast<uint32_t>(image.width));
  put_be32(ihdr, static_cast<uint32_t>(image.height));
  ihdr.push_back(8);                   // bit depth
  ihdr.push_back(indexed ? 3 : 2);     // colour type: palette or truecolour
  ihdr.append(std::string(3, '\0'));   // compression, filter, interlace
  put_chunk(png, "IHDR", ihdr);
  if (indexed) put_chunk(png, "PLTE", plte);
  put_chunk(png, "IDAT", zlib_stored(raw));
  put_chunk(png, "IEND", "");
  return png;
}

}  // namespace sb::report
