// results.cpp: the study loader (see results.hpp; the runs' labels: study_labels.cpp): runs from
// manifest.json (sweep/manifest.hpp) and each run's summary (train/run_summary.hpp): a line of the
// study's cells.jsonl.gz (packed_cells.hpp), else cells/<id>/summary.json, else config.yaml for an
// unfinished run.
#include "report/results.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "report/packed_cells.hpp"
#include "report/study_labels.hpp"
#include "sweep/manifest.hpp"
#include "train/run_summary.hpp"

namespace sb::report {

namespace fs = std::filesystem;

EvalResult eval_of_key(const std::string& key) {
  EvalResult e;
  e.key = key;
  e.split = key;
  if (const size_t at = key.rfind('@'); at != std::string::npos) {
    char* end = nullptr;
    const long long length = std::strtoll(key.c_str() + at + 1, &end, 10);
    if (at + 1 < key.size() && *end == '\0' && length > 0) e.split = key.substr(0, at), e.at_length = length;
  }
  return e;
}

namespace {

// A scalar's text; a list or map as YAML flow text ("[path, rope]"), so any override value loads.
std::string scalar_text(const YAML::Node& node) {
  if (!node || node.IsNull()) return "";
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

double to_number(const std::string& text, const std::string& what) {
  if (text.empty() || text == "null") return kNaN;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') fail("'{}': expected a number, got '{}'", what, text);
  return v;
}

int64_t to_integer(const std::string& text, const std::string& what) {
  const double v = to_number(text, what);
  if (!(v == static_cast<double>(static_cast<int64_t>(v)))) fail("'{}': expected an integer, got '{}'", what, text);
  return static_cast<int64_t>(v);
}

EvalResult eval_result(const std::string& key, const EvalSummary& s) {
  EvalResult e = eval_of_key(key);
  e.token_accuracy = s.token_accuracy;
  e.sequence_accuracy = s.sequence_accuracy;
  e.error_rate = s.error_rate;
  e.loss = s.loss;
  e.scored = s.scored;
  e.errors = s.errors;
  e.sequences = s.sequences;
  e.sequence_errors = s.sequence_errors;
  e.error_ci95 = s.error_ci95;
  return e;
}

// Applies every scalar (or list) entry of `map` as config key prefix + name.
void apply_map(RunRecord& r, const YAML::Node& map, const std::string& prefix) {
  if (!map || !map.IsMap()) return;
  for (const auto& kv : map) {
    const std::string key = prefix + kv.first.Scalar();
    if (kv.second.IsMap()) continue;  // nested settings (e.g. model.init) never tell models apart here
    apply_setting(r, key, scalar_text(kv.second));
  }
}

RunStatus parse_status(const std::string& s, bool& known) {
  known = true;
  if (s == "completed") return RunStatus::completed;
  if (s == "early_stopped") return RunStatus::early_stopped;
  if (s == "diverged") return RunStatus::diverged;
  known = s == "failed";
  return RunStatus::failed;
}

// Natural order: digit runs compare as numbers ("cell2" < "cell10").
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      const std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      const size_t la = na.find_first_not_of('0'), lb = nb.find_first_not_of('0');
      const std::string ta = la == std::string::npos ? "" : na.substr(la), tb = lb == std::string::npos ? "" : nb.substr(lb);
      if (ta.size() != tb.size()) return ta.size() < tb.size();
      if (ta != tb) return ta < tb;
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// Reads what config.yaml (the effective config, written at the start) says about an unfinished run.
void read_config_yaml(RunRecord& r, const fs::path& file, std::vector<std::string>& warnings) {
  try {
    const YAML::Node c = YAML::LoadFile(file.string());
    if (const YAML::Node task = c["task"]; task && task.IsMap()) {
      if (task["name"]) apply_setting(r, "task.name", scalar_text(task["name"]));
      apply_map(r, task["params"], "task.params.");
    }
    apply_map(r, c["model"], "model.");
    if (c["train"] && c["train"]["seed"]) apply_setting(r, "train.seed", scalar_text(c["train"]["seed"]));
    if (c["optim"] && c["optim"]["lr"]) apply_setting(r, "optim.lr", scalar_text(c["optim"]["lr"]));
  } catch (const std::exception& e) {  // YAML::Exception or sb::Error: the run stays unfinished
    warnings.push_back(fmt::format("cannot read '{}': {}", file.string(), e.what()));
  }
}

// Fills `r` from its packed summary (cells.jsonl.gz), else its run directory: summary.json, else
// config.yaml, else nothing.
void load_run(RunRecord& r, const PackedCells& packed, const LoadOptions& options, std::vector<std::string>& warnings) {
  const fs::path dir(r.dir), summary = dir / "summary.json";
  const auto it = packed.cells.find(r.id);
  if (it == packed.cells.end()) {
    if (!fs::is_directory(dir)) return;  // status stays missing (or skipped, from the manifest)
    if (!fs::exists(summary)) {
      r.status = RunStatus::unfinished;
      if (fs::exists(dir / "config.yaml")) read_config_yaml(r, dir / "config.yaml", warnings);
      return;
    }
  }
  r.source = it != packed.cells.end() ? packed.where(r.id) : "'" + summary.string() + "'";
  try {
    if (it != packed.cells.end()) parse_summary(it->second.summary, r);
    else parse_summary(read_file(summary.string()), r);
  } catch (const std::exception& e) {  // sb::Error from the reader, or yaml-cpp on odd input
    const std::string line = fmt::format("{}: {}", r.source, e.what());
    if (options.strict) fail("{}", line);
    warnings.push_back("skipping " + line);
    r.status = RunStatus::unreadable;
    r.evals.clear();
  }
}

void read_study_manifest(Study& study, const fs::path& file, const PackedCells& packed, const LoadOptions& options) {
  const sweep::Manifest m = sweep::read_manifest(file.string());
  StudyInfo& info = study.info;
  info.has_manifest = true;
  info.name = m.study_name();
  info.protocol = m.protocol;
  info.threshold = m.options.threshold;
  info.metric = m.options.metric;
  info.axis = m.options.axis;
  info.best_over = m.options.best_over;
  for (const sweep::ManifestAxis& a : m.axes) info.axes.push_back(a.key);
  try {
    for (const sweep::ManifestCell& c : m.cells) {
      RunRecord r;
      r.id = c.id;
      r.dir = fs::path(c.dir).is_absolute() ? c.dir : (fs::path(study.dir) / c.dir).string();
      for (const auto& [key, value] : c.overrides) apply_setting(r, key, value);
      if (c.state == "skipped") r.status = RunStatus::skipped;
      study.runs.push_back(std::move(r));
    }
  } catch (const Error& e) {
    fail("manifest '{}': {}", file.string(), e.what());
  }
  for (RunRecord& r : study.runs) load_run(r, packed, options, study.warnings);
  std::vector<std::string> strays;  // packed lines of no manifest cell
  for (const std::string& id : packed.order)
    if (std::none_of(study.runs.begin(), study.runs.end(), [&](const RunRecord& r) { return r.id == id; }))
      strays.push_back(id);
  if (!strays.empty())
    study.warnings.push_back(fmt::format("'{}': {} line{} of no cell in '{}' left out (first: cell {})", packed.file,
                                         strays.size(), strays.size() == 1 ? "" : "s", file.string(), strays.front()));
}

void scan_run_dirs(Study& study, const PackedCells& packed, const LoadOptions& options) {
  const fs::path root(study.dir);
  const fs::path parent = fs::is_directory(root / "cells") ? root / "cells" : root;
  std::vector<std::string> names = packed.order;
  for (const auto& entry : fs::directory_iterator(parent)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    if ((fs::exists(entry.path() / "summary.json") || fs::exists(entry.path() / "config.yaml")) && !packed.cells.count(name))
      names.push_back(name);
  }
  std::sort(names.begin(), names.end(), natural_less);
  for (const auto& name : names) {
    RunRecord r;
    r.id = name;
    r.dir = (parent / name).string();
    load_run(r, packed, options, study.warnings);
    study.runs.push_back(std::move(r));
  }
}

}  // namespace

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::completed: return "completed";
    case RunStatus::early_stopped: return "early_stopped";
    case RunStatus::diverged: return "diverged";
    case RunStatus::failed: return "failed";
    case RunStatus::unfinished: return "unfinished";
    case RunStatus::missing: return "missing";
    case RunStatus::skipped: return "skipped";
    case RunStatus::unreadable: return "unreadable";
  }
  return "?";
}

bool has_result(RunStatus s) { return s == RunStatus::completed || s == RunStatus::early_stopped; }
bool is_pending(RunStatus s) {
  return s == RunStatus::unfinished || s == RunStatus::missing || s == RunStatus::unreadable;
}

std::string setting_name(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string length_settings_text(const Study& study, int64_t length) {
  const auto it = study.length_settings.find(length);
  if (it == study.length_settings.end()) return "";
  std::string out;
  for (const auto& [key, value] : it->second) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", setting_name(key), value);
  return out;
}

std::vector<std::string> length_key_names(const Study& study) {
  std::vector<std::string> out;
  for (const auto& k : study.length_keys) out.push_back(setting_name(k));
  return out;
}

std::vector<std::string> length_setting_values(const Study& study, int64_t length) {
  std::vector<std::string> out;
  const auto at = study.length_settings.find(length);
  for (const auto& k : study.length_keys) {
    const bool known = at != study.length_settings.end() && at->second.count(k);
    out.push_back(known ? at->second.at(k) : "-");
  }
  return out;
}

const EvalResult* RunRecord::eval(const std::string& key) const {
  for (const EvalResult& e : evals)
    if (e.key == key) return &e;
  return nullptr;
}

std::string RunRecord::attention_label() const {
  const bool mixed = std::any_of(layers.begin(), layers.end(), [&](const std::string& l) { return l != layers.front(); });
  if (!mixed) return attention.empty() ? (layers.empty() ? "?" : layers.front()) : attention;
  std::string out;
  for (const auto& l : layers) out += (out.empty() ? "" : "+") + l;
  return out;
}

namespace {
// Keys that say how a run was evaluated, logged or placed, not what was trained: never part of a
// model's label (the config fingerprint leaves out the same keys).
bool is_bookkeeping_key(const std::string& key) {
  static const char* const kKeys[] = {"task.eval", "train.eval_every", "train.eval_examples", "train.log_every",
                                      "train.checkpoint_every", "train.threads", "train.device",
                                      "train.target_accuracy", "train.target_metric", "train.target_eval", "out_dir"};
  for (const char* k : kKeys) {
    const std::string p(k);
    if (key == p || key.rfind(p + ".", 0) == 0) return true;
  }
  return false;
}
}  // namespace

void apply_setting(RunRecord& r, const std::string& key, const std::string& value) {
  if (is_bookkeeping_key(key)) return;
  if (key == "model.attention") {
    r.attention = value;
  } else if (key == "model.layers") {
    r.layers.clear();
    if (!value.empty() && value.front() == '[') {
      YAML::Node list;
      try {
        list = YAML::Load(value);
      } catch (const YAML::Exception&) {
        fail("'model.layers': cannot parse '{}'", value);
      }
      for (const auto& l : list) r.layers.push_back(scalar_text(l));
    } else if (!value.empty()) {
      r.layers.push_back(value);
    }
  } else if (key == "model.n_layers") {
    r.depth = value.empty() ? 0 : to_integer(value, key);
  } else if (key == "task.params.length") {
    r.train_length = value.empty() ? 0 : to_integer(value, key);
  } else if (key == "train.seed") {
    if (!value.empty()) r.seed = to_integer(value, key);
  } else if (key == "optim.lr") {
    const double lr = to_number(value, key);
    if (lr == lr) r.lr = lr;
  } else if (key == "model.params") {
    // A derived count (summary.json reports it), not a setting: never part of a model's label.
  } else {
    r.settings[key] = value;
  }
}

std::vector<std::string> unused_runs(const Study& study, const std::string& key) {
  std::vector<std::string> out;
  for (const RunRecord& r : study.runs) {
    std::string why;
    switch (r.status) {
      case RunStatus::skipped: continue;
      case RunStatus::unfinished: why = r.message.empty() ? "unfinished (no summary.json)" : "unfinished: " + r.message; break;
      case RunStatus::missing: why = "not run (no run directory)"; break;
      case RunStatus::unreadable: why = "summary.json unreadable"; break;
      case RunStatus::diverged: why = r.message.empty() ? "diverged" : "diverged: " + r.message; break;
      case RunStatus::failed: why = r.message.empty() ? "failed" : "failed: " + r.message.substr(0, 100); break;
      case RunStatus::completed:
      case RunStatus::early_stopped: {
        const EvalResult* e = r.eval(key);
        if (e && !(std::isnan(e->token_accuracy) && e->errors < 0 && std::isnan(e->loss))) continue;
        why = fmt::format("{} without a '{}' evaluation", to_string(r.status), key);
        break;
      }
    }
    std::replace(why.begin(), why.end(), '\n', ' ');
    out.push_back(fmt::format("{} ({}, depth {}, L = {}, seed {}): {}", r.id, r.model.empty() ? r.attention_label() : r.model,
                              r.depth, r.train_length, r.seed ? fmt::format("{}", *r.seed) : "?", why));
  }
  return out;
}

void parse_summary(const std::string& text, RunRecord& r) { parse_summary(parse_json(text), r); }

void parse_summary(const Json& json, RunRecord& r) {
  const RunSummary s = json.get<RunSummary>();
  r.message = s.message;
  if (s.task) apply_setting(r, "task.name", *s.task);
  for (const auto& [key, value] : s.task_params) apply_setting(r, "task.params." + key, value);
  if (s.model) {
    const ModelSummary& m = *s.model;
    r.attention = m.attention;
    r.layers = m.layers;
    if (m.n_layers) r.depth = *m.n_layers;
    for (const auto& [key, v] : {std::pair<const char*, std::optional<int64_t>>{"model.d_model", m.d_model},
                                 {"model.n_heads", m.n_heads}, {"model.head_dim", m.head_dim}})
      if (v) r.settings[key] = std::to_string(*v);
  }
  if (s.seed) r.seed = *s.seed;
  if (s.lr) r.lr = *s.lr;
  if (s.steps) r.steps = *s.steps;
  if (s.target_steps)  // the configured steps: studies pooled with different ones get different labels
    r.settings["train.steps"] = std::to_string(*s.target_steps);  // ("path (steps=30000)")
  if (s.config_fingerprint) r.fingerprint = *s.config_fingerprint;
  r.evals.clear();
  for (const auto& [key, e] : s.eval) r.evals.push_back(eval_result(key, e));
  if (s.status.empty()) {
    r.status = r.evals.empty() ? RunStatus::failed : RunStatus::completed;
  } else {
    bool known = true;
    r.status = parse_status(s.status, known);
    if (!known) fail("'status': unknown value '{}'", s.status);
  }
}

namespace {

// The folders of DIR that hold a study (a manifest.json), in name order: a results group such as
// results/a5_l32/, whose studies are named one by one.
std::vector<std::string> studies_below(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory(ec) && fs::exists(e.path() / "manifest.json", ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// DIR's runs and manifest information, not yet labelled (load_study, load_studies).
Study load_unlabelled(const std::string& dir, const LoadOptions& options) {
  if (!fs::is_directory(dir)) fail("no such directory '{}'", dir);
  Study study;
  study.dir = dir;
  const fs::path root(dir);
  PackedCells packed;
  for (const char* name : {kPackedCellsFile, kPackedCellsPlainFile})
    if (fs::exists(root / name)) {
      packed = read_packed_cells((root / name).string(), options.strict, study.warnings);
      break;
    }
  if (fs::exists(root / "manifest.json")) {
    read_study_manifest(study, root / "manifest.json", packed, options);
  } else if (fs::exists(root / "summary.json")) {
    RunRecord r;
    r.id = fs::weakly_canonical(root).filename().string();
    r.dir = dir;
    load_run(r, {}, options, study.warnings);
    study.runs.push_back(std::move(r));
  } else {
    scan_run_dirs(study, packed, options);
  }
  if (study.info.name.empty()) study.info.name = fs::weakly_canonical(root).filename().string();
  for (RunRecord& r : study.runs) r.study_dir = dir;
  const bool any = std::any_of(study.runs.begin(), study.runs.end(), [](const RunRecord& r) { return !is_pending(r.status); });
  if (!any) {
    const size_t unreadable = std::count_if(study.runs.begin(), study.runs.end(),
                                            [](const RunRecord& r) { return r.status == RunStatus::unreadable; });
    const std::vector<std::string> studies = study.runs.empty() ? studies_below(root) : std::vector<std::string>{};
    if (!studies.empty()) {
      std::string names = studies[0];
      for (size_t i = 1; i < studies.size(); ++i) names += ", " + studies[i];
      fail("no runs found in '{}': it holds the studies {}; name them (statebench table {}/{} ...)", dir, names, dir,
           studies[0]);
    }
    fail("no runs found in '{}'{}", dir,
         study.runs.empty() ? " (expected manifest.json, summary.json, or run directories with summary.json)"
                            : fmt::format(" ({} run director{}, none with a readable summary.json{})", study.runs.size(),
                                          study.runs.size() == 1 ? "y" : "ies",
                                          unreadable ? fmt::format("; {} unreadable", unreadable) : ""));
  }
  return study;
}

// Labels the runs and collects the eval keys (after every directory's runs are in).
void finish(Study& study) {
  label_study(study);
  for (const RunRecord& r : study.runs)
    for (const EvalResult& e : r.evals)
      if (std::find(study.eval_keys.begin(), study.eval_keys.end(), e.key) == study.eval_keys.end())
        study.eval_keys.push_back(e.key);
}

std::string threshold_text(const StudyInfo& i) { return i.threshold ? fmt::format("{}", *i.threshold) : "none"; }

}  // namespace

Study load_study(const std::string& dir, const LoadOptions& options) {
  Study study = load_unlabelled(dir, options);
  finish(study);
  return study;
}

Study load_studies(const std::vector<std::string>& dirs, const LoadOptions& options) {
  if (dirs.empty()) fail("no study directory given");
  if (dirs.size() == 1) return load_study(dirs.front(), options);
  Study all = load_unlabelled(dirs.front(), options);
  std::vector<size_t> origin(all.runs.size(), 0);  // each run's directory (index into dirs)
  std::vector<std::string> seen{fs::weakly_canonical(dirs.front()).string()};
  for (size_t i = 1; i < dirs.size(); ++i) {
    Study s = load_unlabelled(dirs[i], options);  // (fails on a missing directory)
    const std::string canonical = fs::weakly_canonical(dirs[i]).string();
    if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) fail("'{}' is given twice", dirs[i]);
    seen.push_back(canonical);
    const StudyInfo &a = all.info, &b = s.info;
    if (a.protocol != b.protocol || a.metric != b.metric || a.threshold != b.threshold)
      all.warnings.push_back(fmt::format(
          "'{}' has protocol '{}', metric '{}', threshold {}; the tables use '{}''s: '{}', '{}', {}", dirs[i],
          b.protocol, b.metric, threshold_text(b), dirs.front(), a.protocol, a.metric, threshold_text(a)));
    all.info.name += " + " + b.name;
    for (RunRecord& r : s.runs) all.runs.push_back(std::move(r)), origin.push_back(i);
    for (std::string& w : s.warnings) all.warnings.push_back(std::move(w));
  }
  finish(all);
  // One table cell and seed from two directories would count that seed twice.
  std::map<std::string, size_t> cells;  // model, depth, length, lr, seed -> index of the run
  for (size_t k = 0; k < all.runs.size(); ++k) {
    const RunRecord& r = all.runs[k];
    if (!has_result(r.status)) continue;
    const std::string seed = r.seed ? fmt::format("{}", *r.seed) : "(none)";
    const std::string key = fmt::format("{}|{}|{}|{}|{}", r.model, r.depth, r.train_length,
                                        r.lr ? fmt::format("{}", *r.lr) : "-", seed);
    const auto [it, fresh] = cells.emplace(key, k);
    const RunRecord& o = all.runs[it->second];
    if (fresh || origin[it->second] == origin[k]) continue;
    const bool same = !o.fingerprint.empty() && o.fingerprint == r.fingerprint;
    fail("{} and {} are both seed {} of {} at depth {}, L = {}{}: pooled, that seed would count twice", o.source, r.source,
         seed, r.model, r.depth, r.train_length,
         same ? " (the same config)" : " (their configs differ in what the labels do not show)");
  }
  return all;
}

}  // namespace sb::report
