// metrics_log.cpp: the metrics.jsonl appender and its truncation on resume (see header).
#include "train/metrics_log.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"

namespace sb {

MetricsLog::MetricsLog(std::string path, bool truncate) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), truncate ? "w" : "a");
  if (!file_) fail("cannot write '{}': {}", path_, std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const Json& line) {
  const std::string text = line.dump() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    fail("cannot write '{}': {}", path_, std::strerror(errno));
}

Json MetricsLog::truncate_for_resume(const std::string& path, int64_t step) {
  Json last_eval;
  if (!std::filesystem::exists(path)) return last_eval;
  std::istringstream in(read_file(path));
  std::string kept, line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;
    const Json* kind = json_field(j, "kind");
    const bool eval = kind && *kind == "eval";
    if (const Json* s = json_field(j, "step"); s && s->is_number_integer()) {
      const int64_t at = s->get<int64_t>();
      if (at > step || (at == step && eval)) continue;
    }
    if (eval && json_field(j, "eval")) last_eval = std::move(j["eval"]);
    kept += line + "\n";
  }
  write_file_atomic(path, kept);
  return last_eval;
}

}  // namespace sb
