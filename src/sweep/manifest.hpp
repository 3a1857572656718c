// manifest.hpp: OUT/manifest.json, the sweep's index that `statebench table` reads together with
// each cell's summary.json: study name, protocol and options, axes, and every cell with its id,
// overrides, directory and state. Format: docs/sweeps.md ("manifest.json"). Written atomically.
#pragma once
#include <string>

#include "core/utc_time.hpp"

#include "sweep/plan.hpp"

namespace sb::sweep {

inline constexpr int kManifestVersion = 1;

struct ManifestInfo {
  std::string study_source;  // the study file the sweep was started from (absolute)
  std::string base_config;   // the config file the cells run with (absolute)
  std::string started;       // ISO-8601 UTC time this sweep invocation started
  bool complete = false;     // every cell finished or skipped
};

std::string manifest_json(const Plan& plan, const Scheduler& scheduler, const ManifestInfo& info);
void write_manifest(const std::string& out_dir, const Plan& plan, const Scheduler& scheduler, const ManifestInfo& info);


}  // namespace sb::sweep
