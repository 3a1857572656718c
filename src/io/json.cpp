// json.cpp: JSON parsing with one-line errors and the lenient field readers (see json.hpp).
#include "io/json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.hpp"

namespace sb {

Json parse_json(const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string why = e.what();
    if (const size_t at = why.find("] "); why.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      why = why.substr(at + 2);  // "parse error at line 1, column 9: syntax error ..."
    fail("not valid JSON ({})", why);
  }
}

const Json* json_field(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string json_text(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  return value.dump();
}

std::string json_string(const Json& value, const std::string& what) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  fail("'{}': expected a string, got {}", what, value.dump());
}

double json_number(const Json& value, const std::string& what) {
  if (value.is_number()) return value.get<double>();
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text.empty() || text == "null") return std::numeric_limits<double>::quiet_NaN();
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && *end == '\0') return v;
  }
  fail("'{}': expected a number, got {}", what, value.dump());
}

int64_t json_integer(const Json& value, const std::string& what) {
  if (value.is_number_integer()) return value.get<int64_t>();
  double v = std::numeric_limits<double>::quiet_NaN();
  if (value.is_number() || value.is_string()) {
    try {
      v = json_number(value, what);
    } catch (const Error&) {  // a string that is not a number: said below
    }
  }
  if (!(std::abs(v) < 9.2e18) || v != std::trunc(v)) fail("'{}': expected an integer, got {}", what, value.dump());
  return static_cast<int64_t>(v);
}

Json json_number_value(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == std::trunc(v) && std::abs(v) < 9.0e15) return static_cast<int64_t>(v);
  return v;
}

}  // namespace sb
