// metrics_log.cpp: JSON builder, metrics.jsonl appender and atomic summary.json (see header).
#include "train/metrics_log.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace sb {

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else out += c;
    }
  }
  out += '"';
  return out;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{}", v);  // e.g. 0.0003, 1e-05, 12: all valid JSON numbers
}

JsonObject& JsonObject::add_raw(std::string_view key, std::string_view json) {
  if (!body_.empty()) body_ += ", ";
  body_ += json_quote(key);
  body_ += ": ";
  body_ += json;
  return *this;
}

JsonObject& JsonObject::add(std::string_view key, std::string_view value) { return add_raw(key, json_quote(value)); }

JsonObject& JsonObject::add(std::string_view key, const std::vector<double>& values) {
  std::string a = "[";
  for (size_t i = 0; i < values.size(); ++i) a += (i ? ", " : "") + json_number(values[i]);
  return add_raw(key, a + "]");
}

JsonObject eval_json(const EvalCounts& c) {
  const Interval e = c.error_interval(), s = c.sequence_error_interval();
  JsonObject j;
  j.add("token_accuracy", c.token_accuracy())
      .add("sequence_accuracy", c.sequence_accuracy())
      .add("scored", c.scored)
      .add("errors", c.errors())
      .add("error_rate", c.error_rate())
      .add("error_ci95", std::vector<double>{e.lo, e.hi})
      .add("sequences", c.sequences)
      .add("sequence_errors", c.sequences - c.sequences_correct)
      .add("sequence_error_ci95", std::vector<double>{s.lo, s.hi})
      .add("loss", c.mean_loss());
  return j;
}

MetricsLog::MetricsLog(std::string path, bool truncate) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), truncate ? "w" : "a");
  if (!file_) fail("cannot write '{}': {}", path_, std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const JsonObject& line) {
  const std::string text = line.str() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    fail("cannot write '{}': {}", path_, std::strerror(errno));
}

void MetricsLog::truncate_after_step(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return;
  std::istringstream in(read_file(path));
  std::string kept, line;
  while (std::getline(in, line)) {
    const auto at = line.find("\"step\": ");
    if (at != std::string::npos) {
      const char* begin = line.data() + at + 8;
      int64_t s = 0;
      const auto [ptr, ec] = std::from_chars(begin, line.data() + line.size(), s);
      if (ec == std::errc() && s > step) continue;
    }
    kept += line + "\n";
  }
  write_file_atomic(path, kept);
}

void write_summary(const std::string& path, const JsonObject& summary) { write_file_atomic(path, summary.str() + "\n"); }

}  // namespace sb
