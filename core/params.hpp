// params.hpp: named string parameters with declared defaults and typed, range-checked reads.
// Every component that takes `k=v` settings (tasks, plugins) declares a ParamSpec list; unknown
// keys, malformed values and out-of-range values are sb::Error naming the owner, key and value.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sb {

struct ParamSpec {
  std::string name;
  std::string default_value;  // "" = no default (the owner derives it or it is optional)
  std::string help;
};

class Params {
 public:
  Params() = default;
  // owner: e.g. "task 'flipflop'" (used in error messages). Throws on keys not in spec.
  Params(std::string owner, std::vector<ParamSpec> spec, std::map<std::string, std::string> given);

  // Parses "key=value" strings (as given on the command line); throws on a missing '='.
  static std::map<std::string, std::string> parse_assignments(const std::vector<std::string>& kvs);

  bool given(const std::string& name) const;   // set explicitly by the user
  bool has_value(const std::string& name) const;  // given, or has a non-empty default
  std::string str(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  double real(const std::string& name, double lo = -1e300, double hi = 1e300) const;
  bool flag(const std::string& name) const;  // true/false/1/0/yes/no/on/off
  // One of `choices`; error lists them.
  std::string choice(const std::string& name, const std::vector<std::string>& choices) const;

  const std::string& owner() const { return owner_; }
  const std::vector<ParamSpec>& spec() const { return spec_; }
  // Effective values (given or default), sorted by key: "a=1,b=2".
  std::string canonical() const;
  [[noreturn]] void bad(const std::string& name, const std::string& why) const;

 private:
  const ParamSpec& find(const std::string& name) const;
  std::string owner_;
  std::vector<ParamSpec> spec_;
  std::map<std::string, std::string> given_;
};

}  // namespace sb
