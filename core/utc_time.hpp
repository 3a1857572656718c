// utc_time.hpp: the one timestamp format of provenance records (ISO-8601 UTC, seconds).
#pragma once
#include <ctime>
#include <string>

namespace sb {

// The time now, e.g. "2026-11-21T19:40:00Z".
inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace sb
