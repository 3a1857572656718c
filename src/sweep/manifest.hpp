// manifest.hpp: OUT/manifest.json, the sweep's index that `statebench table` reads together with
// each cell's summary.json: study name, protocol and options, axes, and every cell with its id,
// overrides, directory and state. One type with to_json/from_json, written by the sweep (built from
// its plan and scheduler) and read by the sweep (on resume) and by `table`. Format: docs/sweeps.md
// ("manifest.json"). Written atomically, top-level keys one per line.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sb::sweep {

struct Plan;
class Scheduler;

inline constexpr int kManifestVersion = 1;

struct ManifestOptions {  // the protocol's options (which keys are written depends on the protocol)
  std::string axis, metric;
  std::optional<double> threshold;     // min_depth
  std::vector<std::string> best_over;  // min_depth
  std::string order;                   // min_depth: "deepest_first", or empty (ascending)
  std::optional<double> stop_at;       // max_lr
};

struct ManifestAxis {
  std::string key;
  std::string kind = "grid";        // grid | zip
  std::vector<std::string> values;  // override texts (flow YAML)
};

struct ManifestGroup {  // a staged protocol's group (min_depth; max_lr with stop_at)
  std::string key;
  std::vector<std::string> labels;               // "depths" (min_depth) or "values", in run order
  std::vector<std::vector<std::string>> cells;   // cell ids per stage
  bool decided = false;
  std::optional<std::string> reached;            // "min_depth" / "reached": the first stage that reached
};

struct ManifestCell {
  std::string id;
  std::string dir;  // relative to OUT ("cells/<id>") or absolute
  std::vector<std::pair<std::string, std::string>> overrides;  // config key -> value text, axis order
  std::vector<std::pair<std::string, std::string>> axes;       // axis key -> value text
  std::optional<std::string> group;
  std::string state = "pending";      // pending | running | finished | skipped
  std::optional<std::string> status;  // summary.json's status, if any
};

struct Manifest {
  std::string format = "statebench-sweep";
  int64_t version = kManifestVersion;
  std::string name, description;
  std::string study = "study.yaml";  // the study's copy in OUT (hand-written manifests: its name)
  std::string study_source, base;    // absolute paths
  std::vector<std::string> set;      // "key=value"
  std::string protocol = "grid";     // grid | min_depth | max_lr
  ManifestOptions options;
  std::string metric;
  std::vector<ManifestAxis> axes;
  std::string started, updated;      // ISO-8601 UTC
  bool complete = false;
  std::vector<std::pair<std::string, int64_t>> counts;  // state -> cells
  std::vector<ManifestGroup> groups;
  std::vector<ManifestCell> cells;

  // The study's name: `name`, else (hand-written manifests) `study`.
  const std::string& study_name() const { return name.empty() ? study : name; }
};

// Writes every key (options as docs/sweeps.md says for the protocol).
void to_json(nlohmann::ordered_json& j, const Manifest& m);
// Lenient: `protocol_options` for `options`, axes as a list of keys or a map, overrides as a map
// or "key=value" strings, a cell without `dir` in cells/<id>; unknown keys ignored. sb::Error (one
// line) for wrong types or a missing "cells" list.
void from_json(const nlohmann::ordered_json& j, Manifest& m);

// The manifest's text: top-level keys one per line, each element of axes/groups/cells on its own.
std::string manifest_text(const Manifest& m);
// Reads `path`; sb::Error "manifest 'PATH': why" when it cannot be read or parsed.
Manifest read_manifest(const std::string& path);

// What the sweep's manifest records beyond its plan and scheduler.
struct ManifestInfo {
  std::string study_source;  // the study file the sweep was started from (absolute)
  std::string base_config;   // the config file the cells run with (absolute)
  std::string started;       // ISO-8601 UTC time this sweep invocation started
  bool complete = false;     // every cell finished or skipped
};

Manifest make_manifest(const Plan& plan, const Scheduler& scheduler, const ManifestInfo& info);
// OUT/manifest.json, atomically.
void write_manifest(const std::string& out_dir, const Manifest& manifest);

}  // namespace sb::sweep
