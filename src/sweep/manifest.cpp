// manifest.cpp: builds and atomically writes OUT/manifest.json (see manifest.hpp, docs/sweeps.md).
#include "sweep/manifest.hpp"

#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "train/metrics_log.hpp"

namespace sb::sweep {

namespace {

std::string json_strings(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + json_quote(items[i]);
  return s + "]";
}

JsonObject options_json(const Study& study) {
  JsonObject o;
  if (study.protocol == Protocol::min_depth) {
    o.add("axis", study.min_depth.axis)
        .add("threshold", study.min_depth.threshold)
        .add("metric", study.min_depth.metric)
        .add_raw("best_over", json_strings(study.min_depth.best_over));
  } else if (study.protocol == Protocol::max_lr) {
    o.add("axis", study.max_lr.axis).add("metric", study.max_lr.metric);
    o.add_raw("stop_at", study.max_lr.stop_at ? fmt::format("{}", *study.max_lr.stop_at) : "null");
  }
  return o;
}

std::string axes_json(const Study& study) {
  std::string s = "[";
  for (size_t a = 0; a < study.axes.size(); ++a) {
    std::vector<std::string> values;
    for (const auto& v : study.axes[a].values) values.push_back(v.text);
    JsonObject o;
    o.add("key", study.axes[a].key).add("kind", study.axes[a].zipped ? "zip" : "grid").add_raw("values", json_strings(values));
    s += (a ? ",\n    " : "\n    ") + o.str();
  }
  return s + "\n  ]";
}

std::string cells_json(const Plan& plan, const Scheduler& scheduler) {
  std::string s = "[";
  for (const auto& cell : plan.cells) {
    JsonObject axes;
    for (const auto& a : cell.axes) axes.add(a.key, a.value.text);
    JsonObject o;
    o.add("id", cell.id).add("dir", cell.dir).add_raw("overrides", json_strings(cell.overrides())).add("axes", axes);
    if (!plan.groups.empty()) o.add("group", cell.group);
    o.add("state", to_string(scheduler.state(cell.index)));
    const auto& r = scheduler.result(cell.index);
    o.add_raw("status", r ? json_quote(r->status) : "null");
    s += (cell.index ? ",\n    " : "\n    ") + o.str();
  }
  return s + (plan.cells.empty() ? "]" : "\n  ]");
}

std::string groups_json(const Plan& plan, const Scheduler& scheduler) {
  std::string s = "[";
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const auto& group = plan.groups[g];
    const auto& status = scheduler.groups()[g];
    std::string stages = "[";
    for (size_t d = 0; d < group.stages.size(); ++d) {
      std::vector<std::string> ids;
      for (const size_t c : group.stages[d]) ids.push_back(plan.cells[c].id);
      stages += (d ? ", " : "") + json_strings(ids);
    }
    const bool by_depth = plan.study.protocol == Protocol::min_depth;
    JsonObject o;
    o.add("key", group.key)
        .add_raw(by_depth ? "depths" : "values", json_strings(group.labels))
        .add_raw("cells", stages + "]")
        .add("decided", status.decided)
        .add_raw(by_depth ? "min_depth" : "reached", status.reached ? json_quote(group.labels[*status.reached]) : "null");
    s += (g ? ",\n    " : "\n    ") + o.str();
  }
  return s + (plan.groups.empty() ? "]" : "\n  ]");
}

}  // namespace

std::string manifest_json(const Plan& plan, const Scheduler& scheduler, const ManifestInfo& info) {
  const Study& study = plan.study;
  // Top-level keys one per line (readable, diff-friendly); nested values on one line each.
  std::string s = "{\n";
  auto line = [&s](const std::string& key, const std::string& json, bool last = false) {
    s += "  " + json_quote(key) + ": " + json + (last ? "\n" : ",\n");
  };
  line("format", json_quote("statebench-sweep"));
  line("version", std::to_string(kManifestVersion));
  line("name", json_quote(study.name));
  line("description", json_quote(study.description));
  line("study", json_quote("study.yaml"));
  line("study_source", json_quote(info.study_source));
  line("base", json_quote(info.base_config));
  line("set", json_strings(study.set));
  line("protocol", json_quote(to_string(study.protocol)));
  line("options", options_json(study).str());
  line("metric", json_quote(plan.metric));
  line("axes", axes_json(study));
  line("started", json_quote(info.started));
  line("updated", json_quote(utc_now()));
  line("complete", info.complete ? "true" : "false");
  JsonObject counts;
  for (const CellState st : {CellState::pending, CellState::running, CellState::finished, CellState::skipped})
    counts.add(to_string(st), scheduler.count(st));
  line("counts", counts.str());
  line("groups", groups_json(plan, scheduler));
  line("cells", cells_json(plan, scheduler), true);
  return s + "}\n";
}

void write_manifest(const std::string& out_dir, const Plan& plan, const Scheduler& scheduler, const ManifestInfo& info) {
  write_file_atomic((std::filesystem::path(out_dir) / "manifest.json").string(), manifest_json(plan, scheduler, info));
}

}  // namespace sb::sweep
