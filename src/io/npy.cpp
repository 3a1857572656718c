// npy.cpp: the .npy reader and writer (see npy.hpp).
#include "io/npy.hpp"

#include <cstring>
#include <numeric>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/example_writer.hpp"

namespace sb {

int64_t NpyArray::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

namespace {
std::string header_value(const std::string& header, const std::string& key, const std::string& path) {
  const auto k = header.find("'" + key + "'");
  if (k == std::string::npos) fail("'{}': .npy header has no '{}'", path, key);
  auto v = header.find(':', k);
  if (v == std::string::npos) fail("'{}': malformed .npy header", path);
  ++v;
  while (v < header.size() && header[v] == ' ') ++v;
  if (header[v] == '(') return header.substr(v, header.find(')', v) - v + 1);
  auto end = header.find_first_of(",}", v);
  return header.substr(v, end - v);
}
}  // namespace

NpyArray read_npy(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) fail("'{}' is not a .npy file", path);
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) fail("'{}': truncated .npy header", path);
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  }
  if (offset + header_len > bytes.size()) fail("'{}': truncated .npy header", path);
  const std::string header = bytes.substr(offset, header_len);
  const std::string descr = header_value(header, "descr", path);
  if (header_value(header, "fortran_order", path).find("False") == std::string::npos)
    fail("'{}': Fortran-order arrays are not supported", path);
  NpyArray a;
  const std::string shape = header_value(header, "shape", path);
  for (size_t i = 1; i < shape.size();) {
    while (i < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i >= shape.size() || shape[i] == ')') break;
    size_t used = 0;
    a.shape.push_back(std::stoll(shape.substr(i), &used));
    i += used;
  }
  const int64_t n = a.numel();
  const char* p = bytes.data() + offset + header_len;
  const size_t avail = bytes.size() - offset - header_len;
  auto need = [&](size_t width) {
    if (avail < width * static_cast<size_t>(n)) fail("'{}': payload shorter than its shape", path);
  };
  a.data.resize(static_cast<size_t>(n));
  if (descr.find("<f8") != std::string::npos) {
    need(8);
    std::memcpy(a.data.data(), p, 8 * static_cast<size_t>(n));
  } else if (descr.find("<f4") != std::string::npos) {
    need(4);
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      a.data[i] = f;
    }
  } else if (descr.find("<i4") != std::string::npos) {
    need(4);
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      a.data[i] = v;
    }
  } else if (descr.find("<i8") != std::string::npos) {
    need(8);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      a.data[i] = static_cast<double>(v);
    }
  } else {
    fail("'{}': unsupported dtype {}", path, descr);
  }
  return a;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<double>& data,
               const std::string& dtype) {
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  if (n != static_cast<int64_t>(data.size())) fail("write_npy '{}': {} values for a shape of {}", path, data.size(), n);
  std::string out = npy_header(shape, dtype);
  if (dtype == "<f8") {
    out.append(reinterpret_cast<const char*>(data.data()), 8 * data.size());
  } else if (dtype == "<i4") {
    for (double d : data) {
      const auto v = static_cast<int32_t>(d);
      out.append(reinterpret_cast<const char*>(&v), 4);
    }
  } else {
    fail("write_npy '{}': unsupported dtype {}", path, dtype);
  }
  write_file_atomic(path, out);
}

}  // namespace sb
