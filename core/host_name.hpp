// host_name.hpp: the machine name recorded in provenance records (run summaries, eval records,
// Slurm task logs).
#pragma once
#include <unistd.h>

#include <string>

namespace sb {

// This machine's host name, or "unknown" when the system does not give one.
inline std::string host_name() {
  char buf[256] = {0};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown";
}

}  // namespace sb
