// plugin.hpp: write a task plugin as an ordinary C++ class and export it with one line,
// STATEBENCH_PLUGIN(MyTask, OtherTask), which generates the C entry points of plugin_abi.h (v2).
// Header-only: needs the C++20 standard library and the include/ directory, nothing else (no fmt,
// no Eigen, no statebench library). docs/adding-a-task.md walks through a complete plugin.
#pragma once
#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "statebench/plugin_abi.h"
#include "statebench/rng.hpp"

namespace sb::plugin {

inline constexpr int32_t kIgnoreLabel = SB_PLUGIN_IGNORE_LABEL;  // label meaning "no loss here"

struct Param {
  std::string name;
  std::string default_value;  // "" = no default
  std::string help;
};

struct Split {
  std::string name;
  bool eval = true;  // evaluation splits are disjoint from every training split
  std::string help;
};

// One example's storage, T entries each; sample() writes every entry.
struct ExampleSpans {
  std::span<int32_t> input_ids;   // [T] token ids in [0, V)
  std::span<int32_t> labels;      // [T] ids in [0, V) or kIgnoreLabel
  std::span<uint8_t> score_mask;  // [T] 1 where accuracy is reported (a labelled position)
};

// Thrown by Args; any exception a task throws becomes statebench's error message.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The parameter values create() received: every declared parameter that has a value (given by
// the user or its default). statebench has already rejected undeclared keys.
class Args {
 public:
  explicit Args(std::map<std::string, std::string> values) : values_(std::move(values)) {}

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  const std::string& str(const std::string& name) const {
    const auto it = values_.find(name);
    if (it == values_.end()) throw Error("parameter '" + name + "' has no value");
    return it->second;
  }
  int64_t integer(const std::string& name, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const {
    const std::string& s = str(name);
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) bad(name, "expected an integer");
    if (v < lo || v > hi) bad(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  double real(const std::string& name, double lo = -1e300, double hi = 1e300) const {
    const std::string& s = str(name);
    double v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v))
      bad(name, "expected a finite number");
    if (v < lo || v > hi) bad(name, "must be in [" + number(lo) + ", " + number(hi) + "]");
    return v;
  }
  bool flag(const std::string& name) const {
    const std::string v = choice(name, {"true", "false", "1", "0", "yes", "no", "on", "off"});
    return v == "true" || v == "1" || v == "yes" || v == "on";
  }
  std::string choice(const std::string& name, const std::vector<std::string>& choices) const {
    const std::string& s = str(name);
    if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    bad(name, "expected one of: " + list);
  }
  [[noreturn]] void bad(const std::string& name, const std::string& why) const {
    throw Error("parameter '" + name + "'='" + (has(name) ? str(name) : std::string()) + "': " + why);
  }

 private:
  static std::string number(double x) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, res.ptr);
  }
  std::map<std::string, std::string> values_;
};

// What STATEBENCH_PLUGIN needs from a task class. Required: static name() and summary(), a
// constructor from const Args& (or a default constructor), seq_len(), vocab() and
// sample(split, rng, out) const. Optional: static params() (default none), splits() (default
// train / val / test), details() and static length_param().
//
// Evaluation at other lengths: statebench creates a second instance with the length parameter set
// to L. length_param() names it; without length_param() it is "length" when params() declares a
// parameter of that name, else the task has a fixed length (length_param() returning "" says so
// explicitly). The name must be one of params(): statebench checks it when it loads the plugin.
template <class T>
concept TaskClass = requires(const T& task, int split, Rng& rng, ExampleSpans out) {
  { T::name() } -> std::convertible_to<std::string>;
  { T::summary() } -> std::convertible_to<std::string>;
  requires std::is_constructible_v<T, const Args&> || std::is_default_constructible_v<T>;
  { task.seq_len() } -> std::convertible_to<int64_t>;
  { task.vocab() } -> std::convertible_to<std::vector<std::string>>;
  task.sample(split, rng, out);
};

namespace detail {

// Writes msg into the caller's error buffer, truncated, on one line.
inline void write_error(char* err, size_t err_size, const char* msg) noexcept {
  if (!err || err_size == 0) return;
  const size_t n = std::min(std::strlen(msg), err_size - 1);
  for (size_t i = 0; i < n; ++i) err[i] = (msg[i] == '\n' || msg[i] == '\r') ? ' ' : msg[i];
  err[n] = '\0';
}

// A created task plus the shape strings describe() hands out (stable until destroy()).
template <TaskClass T>
struct Instance {
  T task;
  int64_t seq_len;
  std::vector<std::string> vocab;
  std::vector<const char*> token_names;
  std::vector<Split> splits;
  std::vector<sb_plugin_split_v1> split_table;
  std::string details;

  static T make(const Args& args) {
    if constexpr (std::is_constructible_v<T, const Args&>) return T(args);
    else return T();
  }
  explicit Instance(const Args& args) : task(make(args)), seq_len(task.seq_len()), vocab(task.vocab()) {
    for (const auto& token : vocab) token_names.push_back(token.c_str());
    if constexpr (requires { task.splits(); }) {
      splits = task.splits();
    } else {
      splits = {{"train", false, "training stream"},
                {"val", true, "held-out validation stream"},
                {"test", true, "held-out test stream"}};
    }
    for (const auto& s : splits) split_table.push_back({s.name.c_str(), s.eval ? 1 : 0, s.help.c_str()});
    if constexpr (requires { task.details(); }) details = task.details();
  }
};

template <TaskClass T>
struct Entry {
  static void* create(const char* const* keys, const char* const* values, uint32_t n, char* err,
                      size_t err_size) noexcept {
    try {
      std::map<std::string, std::string> given;
      for (uint32_t i = 0; i < n; ++i) given[keys[i]] = values[i];
      return new Instance<T>(Args(std::move(given)));
    } catch (const std::exception& e) {
      write_error(err, err_size, e.what());
    } catch (...) {
      write_error(err, err_size, "create() threw a non-standard exception");
    }
    return nullptr;
  }
  static void destroy(void* instance) noexcept { delete static_cast<Instance<T>*>(instance); }
  static void describe(const void* instance, sb_plugin_shape_v1* shape) noexcept {
    const auto& in = *static_cast<const Instance<T>*>(instance);
    *shape = {in.seq_len, static_cast<int64_t>(in.vocab.size()), in.token_names.data(),
              static_cast<uint32_t>(in.split_table.size()), in.split_table.data(),
              in.details.empty() ? nullptr : in.details.c_str()};
  }
  static int32_t sample(const void* instance, int32_t split, uint64_t key, uint64_t index,
                        uint32_t attempt, int32_t* input_ids, int32_t* labels, uint8_t* score_mask,
                        char* err, size_t err_size) noexcept {
    try {
      const auto& in = *static_cast<const Instance<T>*>(instance);
      const auto T_len = static_cast<size_t>(in.seq_len);
      Rng rng(key, index, attempt);  // the same generator Task::draw builds for built-in tasks
      in.task.sample(split, rng, ExampleSpans{{input_ids, T_len}, {labels, T_len}, {score_mask, T_len}});
      return 0;
    } catch (const std::exception& e) {
      write_error(err, err_size, e.what());
    } catch (...) {
      write_error(err, err_size, "sample() threw a non-standard exception");
    }
    return 1;
  }
};

// The static name/summary/params/length_param strings of one task class and its ABI descriptor.
template <TaskClass T>
struct Descriptor {
  std::string name = T::name(), summary = T::summary();
  std::vector<Param> params;
  std::vector<sb_plugin_param_v1> param_table;
  std::string length_param;

  Descriptor() {
    if constexpr (requires { T::params(); }) params = T::params();
    for (const auto& p : params)
      param_table.push_back({p.name.c_str(), p.default_value.c_str(), p.help.c_str()});
    if constexpr (requires { { T::length_param() } -> std::convertible_to<std::string>; }) {
      length_param = T::length_param();
    } else {
      for (const auto& p : params)
        if (p.name == "length") length_param = p.name;
    }
  }
  static const Descriptor& get() {
    static const Descriptor d;
    return d;
  }
  sb_plugin_task_v2 abi() const {
    return {{name.c_str(), summary.c_str(), static_cast<uint32_t>(param_table.size()), param_table.data(),
             &Entry<T>::create, &Entry<T>::destroy, &Entry<T>::describe, &Entry<T>::sample},
            length_param.c_str()};
  }
};

template <TaskClass... Ts>
const sb_plugin_v2* plugin_table() noexcept {
  try {
    static const std::vector<sb_plugin_task_v2> tasks{Descriptor<Ts>::get().abi()...};
    static const sb_plugin_v2 table{static_cast<uint32_t>(tasks.size()), tasks.data()};
    return &table;
  } catch (...) {
    return nullptr;  // statebench reports a NULL table
  }
}

}  // namespace detail
}  // namespace sb::plugin

// Exports the plugin's entry points (ABI version 2) for the listed task classes. Use once per
// plugin, at file scope, outside any namespace: STATEBENCH_PLUGIN(ModularCounter)
#define STATEBENCH_PLUGIN(...)                                                                   \
  extern "C" SB_PLUGIN_EXPORT uint32_t statebench_plugin_abi_version(void) {                     \
    return SB_PLUGIN_ABI_V2;                                                                     \
  }                                                                                              \
  extern "C" SB_PLUGIN_EXPORT const sb_plugin_v2* statebench_plugin_v2(void) {                   \
    return ::sb::plugin::detail::plugin_table<__VA_ARGS__>();                                    \
  }
