// safetensors.cpp: the safetensors writer (see safetensors.hpp).
#include "io/safetensors.hpp"

#include <bit>
#include <cstring>
#include <set>
#include <type_traits>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"

namespace sb {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

int64_t element_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  fail("safetensors: unknown dtype '{}'", dtype);
}

template <class T>
constexpr const char* dtype_of() {
  if constexpr (std::is_same_v<T, float>) return "F32";
  else if constexpr (std::is_same_v<T, double>) return "F64";
  else return "I32";
}

}  // namespace

template <class T>
SafeTensor safe_tensor(std::string name, std::vector<int64_t> shape, const T* data) {
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  SafeTensor t{std::move(name), dtype_of<T>(), std::move(shape), {}};
  t.bytes.assign(reinterpret_cast<const char*>(data), static_cast<size_t>(numel) * sizeof(T));
  return t;
}

template SafeTensor safe_tensor(std::string, std::vector<int64_t>, const float*);
template SafeTensor safe_tensor(std::string, std::vector<int64_t>, const double*);
template SafeTensor safe_tensor(std::string, std::vector<int64_t>, const int32_t*);

std::string safetensors_bytes(const std::vector<SafeTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafeTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") fail("safetensors: invalid tensor name '{}'", t.name);
    if (!names.insert(t.name).second) fail("safetensors: tensor '{}' appears twice", t.name);
    int64_t numel = 1;
    for (const int64_t d : t.shape) {
      if (d < 0) fail("safetensors: tensor '{}' has a negative dimension", t.name);
      numel *= d;
    }
    if (static_cast<int64_t>(t.bytes.size()) != numel * element_bytes(t.dtype))
      fail("safetensors: tensor '{}' has {} bytes, its dtype {} and shape need {}", t.name, t.bytes.size(), t.dtype,
           numel * element_bytes(t.dtype));
    header[t.name] = Json{{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::string text = header.dump(-1, ' ', false, Json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += text;
  for (const SafeTensor& t : tensors) out += t.bytes;
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

}  // namespace sb
