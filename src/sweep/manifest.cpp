// manifest.cpp: manifest.json to and from JSON, its line layout, and building it from a sweep's
// plan and scheduler (see manifest.hpp, docs/sweeps.md).
#include "sweep/manifest.hpp"

#include <filesystem>

#include "core/error.hpp"
#include "core/utc_time.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "sweep/plan.hpp"

namespace sb::sweep {

namespace {

Json number_or_null(const std::optional<double>& v) { return v ? json_number_value(*v) : Json(nullptr); }

std::vector<std::string> texts(const Json& v) {
  std::vector<std::string> out;
  if (v.is_array())
    for (const Json& x : v) out.push_back(json_text(x));
  else if (!v.is_null())
    out.push_back(json_text(v));
  return out;
}

template <class F>
void with(const Json& j, const char* key, F&& read) {
  if (const Json* v = json_field(j, key)) read(*v);
}

ManifestOptions read_options(const Json& o) {
  ManifestOptions out;
  if (!o.is_object()) return out;
  with(o, "axis", [&](const Json& v) { out.axis = json_text(v); });
  with(o, "metric", [&](const Json& v) { out.metric = json_text(v); });
  with(o, "threshold", [&](const Json& v) {
    const double t = json_number(v, "options.threshold");
    if (t == t) out.threshold = t;
  });
  with(o, "best_over", [&](const Json& v) { out.best_over = texts(v); });
  with(o, "order", [&](const Json& v) { out.order = json_text(v); });
  with(o, "stop_at", [&](const Json& v) {
    const double t = json_number(v, "options.stop_at");
    if (t == t) out.stop_at = t;
  });
  return out;
}

std::vector<ManifestAxis> read_axes(const Json& axes) {
  std::vector<ManifestAxis> out;
  if (axes.is_array()) {
    for (const Json& a : axes) {
      ManifestAxis axis;
      if (a.is_object()) {
        const Json* key = json_field(a, "key");
        if (!key) key = json_field(a, "name");
        if (!key) continue;
        axis.key = json_text(*key);
        with(a, "kind", [&](const Json& v) { axis.kind = json_text(v); });
        with(a, "values", [&](const Json& v) { axis.values = texts(v); });
      } else {
        axis.key = json_text(a);
      }
      out.push_back(std::move(axis));
    }
  } else if (axes.is_object()) {
    for (const auto& [key, values] : axes.items()) out.push_back({key, "grid", texts(values)});
  }
  return out;
}

ManifestCell read_cell(const Json& c, size_t index) {
  if (!c.is_object()) fail("cells[{}]: expected an object", index);
  ManifestCell cell;
  cell.id = json_field(c, "id") ? json_text(c["id"]) : std::to_string(index);
  cell.dir = json_field(c, "dir") ? json_text(c["dir"]) : "cells/" + cell.id;
  with(c, "overrides", [&](const Json& o) {
    if (o.is_object()) {
      for (const auto& [key, value] : o.items()) cell.overrides.emplace_back(key, json_text(value));
    } else if (o.is_array()) {  // ["key=value", ...]
      for (const Json& kv : o) {
        const std::string s = json_text(kv);
        const size_t eq = s.find('=');
        if (eq != std::string::npos) cell.overrides.emplace_back(s.substr(0, eq), s.substr(eq + 1));
      }
    }
  });
  with(c, "axes", [&](const Json& a) {
    if (a.is_object())
      for (const auto& [key, value] : a.items()) cell.axes.emplace_back(key, json_text(value));
  });
  with(c, "group", [&](const Json& v) {
    if (!v.is_null()) cell.group = json_text(v);
  });
  with(c, "state", [&](const Json& v) { cell.state = json_text(v); });
  with(c, "status", [&](const Json& v) {
    if (!v.is_null()) cell.status = json_text(v);
  });
  return cell;
}

ManifestGroup read_group(const Json& g) {
  ManifestGroup group;
  if (!g.is_object()) return group;
  with(g, "key", [&](const Json& v) { group.key = json_text(v); });
  const Json* labels = json_field(g, "depths");
  if (!labels) labels = json_field(g, "values");
  if (labels) group.labels = texts(*labels);
  with(g, "cells", [&](const Json& v) {
    if (v.is_array())
      for (const Json& stage : v) group.cells.push_back(texts(stage));
  });
  with(g, "decided", [&](const Json& v) { group.decided = v.is_boolean() && v.get<bool>(); });
  const Json* reached = json_field(g, "min_depth");
  if (!reached) reached = json_field(g, "reached");
  if (reached && !reached->is_null()) group.reached = json_text(*reached);
  return group;
}

}  // namespace

void to_json(Json& j, const Manifest& m) {
  j = Json::object();
  j["format"] = m.format;
  j["version"] = m.version;
  j["name"] = m.name;
  j["description"] = m.description;
  j["study"] = m.study;
  j["study_source"] = m.study_source;
  j["base"] = m.base;
  j["set"] = m.set;
  j["protocol"] = m.protocol;
  Json options = Json::object();
  if (m.protocol == "min_depth") {
    options["axis"] = m.options.axis;
    options["threshold"] = number_or_null(m.options.threshold);
    options["metric"] = m.options.metric;
    options["best_over"] = m.options.best_over;
    if (!m.options.order.empty()) options["order"] = m.options.order;  // absent: ascending
  } else if (m.protocol == "max_lr") {
    options["axis"] = m.options.axis;
    options["metric"] = m.options.metric;
    options["stop_at"] = number_or_null(m.options.stop_at);
  }
  j["options"] = std::move(options);
  j["metric"] = m.metric;
  Json axes = Json::array();
  for (const ManifestAxis& a : m.axes) axes.push_back(Json{{"key", a.key}, {"kind", a.kind}, {"values", a.values}});
  j["axes"] = std::move(axes);
  j["started"] = m.started;
  j["updated"] = m.updated;
  j["complete"] = m.complete;
  Json counts = Json::object();
  for (const auto& [state, n] : m.counts) counts[state] = n;
  j["counts"] = std::move(counts);
  const bool by_depth = m.protocol == "min_depth";
  Json groups = Json::array();
  for (const ManifestGroup& g : m.groups) {
    Json o = Json::object();
    o["key"] = g.key;
    o[by_depth ? "depths" : "values"] = g.labels;
    o["cells"] = g.cells;
    o["decided"] = g.decided;
    o[by_depth ? "min_depth" : "reached"] = g.reached ? Json(*g.reached) : Json(nullptr);
    groups.push_back(std::move(o));
  }
  j["groups"] = std::move(groups);
  Json cells = Json::array();
  for (const ManifestCell& c : m.cells) {
    Json o = Json::object();
    o["id"] = c.id;
    o["dir"] = c.dir;
    Json overrides = Json::array(), axes_of = Json::object();
    for (const auto& [key, value] : c.overrides) overrides.push_back(key + "=" + value);
    for (const auto& [key, value] : c.axes) axes_of[key] = value;
    o["overrides"] = std::move(overrides);
    o["axes"] = std::move(axes_of);
    if (c.group) o["group"] = *c.group;
    o["state"] = c.state;
    o["status"] = c.status ? Json(*c.status) : Json(nullptr);
    cells.push_back(std::move(o));
  }
  j["cells"] = std::move(cells);
}

void from_json(const Json& j, Manifest& m) {
  if (!j.is_object()) fail("expected a JSON object");
  m = Manifest{};
  m.name.clear();
  m.study.clear();
  with(j, "format", [&](const Json& v) { m.format = json_text(v); });
  with(j, "version", [&](const Json& v) { m.version = json_integer(v, "version"); });
  with(j, "name", [&](const Json& v) { m.name = json_text(v); });
  with(j, "description", [&](const Json& v) { m.description = json_text(v); });
  with(j, "study", [&](const Json& v) { m.study = json_text(v); });
  with(j, "study_source", [&](const Json& v) { m.study_source = json_text(v); });
  with(j, "base", [&](const Json& v) { m.base = json_text(v); });
  with(j, "set", [&](const Json& v) { m.set = texts(v); });
  m.protocol.clear();
  with(j, "protocol", [&](const Json& v) { m.protocol = json_text(v); });
  const Json* options = json_field(j, "protocol_options");
  if (!options) options = json_field(j, "options");
  if (options) m.options = read_options(*options);
  with(j, "metric", [&](const Json& v) { m.metric = json_text(v); });
  with(j, "axes", [&](const Json& v) { m.axes = read_axes(v); });
  with(j, "started", [&](const Json& v) { m.started = json_text(v); });
  with(j, "updated", [&](const Json& v) { m.updated = json_text(v); });
  with(j, "complete", [&](const Json& v) { m.complete = v.is_boolean() && v.get<bool>(); });
  with(j, "counts", [&](const Json& v) {
    if (v.is_object())
      for (const auto& [state, n] : v.items()) m.counts.emplace_back(state, json_integer(n, "counts." + state));
  });
  with(j, "groups", [&](const Json& v) {
    if (v.is_array())
      for (const Json& g : v) m.groups.push_back(read_group(g));
  });
  const Json* cells = json_field(j, "cells");
  if (!cells || !cells->is_array()) fail("expected a \"cells\" list");
  for (size_t i = 0; i < cells->size(); ++i) m.cells.push_back(read_cell((*cells)[i], i));
}

std::string manifest_text(const Manifest& m) {
  const Json j = m;
  std::string s = "{\n";
  size_t k = 0;
  for (const auto& [key, value] : j.items()) {
    s += "  " + Json(key).dump() + ": ";
    if (value.is_array() && !value.empty() && value.front().is_object()) {
      s += "[";
      for (size_t i = 0; i < value.size(); ++i) s += (i ? ",\n    " : "\n    ") + value[i].dump();
      s += "\n  ]";
    } else {
      s += value.dump();
    }
    s += ++k < j.size() ? ",\n" : "\n";
  }
  return s + "}\n";
}

Manifest read_manifest(const std::string& path) {
  try {
    return parse_json(read_file(path)).get<Manifest>();
  } catch (const Error& e) {
    fail("manifest '{}': {}", path, e.what());
  }
}

Manifest make_manifest(const Plan& plan, const Scheduler& scheduler, const ManifestInfo& info) {
  const Study& study = plan.study;
  Manifest m;
  m.name = study.name;
  m.description = study.description;
  m.study_source = info.study_source;
  m.base = info.base_config;
  m.set = study.set;
  m.protocol = to_string(study.protocol);
  if (study.protocol == Protocol::min_depth) {
    m.options.axis = study.min_depth.axis;
    m.options.threshold = study.min_depth.threshold;
    m.options.metric = study.min_depth.metric;
    m.options.best_over = study.min_depth.best_over;
    if (study.min_depth.deepest_first) m.options.order = "deepest_first";
  } else if (study.protocol == Protocol::max_lr) {
    m.options.axis = study.max_lr.axis;
    m.options.metric = study.max_lr.metric;
    m.options.stop_at = study.max_lr.stop_at;
  }
  m.metric = plan.metric;
  for (const Axis& a : study.axes) {
    ManifestAxis axis{a.key, a.zipped ? "zip" : "grid", {}};
    for (const AxisValue& v : a.values) axis.values.push_back(v.text);
    m.axes.push_back(std::move(axis));
  }
  m.started = info.started;
  m.updated = utc_now();
  m.complete = info.complete;
  for (const CellState st : {CellState::pending, CellState::running, CellState::finished, CellState::skipped})
    m.counts.emplace_back(to_string(st), static_cast<int64_t>(scheduler.count(st)));
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const Plan::Group& group = plan.groups[g];
    const Scheduler::GroupStatus& status = scheduler.groups()[g];
    ManifestGroup out{group.key, group.labels, {}, status.decided, std::nullopt};
    for (const auto& stage : group.stages) {
      std::vector<std::string> ids;
      for (const size_t c : stage) ids.push_back(plan.cells[c].id);
      out.cells.push_back(std::move(ids));
    }
    if (status.reached) out.reached = group.labels[*status.reached];
    m.groups.push_back(std::move(out));
  }
  for (const Cell& cell : plan.cells) {
    ManifestCell c;
    c.id = cell.id;
    c.dir = cell.dir;
    for (const CellAxis& a : cell.axes) {
      c.overrides.emplace_back(a.key, a.value.text);
      c.axes.emplace_back(a.key, a.value.text);
    }
    if (!plan.groups.empty()) c.group = cell.group;
    c.state = to_string(scheduler.state(cell.index));
    if (const auto& r = scheduler.result(cell.index)) c.status = r->status;
    m.cells.push_back(std::move(c));
  }
  return m;
}

void write_manifest(const std::string& out_dir, const Manifest& manifest) {
  write_file_atomic((std::filesystem::path(out_dir) / "manifest.json").string(), manifest_text(manifest));
}

}  // namespace sb::sweep
