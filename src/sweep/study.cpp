// study.cpp: study YAML -> sweep::Study: top-level keys, base config, set, grid/zip axes and
// protocol options, with one-line errors naming the study file and the offending key.
#include "sweep/study.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace sb::sweep {

namespace fs = std::filesystem;

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::grid: return "grid";
    case Protocol::min_depth: return "min_depth";
    case Protocol::max_lr: return "max_lr";
  }
  return "?";
}

ProtocolMetric parse_protocol_metric(const std::string& metric) {
  const auto dot = metric.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == metric.size())
    fail("metric '{}' must be <eval key>.<field>, e.g. val.token_accuracy", metric);
  ProtocolMetric m{metric.substr(0, dot), metric.substr(dot + 1)};
  if (m.field == "error_rate" || m.field == "loss") m.higher_is_better = false;
  else if (m.field != "token_accuracy" && m.field != "sequence_accuracy")
    fail("metric '{}': unknown field '{}' (token_accuracy, sequence_accuracy, error_rate or loss)", metric, m.field);
  return m;
}

const Axis* Study::find_axis(const std::string& key) const {
  for (const auto& a : axes)
    if (a.key == key) return &a;
  return nullptr;
}

bool Study::sets_key(const std::string& key) const {
  if (find_axis(key)) return true;
  for (const auto& o : set)
    if (o.rfind(key + "=", 0) == 0) return true;
  return false;
}

size_t Study::zip_length() const {
  for (const auto& a : axes)
    if (a.zipped) return a.values.size();
  return 0;
}

namespace {

const std::vector<std::string> kTopKeys = {"name", "description", "plugins", "base",      "config", "set",
                                           "grid", "zip",         "protocol", "min_depth", "max_lr"};

std::string describe(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "nothing";
}

// A YAML value as one line of flow YAML, the form `--set key=value` parses back.
std::string flow_text(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "";
  YAML::Emitter e;
  e.SetSeqFormat(YAML::Flow);
  e.SetMapFormat(YAML::Flow);
  e << n;
  return e.c_str();
}

AxisValue axis_value(const YAML::Node& n) {
  AxisValue v;
  v.text = flow_text(n);
  v.label = n.IsScalar() ? n.Scalar() : v.text;
  return v;
}

void check_key_path(const std::string& where, const std::string& key) {
  bool ok = !key.empty() && key.front() != '.' && key.back() != '.' && key.find("..") == std::string::npos;
  for (const char c : key) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (!ok) fail("{}: '{}' is not a config key path (e.g. model.n_layers)", where, key);
}

std::string scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) fail("{}: expected a single value, got {}", where, describe(n));
  return n.Scalar();
}

void check_known_keys(const YAML::Node& map, const std::string& where, const std::vector<std::string>& known) {
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail("{}unknown key '{}' (known: {})", where.empty() ? "" : where + ": ", key, list);
    }
  }
}

std::vector<Axis> read_axes(const YAML::Node& node, const char* section, bool zipped) {
  std::vector<Axis> axes;
  if (!node.IsDefined() || node.IsNull()) return axes;
  if (!node.IsMap()) fail("{}: expected a map of config key -> list of values, got {}", section, describe(node));
  if (node.size() == 0) fail("{}: no axes (give at least one config key with a list of values)", section);
  for (const auto& kv : node) {
    Axis axis;
    axis.key = scalar(kv.first, section);
    axis.zipped = zipped;
    const std::string where = fmt::format("{} '{}'", section, axis.key);
    check_key_path(section, axis.key);
    if (!kv.second.IsSequence()) fail("{}: expected a list of values, got {}", where, describe(kv.second));
    if (kv.second.size() == 0) fail("{}: empty list of values", where);
    for (const auto& v : kv.second) {
      AxisValue value = axis_value(v);
      // A zip list may repeat a value (entry i goes with entry i of the other lists); its rows
      // must differ, which is checked once all zip lists are read.
      if (!zipped && std::find(axis.values.begin(), axis.values.end(), value) != axis.values.end())
        fail("{}: value '{}' is listed twice", where, value.label);
      axis.values.push_back(std::move(value));
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

// Keys may not repeat or nest (one a prefix section of another): the override order would decide.
void check_distinct(const std::vector<std::pair<std::string, std::string>>& keys) {
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = i + 1; j < keys.size(); ++j) {
      const auto& [a, wa] = keys[i];
      const auto& [b, wb] = keys[j];
      if (a == b || b.rfind(a + ".", 0) == 0 || a.rfind(b + ".", 0) == 0)
        fail("key '{}' ({}) overlaps key '{}' ({}): each config key may be set in one place only", a, wa, b, wb);
    }
}

std::vector<std::string> read_set(const YAML::Node& node) {
  std::vector<std::string> set;
  if (!node.IsDefined() || node.IsNull()) return set;
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = scalar(kv.first, "set");
      check_key_path("set", key);
      set.push_back(key + "=" + flow_text(kv.second));
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      const std::string text = scalar(item, "set");
      const auto eq = text.find('=');
      if (eq == std::string::npos) fail("set: '{}': expected key.path=value", text);
      check_key_path("set", text.substr(0, eq));
      set.push_back(text);
    }
  } else {
    fail("set: expected a map of config key -> value (or a list of 'key=value'), got {}", describe(node));
  }
  return set;
}

const Axis& grid_axis(const Study& s, const std::string& key, const std::string& where) {
  const Axis* a = s.find_axis(key);
  if (!a) fail("{}: '{}' is not a grid axis of this study", where, key);
  if (a->zipped) fail("{}: '{}' is a zip axis; it must be a grid axis", where, key);
  return *a;
}

void check_metric(const std::string& metric, const std::string& where) {
  try {
    parse_protocol_metric(metric);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

// A threshold the metric can reach: accuracies and error rates in [0, 1], a loss >= 0.
void check_threshold(double threshold, const std::string& metric, const std::string& where) {
  const ProtocolMetric m = parse_protocol_metric(metric);
  const bool loss = m.field == "loss";
  if (threshold < 0 || (!loss && threshold > 1))
    fail("{}: {} is out of range for {} (expected {})", where, threshold, m.field, loss ? "a number >= 0" : "a number in [0, 1]");
}

double number(const YAML::Node& node, const std::string& where) {
  const std::string t = scalar(node, where);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !std::isfinite(v)) fail("{}: expected a number, got '{}'", where, t);
  return v;
}

void read_min_depth(const YAML::Node& node, Study& s) {
  if (!node.IsDefined() || node.IsNull()) fail("protocol min_depth needs `min_depth: {{axis: ..., threshold: ...}}`");
  if (!node.IsMap()) fail("min_depth: expected a map, got {}", describe(node));
  check_known_keys(node, "min_depth", {"axis", "threshold", "metric", "best_over", "order"});
  MinDepthOptions& o = s.min_depth;
  if (!node["axis"]) fail("min_depth: missing 'axis' (the depth axis, e.g. model.n_layers)");
  o.axis = scalar(node["axis"], "min_depth.axis");
  const Axis axis = grid_axis(s, o.axis, "min_depth.axis");  // a copy: GCC 13 warns on the reference
  for (const auto& v : axis.values) {
    char* end = nullptr;
    const double d = std::strtod(v.label.c_str(), &end);
    if (v.label.empty() || *end != '\0' || !std::isfinite(d))
      fail("min_depth.axis '{}': value '{}' is not a number (depths are run in increasing order)", o.axis, v.label);
  }
  if (!node["threshold"]) fail("min_depth: missing 'threshold' (e.g. 0.9)");
  o.threshold = number(node["threshold"], "min_depth.threshold");
  if (node["metric"]) o.metric = scalar(node["metric"], "min_depth.metric");
  check_metric(o.metric, "min_depth.metric");
  check_threshold(o.threshold, o.metric, "min_depth.threshold");
  if (const YAML::Node b = node["best_over"]; b && !b.IsNull()) {
    if (b.IsScalar()) o.best_over.push_back(b.Scalar());
    else if (b.IsSequence())
      for (const auto& k : b) o.best_over.push_back(scalar(k, "min_depth.best_over"));
    else fail("min_depth.best_over: expected a list of axis keys, got {}", describe(b));
  }
  for (const auto& k : o.best_over) {
    if (!s.find_axis(k)) fail("min_depth.best_over: '{}' is not an axis of this study", k);
    if (k == o.axis) fail("min_depth.best_over: '{}' is the depth axis itself", k);
  }
  if (node["order"]) {
    const std::string order = scalar(node["order"], "min_depth.order");
    if (order != "ascending" && order != "deepest_first")
      fail("min_depth.order: unknown order '{}' (known: ascending, deepest_first)", order);
    o.deepest_first = order == "deepest_first";
  }
}

void read_max_lr(const YAML::Node& node, Study& s) {
  if (node.IsDefined() && !node.IsNull()) {
    if (!node.IsMap()) fail("max_lr: expected a map, got {}", describe(node));
    check_known_keys(node, "max_lr", {"axis", "metric", "stop_at"});
    if (node["axis"]) s.max_lr.axis = scalar(node["axis"], "max_lr.axis");
    if (node["metric"]) s.max_lr.metric = scalar(node["metric"], "max_lr.metric");
    if (node["stop_at"]) s.max_lr.stop_at = number(node["stop_at"], "max_lr.stop_at");
  }
  grid_axis(s, s.max_lr.axis, "max_lr.axis");
  check_metric(s.max_lr.metric, "max_lr.metric");
  if (s.max_lr.stop_at) check_threshold(*s.max_lr.stop_at, s.max_lr.metric, "max_lr.stop_at");
}

void parse_into(Study& s, const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(s.text);
  } catch (const YAML::ParserException& e) {
    fail("YAML syntax error at line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  if (!root.IsMap()) fail("expected a map with at least `base` (or `config`) and `grid`");
  check_known_keys(root, "", kTopKeys);

  if (root["name"]) s.name = scalar(root["name"], "name");
  else s.name = fs::path(s.file).stem().string();
  const bool name_ok = !s.name.empty() && s.name != "." && s.name != ".." &&
                       std::all_of(s.name.begin(), s.name.end(), [](unsigned char c) {
                         return std::isalnum(c) || c == '_' || c == '-' || c == '.';
                       });
  if (!name_ok) fail("name: '{}' must be letters, digits, '_', '-' or '.'", s.name);
  if (root["description"]) s.description = scalar(root["description"], "description");

  if (const YAML::Node plugins = root["plugins"]) {  // a file or a list of files, relative to the study
    std::vector<std::string> files;
    if (plugins.IsSequence())
      for (const auto& p : plugins) files.push_back(scalar(p, "plugins"));
    else
      files.push_back(scalar(plugins, "plugins"));
    for (const auto& rel : files) {
      const fs::path p = fs::path(rel).is_absolute() || base_dir.empty() ? fs::path(rel) : fs::path(base_dir) / rel;
      if (!fs::is_regular_file(p)) fail("plugins: plugin file '{}' does not exist", p.lexically_normal().string());
      s.plugins.push_back(fs::absolute(p).lexically_normal().string());
    }
  }

  const YAML::Node base = root["base"], config = root["config"];
  if (base && config) fail("give either `base` (a config file) or `config` (an inline config), not both");
  if (base) {
    const std::string rel = scalar(base, "base");
    const fs::path p = fs::path(rel).is_absolute() || base_dir.empty() ? fs::path(rel) : fs::path(base_dir) / rel;
    s.base_file = p.lexically_normal().string();
    if (!fs::is_regular_file(s.base_file)) fail("base: config file '{}' does not exist", s.base_file);
    s.base_yaml = read_file(s.base_file);
  } else if (config) {
    if (!config.IsNull() && !config.IsMap()) fail("config: expected an inline train config (a map), got {}", describe(config));
    s.base_yaml = config.IsNull() ? "" : YAML::Dump(config) + "\n";
  } else {
    fail("missing `base` (a train config file, relative to the study) or `config` (an inline train config)");
  }

  s.set = read_set(root["set"]);
  const YAML::Node grid = root["grid"], zip = root["zip"];
  if (grid && (grid.IsNull() || (grid.IsMap() && grid.size() == 0))) fail("grid: empty (give at least one axis)");
  s.axes = read_axes(grid, "grid", false);
  for (auto& a : read_axes(zip, "zip", true)) s.axes.push_back(std::move(a));
  if (s.axes.empty()) fail("no axes: give `grid` (and/or `zip`) with at least one config key and its values");
  const Axis* first_zip = nullptr;
  for (const auto& a : s.axes) {
    if (!a.zipped) continue;
    if (!first_zip) first_zip = &a;
    if (a.values.size() != first_zip->values.size())
      fail("zip: lists of unequal length ('{}' has {} values, '{}' has {})", first_zip->key, first_zip->values.size(),
           a.key, a.values.size());
  }
  if (first_zip) {
    std::vector<std::vector<std::string>> rows(first_zip->values.size());
    for (const auto& a : s.axes)
      if (a.zipped)
        for (size_t i = 0; i < a.values.size(); ++i) rows[i].push_back(a.values[i].text);
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (rows[i] == rows[j]) fail("zip: entries {} and {} are the same combination", j + 1, i + 1);
  }

  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& o : s.set) keys.emplace_back(o.substr(0, o.find('=')), "set");
  for (const auto& a : s.axes) keys.emplace_back(a.key, a.zipped ? "zip" : "grid");
  check_distinct(keys);

  const std::string protocol = root["protocol"] ? scalar(root["protocol"], "protocol") : "grid";
  if (protocol == "grid") s.protocol = Protocol::grid;
  else if (protocol == "min_depth") s.protocol = Protocol::min_depth;
  else if (protocol == "max_lr") s.protocol = Protocol::max_lr;
  else fail("protocol: unknown protocol '{}' (known: grid, min_depth, max_lr)", protocol);
  if (root["min_depth"] && s.protocol != Protocol::min_depth)
    fail("min_depth: options given but protocol is '{}' (set `protocol: min_depth`)", protocol);
  if (root["max_lr"] && s.protocol != Protocol::max_lr)
    fail("max_lr: options given but protocol is '{}' (set `protocol: max_lr`)", protocol);
  if (s.protocol == Protocol::min_depth) read_min_depth(root["min_depth"], s);
  if (s.protocol == Protocol::max_lr) read_max_lr(root["max_lr"], s);
}

}  // namespace

Study parse_study(const std::string& text, const std::string& file, const std::string& base_dir) {
  Study s;
  s.file = file;
  s.text = text;
  try {
    parse_into(s, base_dir);
  } catch (const Error& e) {
    fail("study '{}': {}", file, e.what());
  } catch (const YAML::Exception& e) {
    fail("study '{}': {}", file, e.what());
  }
  return s;
}

Study load_study(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("study '{}': file does not exist", path);
  if (!fs::is_regular_file(path, ec)) fail("study '{}': not a regular file", path);
  return parse_study(read_file(path), path, fs::path(path).parent_path().string());
}

}  // namespace sb::sweep
