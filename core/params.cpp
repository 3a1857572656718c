// params.cpp: parsing and validation of named parameters (see params.hpp).
#include "core/params.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace sb {

Params::Params(std::string owner, std::vector<ParamSpec> spec, std::map<std::string, std::string> given)
    : owner_(std::move(owner)), spec_(std::move(spec)), given_(std::move(given)) {
  for (const auto& [key, value] : given_) {
    const bool known = std::any_of(spec_.begin(), spec_.end(), [&](const ParamSpec& s) { return s.name == key; });
    if (!known) {
      std::string names;
      for (const auto& s : spec_) names += (names.empty() ? "" : ", ") + s.name;
      fail("unknown parameter '{}' for {} (known: {})", key, owner_, names.empty() ? "none" : names);
    }
  }
}

std::map<std::string, std::string> Params::parse_assignments(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> out;
  for (const auto& kv : kvs) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) fail("malformed parameter '{}': expected key=value", kv);
    const std::string key = kv.substr(0, eq);
    if (out.count(key)) fail("parameter '{}' given twice", key);
    out[key] = kv.substr(eq + 1);
  }
  return out;
}

const ParamSpec& Params::find(const std::string& name) const {
  for (const auto& s : spec_)
    if (s.name == name) return s;
  // A programming error in the owner, still reported as a normal error.
  fail("{} reads undeclared parameter '{}'", owner_, name);
}

void Params::bad(const std::string& name, const std::string& why) const {
  fail("parameter '{}'='{}' for {}: {}", name, has_value(name) ? str(name) : std::string(), owner_, why);
}

bool Params::given(const std::string& name) const {
  find(name);
  return given_.count(name) > 0;
}

bool Params::has_value(const std::string& name) const {
  return given(name) || !find(name).default_value.empty();
}

std::string Params::str(const std::string& name) const {
  const auto it = given_.find(name);
  if (it != given_.end()) return it->second;
  return find(name).default_value;
}

int64_t Params::integer(const std::string& name, int64_t lo, int64_t hi) const {
  const std::string s = str(name);
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) bad(name, "expected an integer");
  if (v < lo || v > hi) bad(name, fmt::format("must be in [{}, {}]", lo, hi));
  return v;
}

double Params::real(const std::string& name, double lo, double hi) const {
  const std::string s = str(name);
  char* end = nullptr;
  errno = 0;
  const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v))
    bad(name, "expected a finite number");
  if (v < lo || v > hi) bad(name, fmt::format("must be in [{}, {}]", lo, hi));
  return v;
}

bool Params::flag(const std::string& name) const {
  std::string s = str(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return false;
  bad(name, "expected true or false");
}

std::string Params::choice(const std::string& name, const std::vector<std::string>& choices) const {
  const std::string s = str(name);
  if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  bad(name, "expected one of: " + list);
}

std::string Params::canonical() const {
  std::map<std::string, std::string> all;
  for (const auto& s : spec_)
    if (has_value(s.name)) all[s.name] = str(s.name);
  std::string out;
  for (const auto& [k, v] : all) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

}  // namespace sb
