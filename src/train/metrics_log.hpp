// metrics_log.hpp: the run's machine-readable outputs. metrics.jsonl gets one JSON object per
// train-log or eval line, appended and flushed as it happens; summary.json is written atomically
// (sb::AtomicFile) at the end. JSON is produced by a small builder (strings escaped, non-finite
// numbers written as null, doubles in shortest round-trip form).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "train/stats.hpp"

namespace sb {

std::string json_quote(std::string_view s);  // "..." with JSON escapes (control chars as \u00XX)
std::string json_number(double v);           // shortest round-trip form; "null" if not finite

// A JSON object built key by key, in insertion order (keys are not de-duplicated).
class JsonObject {
 public:
  JsonObject& add(std::string_view key, std::string_view value);  // string
  JsonObject& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  JsonObject& add(std::string_view key, const std::string& value) { return add(key, std::string_view(value)); }
  template <class T>
    requires std::is_arithmetic_v<T>
  JsonObject& add(std::string_view key, T value) {
    if constexpr (std::is_same_v<T, bool>) return add_raw(key, value ? "true" : "false");
    else if constexpr (std::is_integral_v<T>) return add_raw(key, std::to_string(value));
    else return add_raw(key, json_number(static_cast<double>(value)));
  }
  JsonObject& add(std::string_view key, const JsonObject& value) { return add_raw(key, value.str()); }
  JsonObject& add(std::string_view key, const std::vector<double>& values);  // array of numbers
  JsonObject& add_raw(std::string_view key, std::string_view json);  // value already JSON
  std::string str() const { return "{" + body_ + "}"; }  // one line
  bool empty() const { return body_.empty(); }

 private:
  std::string body_;
};

// token_accuracy, sequence_accuracy, scored, errors, error_rate, error_ci95 [lo, hi],
// sequences, sequence_errors, sequence_error_ci95, loss (NaN -> null).
JsonObject eval_json(const EvalCounts& counts);

// Appends lines to metrics.jsonl. Every line is flushed before write() returns.
class MetricsLog {
 public:
  // Opens `path` for appending (creating it); truncate = true starts it empty. Throws sb::Error.
  explicit MetricsLog(std::string path, bool truncate = false);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const JsonObject& line);  // one line + '\n', flushed; throws sb::Error on failure
  const std::string& path() const { return path_; }

  // For resuming from a checkpoint at `step`: atomically rewrites `path` keeping only lines whose
  // integer "step" field is <= step (lines without one are kept). A missing file is fine.
  static void truncate_after_step(const std::string& path, int64_t step);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Writes summary.json (or any JSON document) atomically, followed by a newline.
void write_summary(const std::string& path, const JsonObject& summary);

}  // namespace sb
