// plan.cpp: study -> cells (Cartesian expansion, stable ids, config validation with errors that
// name the axis and value), summary.json reading, and the protocol scheduler (see plan.hpp).
#include "sweep/plan.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "train/run_summary.hpp"

namespace sb::sweep {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxLabelChars = 24;
constexpr size_t kMaxSlugChars = 96;

// FNV-1a with a final avalanche (MurmurHash3's fmix64), so ids of similar cells look different.
uint64_t text_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// Letters, digits and ._+- kept; every other run of characters becomes one '_'.
std::string safe_label(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-') out += static_cast<char>(c);
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.size() > kMaxLabelChars) out.resize(kMaxLabelChars);
  return out.empty() ? "_" : out;
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) parts.push_back(key.substr(start, dot - start));
  parts.push_back(key.substr(start));
  return parts;
}

// The shortest dotted suffix of each key that no other key shares ("n_layers", "params.length").
std::vector<std::string> short_names(const std::vector<std::string>& keys) {
  std::vector<std::string> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto parts = split_key(keys[i]);
    for (size_t k = 1; k <= parts.size(); ++k) {
      std::string suffix;
      for (size_t p = parts.size() - k; p < parts.size(); ++p) suffix += (suffix.empty() ? "" : ".") + parts[p];
      bool unique = true;
      for (size_t j = 0; j < keys.size() && unique; ++j)
        if (j != i && (keys[j] == suffix || (keys[j].size() > suffix.size() &&
                                             keys[j].compare(keys[j].size() - suffix.size(), suffix.size(), suffix) == 0 &&
                                             keys[j][keys[j].size() - suffix.size() - 1] == '.')))
          unique = false;
      out[i] = suffix;
      if (unique) break;
    }
  }
  return out;
}

std::string slug(const std::vector<CellAxis>& axes) {
  std::vector<std::string> keys;
  for (const auto& a : axes) keys.push_back(a.key);
  const auto names = short_names(keys);
  std::string s;
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + names[i] + "=" + safe_label(axes[i].value.label);
  return s;
}

std::string task_key(const TrainConfig& c) {
  std::string k = c.task.name;
  for (const auto& [p, v] : c.task.params) k += "\n" + p + "=" + v;
  for (const auto& e : c.task.eval) k += fmt::format("\n@{}:{}x{}", e.split, e.length, e.scale);
  return k;
}

double depth_value(const std::string& label) { return std::strtod(label.c_str(), nullptr); }

// Groups the cells by every axis except `axis` and `together`; each group's stages are the
// `axis` values in the order of `labels`.
void make_stages(Plan& plan, const std::string& axis, const std::vector<std::string>& labels,
                 const std::vector<std::string>& together) {
  plan.stage_axis = axis;
  std::map<std::string, size_t> group_index;
  for (auto& cell : plan.cells) {
    std::vector<CellAxis> rest;
    for (const auto& a : cell.axes)
      if (a.key != axis && std::find(together.begin(), together.end(), a.key) == together.end()) rest.push_back(a);
    cell.group = rest.empty() ? "all" : slug(rest);
    auto [it, added] = group_index.emplace(cell.group, plan.groups.size());
    if (added) plan.groups.push_back({cell.group, labels, std::vector<std::vector<size_t>>(labels.size())});
    const std::string& v = cell.value(axis)->label;
    const size_t stage = std::find(labels.begin(), labels.end(), v) - labels.begin();
    plan.groups[it->second].stages[stage].push_back(cell.index);
  }
}

// The eval keys a config produces: SPLIT, or SPLIT@LENGTH for another length.
std::vector<std::string> eval_keys(const TrainConfig& c) {
  std::vector<std::string> out;
  for (const auto& e : c.task.eval) out.push_back(eval_key(e));
  return out;
}

// See make_plan's comment: the protocol's metric is evaluated by every cell, and no cell stops
// training (train.target_accuracy) before the protocol's threshold can be reached.
void check_protocol_metric(Plan& plan) {
  const Study& s = plan.study;
  if (s.protocol == Protocol::grid) return;
  const bool min_depth = s.protocol == Protocol::min_depth;
  const std::string where = min_depth ? "min_depth" : "max_lr";
  const ProtocolMetric m = parse_protocol_metric(plan.metric);
  plan.higher_is_better = m.higher_is_better;
  const std::optional<double> threshold = min_depth ? std::optional(s.min_depth.threshold) : s.max_lr.stop_at;
  for (const Cell& cell : plan.cells) {
    const std::vector<std::string> keys = eval_keys(cell.config);
    if (std::find(keys.begin(), keys.end(), m.key) == keys.end()) {
      std::string list;
      for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
      fail("study '{}': {}.metric '{}': cell '{}' has no eval key '{}' (its task.eval gives: {})", s.file, where,
           plan.metric, cell.label(), m.key, list);
    }
    const TrainSettings& t = cell.config.train;
    if (!threshold || !m.higher_is_better || t.target_accuracy == 0) continue;
    const auto& read = t.target_eval;  // the entries the stop reads (empty: every one)
    if (!read.empty() && std::find(read.begin(), read.end(), m.key) == read.end())
      fail("study '{}': cell '{}': train.target_eval does not list '{}', so train.target_accuracy {} can end training "
           "before {} {} reaches {}; add '{}' to train.target_eval, or set train.target_accuracy: 0 (no early stop)",
           s.file, cell.label(), m.key, t.target_accuracy, where, plan.metric, *threshold, m.key);
    // A stop when every eval entry's stop metric >= target leaves the protocol's metric >= threshold
    // when it is the same accuracy with target >= threshold, or at target 1 (every token of every
    // sequence right, whichever accuracy is counted).
    const std::string stop = to_string(t.target_metric);
    if ((stop == m.field && t.target_accuracy >= *threshold) || t.target_accuracy >= 1) continue;
    fail("study '{}': cell '{}': train.target_accuracy {} on {} ends training before {} {} reaches {} ({}); set "
         "train.target_metric: {} and train.target_accuracy >= {}, or train.target_accuracy: 0 (no early stop)",
         s.file, cell.label(), t.target_accuracy, stop, where, plan.metric, *threshold,
         min_depth ? "min_depth.threshold" : "max_lr.stop_at", m.field, *threshold);
  }
}

}  // namespace

std::vector<std::string> Cell::overrides() const {
  std::vector<std::string> out;
  for (const auto& a : axes) out.push_back(a.key + "=" + a.value.text);
  return out;
}

const AxisValue* Cell::value(const std::string& key) const {
  for (const auto& a : axes)
    if (a.key == key) return &a.value;
  return nullptr;
}

std::string Cell::label() const {
  std::vector<std::string> keys;
  for (const auto& a : axes) keys.push_back(a.key);
  const auto names = short_names(keys);
  std::string s;
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + names[i] + "=" + axes[i].value.label;
  return s;
}

std::string cell_id(const std::vector<CellAxis>& axes) {
  std::vector<std::string> sorted;
  for (const auto& a : axes) sorted.push_back(a.key + "=" + a.value.text);
  std::sort(sorted.begin(), sorted.end());
  std::string joined;
  for (const auto& s : sorted) joined += s + "\n";
  std::string readable = slug(axes);
  if (readable.size() > kMaxSlugChars) readable.resize(kMaxSlugChars);
  return fmt::format("{}-{:08x}", readable, static_cast<uint32_t>(text_hash(joined) >> 32));
}

Plan make_plan(const Study& study, const TaskCheck& check) {
  Plan plan;
  plan.study = study;
  plan.metric = study.protocol == Protocol::min_depth ? study.min_depth.metric
                : study.protocol == Protocol::max_lr  ? study.max_lr.metric
                                                      : "val.token_accuracy";
  std::vector<size_t> grid_axes, zip_axes;
  for (size_t a = 0; a < study.axes.size(); ++a) (study.axes[a].zipped ? zip_axes : grid_axes).push_back(a);
  const size_t zip_n = std::max<size_t>(1, study.zip_length());
  const std::string origin = study.base_file.empty() ? study.file + " (inline config)" : study.base_file;

  std::map<std::string, std::pair<TaskShape, std::vector<EvalSplitConfig>>> task_cache;  // with resolved task.eval
  std::vector<size_t> odometer(grid_axes.size(), 0);
  std::set<std::string> ids;
  for (bool more = true; more;) {
    for (size_t z = 0; z < zip_n; ++z) {
      Cell cell;
      cell.index = plan.cells.size();
      for (size_t a = 0; a < study.axes.size(); ++a) {
        const Axis& axis = study.axes[a];
        size_t v = z;
        if (!axis.zipped) v = odometer[std::find(grid_axes.begin(), grid_axes.end(), a) - grid_axes.begin()];
        cell.axes.push_back({axis.key, axis.values[v]});
      }
      std::vector<std::string> overrides = study.set;
      for (const auto& o : cell.overrides()) overrides.push_back(o);
      try {
        cell.config = parse_config(study.base_yaml, overrides, origin);
      } catch (const Error& e) {
        const std::string msg = e.what();
        for (const auto& a : cell.axes)
          if (msg.find("'" + a.key + "=" + a.value.text + "'") != std::string::npos)
            fail("study '{}': {} '{}' value '{}': {}", study.file, study.find_axis(a.key)->zipped ? "zip" : "grid", a.key,
                 a.value.label, msg);
        for (const auto& s : study.set)
          if (msg.find("'" + s + "'") != std::string::npos) fail("study '{}': set '{}': {}", study.file, s, msg);
        fail("study '{}': cell '{}': {}", study.file, cell.label(), msg);
      }
      if (check) {
        const std::string key = task_key(cell.config);
        auto it = task_cache.find(key);
        if (it == task_cache.end()) {
          try {
            const TaskShape shape = check(cell.config);
            it = task_cache.emplace(key, std::pair{shape, cell.config.task.eval}).first;
          } catch (const Error& e) {
            std::vector<const CellAxis*> task_axes;
            for (const auto& a : cell.axes)
              if (a.key.rfind("task.", 0) == 0) task_axes.push_back(&a);
            if (task_axes.size() == 1)
              fail("study '{}': {} '{}' value '{}': task '{}': {}", study.file, study.find_axis(task_axes[0]->key)->zipped ? "zip" : "grid",
                   task_axes[0]->key, task_axes[0]->value.label, cell.config.task.name, e.what());
            fail("study '{}': cell '{}': task '{}': {}", study.file, cell.label(), cell.config.task.name, e.what());
          }
        }
        cell.shape = it->second.first;
        cell.config.task.eval = it->second.second;
        try {
          check_target_eval(cell.config);
        } catch (const Error& e) {
          fail("study '{}': cell '{}': {}", study.file, cell.label(), e.what());
        }
      }
      cell.id = cell_id(cell.axes);
      if (!ids.insert(cell.id).second) fail("study '{}': two cells have the id '{}'", study.file, cell.id);
      cell.dir = "cells/" + cell.id;
      plan.cells.push_back(std::move(cell));
    }
    more = false;  // advance the odometer, last grid axis fastest
    for (size_t g = grid_axes.size(); g-- > 0;) {
      if (++odometer[g] < study.axes[grid_axes[g]].values.size()) {
        more = true;
        break;
      }
      odometer[g] = 0;
    }
  }

  check_protocol_metric(plan);
  if (study.protocol == Protocol::min_depth) {
    const MinDepthOptions& o = study.min_depth;
    std::vector<std::string> depths;
    for (const auto& v : study.find_axis(o.axis)->values) depths.push_back(v.label);
    std::stable_sort(depths.begin(), depths.end(),
                     [](const std::string& a, const std::string& b) { return depth_value(a) < depth_value(b); });
    plan.gate_first = o.deepest_first && depths.size() > 1;
    if (plan.gate_first) std::rotate(depths.rbegin(), depths.rbegin() + 1, depths.rend());  // deepest first
    make_stages(plan, o.axis, depths, o.best_over);
    plan.threshold = o.threshold;
  } else if (study.protocol == Protocol::max_lr && study.max_lr.stop_at) {
    std::vector<std::string> lrs;
    for (const auto& v : study.find_axis(study.max_lr.axis)->values) lrs.push_back(v.label);
    std::vector<std::string> together;
    if (study.find_axis("train.seed")) together.push_back("train.seed");
    make_stages(plan, study.max_lr.axis, lrs, together);
    plan.threshold = *study.max_lr.stop_at;
    plan.stage_mean = true;
  }
  return plan;
}

// ---- results ----------------------------------------------------------------------------------

std::optional<CellResult> read_cell_result(const std::string& summary_path, const std::string& metric) {
  std::error_code ec;
  if (!fs::exists(summary_path, ec)) return std::nullopt;
  CellResult r;
  try {
    const RunSummary s = read_run_summary(summary_path);
    r.status = s.status;
    r.message = s.message;
    if (s.wall_seconds && !std::isnan(*s.wall_seconds)) r.wall_seconds = *s.wall_seconds;
    const auto dot = metric.rfind('.');
    if (dot != std::string::npos)
      if (const EvalSummary* e = s.find_eval(metric.substr(0, dot))) r.metric = e->number(metric.substr(dot + 1));
  } catch (const Error& e) {
    return CellResult{"failed", std::nullopt, 0, fmt::format("unreadable summary.json: {}", e.what())};
  }
  if (r.status != "completed" && r.status != "early_stopped" && r.status != "diverged" && r.status != "failed") {
    r.message = fmt::format("summary.json has unknown status '{}'", r.status);
    r.status = "failed";
  }
  return r;
}

// ---- scheduler --------------------------------------------------------------------------------

const char* to_string(CellState s) {
  switch (s) {
    case CellState::pending: return "pending";
    case CellState::running: return "running";
    case CellState::finished: return "finished";
    case CellState::skipped: return "skipped";
  }
  return "?";
}

Scheduler::Scheduler(const Plan& plan)
    : plan_(plan), state_(plan.cells.size(), CellState::pending), result_(plan.cells.size()),
      group_of_(plan.cells.size(), 0), groups_(plan.groups.size()) {
  for (size_t g = 0; g < plan.groups.size(); ++g)
    for (const auto& stage : plan.groups[g].stages)
      for (const size_t c : stage) group_of_[c] = g;
}

std::vector<size_t> Scheduler::runnable() const {
  std::vector<size_t> out;
  if (plan_.groups.empty()) {
    for (size_t c = 0; c < state_.size(); ++c)
      if (state_[c] == CellState::pending) out.push_back(c);
    return out;
  }
  // Breadth first: every group's first stage before any group's second, so a stopped sweep
  // leaves the fewest groups without any result (and the cheap stages run first).
  std::vector<std::pair<size_t, size_t>> by_stage;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].decided) continue;
    for (const size_t c : plan_.groups[g].stages[groups_[g].stage])
      if (state_[c] == CellState::pending) by_stage.emplace_back(groups_[g].stage, c);
  }
  std::sort(by_stage.begin(), by_stage.end());
  for (const auto& [stage, c] : by_stage) out.push_back(c);
  return out;
}

void Scheduler::start(size_t cell) {
  if (state_.at(cell) != CellState::pending) fail("scheduler: cell {} started while {}", cell, to_string(state_[cell]));
  state_[cell] = CellState::running;
}

void Scheduler::abandon(size_t cell) {
  if (state_.at(cell) == CellState::running) state_[cell] = CellState::pending;
}

void Scheduler::restore(size_t cell, const CellResult& result) {
  if (state_.at(cell) != CellState::pending) fail("scheduler: cell {} restored while {}", cell, to_string(state_[cell]));
  state_[cell] = CellState::finished;
  result_[cell] = result;
}

std::vector<size_t> Scheduler::settle() {
  std::vector<size_t> skipped;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const size_t c : advance(g)) skipped.push_back(c);
  return skipped;
}

std::vector<size_t> Scheduler::finish(size_t cell, const CellResult& result) {
  if (state_.at(cell) == CellState::finished || state_[cell] == CellState::skipped)
    fail("scheduler: cell {} finished twice", cell);
  state_[cell] = CellState::finished;
  result_[cell] = result;
  if (plan_.groups.empty()) return {};
  return advance(group_of_[cell]);
}

// Evaluates the group's current stage while all of its cells have results: a stage whose best
// (min_depth) or mean (max_lr) metric reaches the threshold decides the group (the pending cells
// of later stages are skipped); otherwise the next stage becomes current. With gate_first, stage 0
// (the deepest depth) decides only by not reaching, and answers when no later stage reaches.
std::vector<size_t> Scheduler::advance(size_t g) {
  std::vector<size_t> skipped;
  GroupStatus& gs = groups_[g];
  const auto& stages = plan_.groups[g].stages;
  while (!gs.decided) {
    const bool higher = plan_.higher_is_better;
    std::optional<double> best;  // over the stage's cells with a metric
    double sum = 0;
    size_t n = 0;
    for (const size_t c : stages[gs.stage]) {
      if (state_[c] != CellState::finished) return skipped;
      const auto& m = result_[c]->metric;
      if (m) sum += *m, ++n;
      if (m && (!best || (higher ? *m > *best : *m < *best))) best = m;
    }
    const std::optional<double> score = !plan_.stage_mean ? best : n ? std::optional(sum / static_cast<double>(n)) : std::nullopt;
    const bool reaches = score && (higher ? *score >= plan_.threshold : *score <= plan_.threshold);
    const bool gate = plan_.gate_first && gs.stage == 0;
    if (reaches != gate || gs.stage + 1 == stages.size()) {  // decided: skip the later stages
      gs.decided = true;
      if (reaches) gs.reached = gs.stage;
      else if (plan_.gate_first && !gate) gs.reached = 0;  // only the deepest depth reached
      for (size_t s = gs.stage + 1; s < stages.size(); ++s)
        for (const size_t c : stages[s])
          if (state_[c] == CellState::pending) {
            state_[c] = CellState::skipped;
            skipped.push_back(c);
          }
    } else {
      ++gs.stage;
    }
  }
  return skipped;
}

bool Scheduler::done() const { return count(CellState::pending) == 0 && count(CellState::running) == 0; }

size_t Scheduler::count(CellState s) const { return static_cast<size_t>(std::count(state_.begin(), state_.end(), s)); }

}  // namespace sb::sweep
