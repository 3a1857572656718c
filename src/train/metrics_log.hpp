// metrics_log.hpp: metrics.jsonl, the run's log: one JSON object per train-log or eval line,
// appended and flushed as it happens (nlohmann JSON, one line each; non-finite numbers as null).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace sb {

// Appends lines to metrics.jsonl. Every line is flushed before write() returns.
class MetricsLog {
 public:
  // Opens `path` for appending (creating it); truncate = true starts it empty. Throws sb::Error.
  explicit MetricsLog(std::string path, bool truncate = false);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::ordered_json& line);  // one line + '\n', flushed; throws sb::Error on failure
  const std::string& path() const { return path_; }

  // For resuming from a checkpoint at `step`: atomically rewrites `path` keeping the lines whose
  // integer "step" is < step, and those at `step` but its eval line (the resumed run evaluates at
  // `step` again). Lines without a step are kept; a line that is not JSON (torn by a crash) is
  // dropped. Returns the "eval" object of the last eval line kept (null if none). A missing file
  // is fine.
  static nlohmann::ordered_json truncate_for_resume(const std::string& path, int64_t step);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace sb
