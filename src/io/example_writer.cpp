// example_writer.cpp: the JSONL, .npy and .npz example writers and the .npy header (see
// example_writer.hpp for the formats; the .npz entries' CRC-32 is zlib's).
#include "io/example_writer.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace sb {

// ---- formats ------------------------------------------------------------------------------------

ExampleFormat parse_example_format(const std::string& name) {
  if (name == "jsonl" || name == "json") return ExampleFormat::kJsonl;
  if (name == "npy") return ExampleFormat::kNpy;
  if (name == "npz") return ExampleFormat::kNpz;
  fail("unknown format '{}' (expected jsonl, npy or npz)", name);
}

ExampleFormat example_format_for_path(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".json") return ExampleFormat::kJsonl;
  if (ext == ".npy") return ExampleFormat::kNpy;
  if (ext == ".npz") return ExampleFormat::kNpz;
  fail("cannot tell the format of '{}' from its extension '{}' (use .jsonl, .npy or .npz, or --format)", path, ext);
}

const char* example_format_name(ExampleFormat format) {
  switch (format) {
    case ExampleFormat::kJsonl: return "jsonl";
    case ExampleFormat::kNpy: return "npy";
    case ExampleFormat::kNpz: return "npz";
  }
  return "?";
}

// ---- little-endian helpers ------------------------------------------------------------------------

namespace {

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

int32_t to_le(int32_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    return v;
  } else {
    const auto u = static_cast<uint32_t>(v);
    return static_cast<int32_t>((u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24));
  }
}

}  // namespace

std::string npy_header(const std::vector<int64_t>& shape, const std::string& descr) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t fixed = 10;  // magic (6) + version (2) + header length (2)
  const size_t total = (fixed + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - fixed - dict.size() - 1, ' ');
  dict.push_back('\n');
  if (dict.size() > 0xFFFF) fail("npy header too long ({} bytes)", dict.size());
  std::string out("\x93NUMPY\x01\x00", 8);
  put_le(out, dict.size(), 2);
  return out + dict;
}

namespace {

// The code points of UTF-8 text; a malformed or overlong sequence gives U+FFFD per bad byte.
std::vector<uint32_t> utf8_code_points(const std::string& text) {
  std::vector<uint32_t> out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    bool ok = len > 0 && i + static_cast<size_t>(len) <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3Fu);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    out.push_back(ok ? cp : 0xFFFDu);
    i += ok ? static_cast<size_t>(len) : 1;
  }
  return out;
}

}  // namespace

std::string npy_unicode(const std::vector<std::string>& strings, bool scalar) {
  if (scalar && strings.size() != 1) fail("npy_unicode: a scalar takes one string, got {}", strings.size());
  std::vector<std::vector<uint32_t>> points;
  size_t width = 1;  // NumPy writes '<U1' for empty strings too
  for (const auto& s : strings) {
    points.push_back(utf8_code_points(s));
    width = std::max(width, points.back().size());
  }
  std::string out = npy_header(scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(strings.size())},
                               "<U" + std::to_string(width));
  for (const auto& p : points)
    for (size_t k = 0; k < width; ++k) put_le(out, k < p.size() ? p[k] : 0u, 4);
  return out;
}

// ---- writers --------------------------------------------------------------------------------------

namespace {

class CountingWriter : public ExampleWriter {
 public:
  CountingWriter(const std::string& path, int64_t N, int64_t T) : file_(path), N_(N), T_(T) {
    if (N < 0 || T <= 0) fail("cannot write '{}': bad shape N={} T={}", path, N, T);
  }

 protected:
  void count(int64_t n) {
    if (n < 0 || written_ + n > N_) fail("'{}': more than the {} announced examples written", file_.path(), N_);
    written_ += n;
  }
  void check_complete() const {
    if (written_ != N_) fail("'{}': {} of {} examples written", file_.path(), written_, N_);
  }
  AtomicFile file_;
  int64_t N_, T_, written_ = 0;
};

class JsonlWriter final : public CountingWriter {
 public:
  using CountingWriter::CountingWriter;
  void write(int64_t count, const int32_t* input_ids, const int32_t* labels, const uint8_t* score_mask) override {
    this->count(count);
    line_.clear();
    for (int64_t i = 0; i < count; ++i) {
      line_ += "{\"input_ids\":";
      append_array(input_ids + i * T_);
      line_ += ",\"labels\":";
      append_array(labels + i * T_);
      line_ += ",\"score_mask\":";
      append_array(score_mask + i * T_);
      line_ += "}\n";
    }
    file_.write(line_);
  }
  void commit() override {
    check_complete();
    file_.commit();
  }

 private:
  template <class Int>
  void append_array(const Int* values) {  // [T]
    char buf[16];
    line_.push_back('[');
    for (int64_t t = 0; t < T_; ++t) {
      if (t) line_.push_back(',');
      const auto res = std::to_chars(buf, buf + sizeof buf, static_cast<int32_t>(values[t]));
      line_.append(buf, res.ptr);
    }
    line_.push_back(']');
  }
  std::string line_;
};

class NpyWriter final : public CountingWriter {
 public:
  NpyWriter(const std::string& path, int64_t N, int64_t T) : CountingWriter(path, N, T) {
    file_.write(npy_header({N, 3, T}));
  }
  void write(int64_t count, const int32_t* input_ids, const int32_t* labels, const uint8_t* score_mask) override {
    this->count(count);
    rows_.resize(static_cast<size_t>(count * 3 * T_));
    int32_t* out = rows_.data();
    for (int64_t i = 0; i < count; ++i) {
      for (int64_t t = 0; t < T_; ++t) *out++ = to_le(input_ids[i * T_ + t]);
      for (int64_t t = 0; t < T_; ++t) *out++ = to_le(labels[i * T_ + t]);
      for (int64_t t = 0; t < T_; ++t) *out++ = to_le(score_mask[i * T_ + t]);
    }
    file_.write(rows_.data(), rows_.size() * sizeof(int32_t));
  }
  void commit() override {
    check_complete();
    file_.commit();
  }

 private:
  std::vector<int32_t> rows_;  // [count, 3, T]
};

// An anonymous scratch file: created unlinked in the output's directory (O_TMPFILE) or, where
// that is unsupported, by tmpfile(); it vanishes when closed or when the process dies.
class SpoolFile {
 public:
  explicit SpoolFile(const std::string& near_path) {
    const auto dir = std::filesystem::path(near_path).parent_path();
#ifdef O_TMPFILE
    const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_TMPFILE | O_RDWR, 0600);
    if (fd >= 0) {
      file_ = ::fdopen(fd, "w+b");
      if (!file_) ::close(fd);
    }
#endif
    if (!file_) file_ = std::tmpfile();
    if (!file_) fail("cannot write '{}': no scratch file: {}", near_path, std::strerror(errno));
  }
  ~SpoolFile() {
    if (file_) std::fclose(file_);
  }
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;

  void write(const void* data, size_t bytes, const std::string& what) {
    if (std::fwrite(data, 1, bytes, file_) != bytes) fail("cannot write '{}': {}", what, std::strerror(errno));
    crc_ = static_cast<uint32_t>(::crc32_z(crc_, static_cast<const Bytef*>(data), bytes));
    size_ += bytes;
  }
  // Appends the whole spool to `out`.
  void copy_to(AtomicFile& out) {
    if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0)
      fail("cannot write '{}': scratch file: {}", out.path(), std::strerror(errno));
    std::vector<char> buf(1 << 20);
    uint64_t left = size_;
    while (left > 0) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      if (std::fread(buf.data(), 1, want, file_) != want)
        fail("cannot write '{}': scratch file read back short", out.path());
      out.write(buf.data(), want);
      left -= want;
    }
  }
  uint32_t crc() const { return crc_; }
  uint64_t size() const { return size_; }

 private:
  std::FILE* file_ = nullptr;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
};

class NpzWriter final : public CountingWriter {
 public:
  NpzWriter(const std::string& path, int64_t N, int64_t T, NpzExtras extras)
      : CountingWriter(path, N, T), extras_(std::move(extras)) {
    const std::string header = npy_header({N, T});
    const uint64_t member = header.size() + static_cast<uint64_t>(N) * static_cast<uint64_t>(T) * 4;
    uint64_t total = 22;  // end of central directory
    for (const char* name : kNames) total += 30 + 46 + 2 * (std::strlen(name) + 4) + member;
    for (const auto& [name, bytes] : extras_) {
      if (name.empty() || std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames))
        fail("cannot write '{}': extra npz member '{}' is empty or clashes with an array", path, name);
      total += 30 + 46 + 2 * (name.size() + 4) + bytes.size();
    }
    if (total > 0xFFFFFFFFull)
      fail("cannot write '{}': the npz would be {} bytes, over the 4 GiB zip limit (use --format npy)", path, total);
    for (auto& spool : spools_) {
      spool = std::make_unique<SpoolFile>(path);
      spool->write(header.data(), header.size(), path);
    }
  }
  void write(int64_t count, const int32_t* input_ids, const int32_t* labels, const uint8_t* score_mask) override {
    this->count(count);
    const size_t n = static_cast<size_t>(count * T_);
    row_.resize(n);
    for (size_t i = 0; i < n; ++i) row_[i] = to_le(input_ids[i]);
    spools_[0]->write(row_.data(), n * 4, file_.path());
    for (size_t i = 0; i < n; ++i) row_[i] = to_le(labels[i]);
    spools_[1]->write(row_.data(), n * 4, file_.path());
    for (size_t i = 0; i < n; ++i) row_[i] = to_le(score_mask[i]);
    spools_[2]->write(row_.data(), n * 4, file_.path());
  }
  void commit() override {
    check_complete();
    // Stored entries (method 0), a fixed 1980-01-01 timestamp so equal data gives equal bytes.
    constexpr uint16_t kTime = 0, kDate = (0 << 9) | (1 << 5) | 1;
    std::string central;
    uint64_t offset = 0;
    for (size_t i = 0; i < spools_.size() + extras_.size(); ++i) {
      const bool spooled = i < spools_.size();
      const std::string name = (spooled ? std::string(kNames[i]) : extras_[i - spools_.size()].first) + ".npy";
      const std::string* extra = spooled ? nullptr : &extras_[i - spools_.size()].second;
      const uint32_t crc = spooled ? spools_[i]->crc()
                                   : static_cast<uint32_t>(::crc32_z(0, reinterpret_cast<const Bytef*>(extra->data()),
                                                                     extra->size()));
      const uint64_t size = spooled ? spools_[i]->size() : extra->size();
      std::string local;
      put_le(local, 0x04034b50u, 4);
      put_le(local, 20, 2);  // version needed: 2.0
      put_le(local, 0, 2);   // flags
      put_le(local, 0, 2);   // method: stored
      put_le(local, kTime, 2);
      put_le(local, kDate, 2);
      put_le(local, crc, 4);
      put_le(local, size, 4);  // compressed size
      put_le(local, size, 4);  // uncompressed size
      put_le(local, name.size(), 2);
      put_le(local, 0, 2);  // extra field length
      local += name;
      file_.write(local);
      if (spooled) spools_[i]->copy_to(file_);
      else file_.write(*extra);

      put_le(central, 0x02014b50u, 4);
      put_le(central, 20, 2);  // made by: MS-DOS attributes, version 2.0
      put_le(central, 20, 2);  // version needed
      put_le(central, 0, 2);
      put_le(central, 0, 2);
      put_le(central, kTime, 2);
      put_le(central, kDate, 2);
      put_le(central, crc, 4);
      put_le(central, size, 4);
      put_le(central, size, 4);
      put_le(central, name.size(), 2);
      put_le(central, 0, 2);  // extra
      put_le(central, 0, 2);  // comment
      put_le(central, 0, 2);  // disk number
      put_le(central, 0, 2);  // internal attributes
      put_le(central, 0, 4);  // external attributes
      put_le(central, offset, 4);
      central += name;
      offset += local.size() + size;
    }
    std::string end;
    put_le(end, 0x06054b50u, 4);
    put_le(end, 0, 2);  // this disk
    put_le(end, 0, 2);  // disk with the central directory
    put_le(end, spools_.size() + extras_.size(), 2);
    put_le(end, spools_.size() + extras_.size(), 2);
    put_le(end, central.size(), 4);
    put_le(end, offset, 4);
    put_le(end, 0, 2);  // comment length
    file_.write(central);
    file_.write(end);
    file_.commit();
  }

 private:
  static constexpr const char* kNames[3] = {"input_ids", "labels", "score_mask"};
  std::array<std::unique_ptr<SpoolFile>, 3> spools_;
  NpzExtras extras_;
  std::vector<int32_t> row_;  // [count * T] conversion buffer
};

}  // namespace

std::unique_ptr<ExampleWriter> open_example_writer(const std::string& path, ExampleFormat format, int64_t N, int64_t T,
                                                   NpzExtras npz_extras) {
  // Devices, pipes and directories are refused by AtomicFile (the commit's rename would replace them).
  switch (format) {
    case ExampleFormat::kJsonl: return std::make_unique<JsonlWriter>(path, N, T);
    case ExampleFormat::kNpy: return std::make_unique<NpyWriter>(path, N, T);
    case ExampleFormat::kNpz: return std::make_unique<NpzWriter>(path, N, T, std::move(npz_extras));
  }
  fail("unknown example format");
}

}  // namespace sb
