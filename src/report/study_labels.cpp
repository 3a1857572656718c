// study_labels.cpp: how a loaded study's runs are named (study_labels.hpp): fields every run agrees
// on, settings a run without results lacks, settings bound to the train length (shown with L) and
// the model labels ("path (d_model=128)").
#include "report/study_labels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace sb::report {
namespace {

// Pending runs know only their overrides: fill unknown fields that every other run agrees on
// (attention, depth, train length, learning rate).
void fill_common_fields(Study& study) {
  std::set<std::string> attentions;
  std::set<int64_t> depths, lengths;
  std::set<double> lrs;
  for (const RunRecord& r : study.runs) {
    if (r.lr) lrs.insert(*r.lr);
    if (!r.attention.empty()) attentions.insert(r.attention_label());
    if (r.depth > 0) depths.insert(r.depth);
    if (r.train_length > 0) lengths.insert(r.train_length);
  }
  for (RunRecord& r : study.runs) {
    if (r.attention.empty() && attentions.size() == 1) r.attention = *attentions.begin();
    if (r.depth == 0 && depths.size() == 1) r.depth = *depths.begin();
    if (r.train_length == 0 && lengths.size() == 1) r.train_length = *lengths.begin();
    if (!r.lr && lrs.size() == 1) r.lr = *lrs.begin();
  }
}

// Study::length_keys: the settings (of those taking >= 2 values) that have one value per train
// length. A run without the setting counts as a value of its own; a run of unknown length that has
// the setting rules it out (nothing says which column it belongs to).
void find_length_keys(Study& study, const std::map<std::string, std::set<std::string>>& values) {
  for (const auto& [key, vs] : values) {
    if (vs.size() < 2) continue;
    std::map<int64_t, std::optional<std::string>> at;
    bool tied = true;
    for (const RunRecord& r : study.runs) {
      const auto it = r.settings.find(key);
      const std::optional<std::string> v = it == r.settings.end() ? std::nullopt : std::optional(it->second);
      const auto [pos, fresh] = at.emplace(r.train_length, v);
      if ((r.train_length <= 0 && v) || (!fresh && pos->second != v)) {
        tied = false;
        break;
      }
    }
    if (!tied) continue;
    study.length_keys.push_back(key);
    for (const auto& [length, v] : at)
      if (v) study.length_settings[length][key] = *v;
  }
}

// A run without results (skipped by a staged protocol, missing) knows only its manifest overrides,
// a finished run also the settings its summary derives (head_dim from d_model). Each such key is
// copied into the pending run from the finished runs of the same attention, depth and length whose
// settings agree with all of the pending run's, when they agree on its value: otherwise
// "path (d_model=64)" and "path (d_model=64, head_dim=16)" would be two models.
void complete_pending_settings(Study& study) {
  const auto no_summary = [](RunStatus s) { return is_pending(s) || s == RunStatus::skipped; };
  for (RunRecord& p : study.runs) {
    if (!no_summary(p.status)) continue;
    std::map<std::string, std::set<std::string>> found;
    for (const RunRecord& r : study.runs) {
      if (no_summary(r.status) || r.attention != p.attention || r.depth != p.depth || r.train_length != p.train_length)
        continue;
      const bool agrees = std::all_of(p.settings.begin(), p.settings.end(), [&](const auto& kv) {
        const auto it = r.settings.find(kv.first);
        return it != r.settings.end() && it->second == kv.second;
      });
      if (!agrees) continue;
      for (const auto& [k, v] : r.settings)
        if (!p.settings.count(k)) found[k].insert(v);
    }
    for (const auto& [k, vs] : found)
      if (vs.size() == 1) p.settings[k] = *vs.begin();
  }
}

// Model label: attention label, plus the settings that differ between runs ("path (d_model=128)"),
// except those that go with the train length (find_length_keys).
void label_models(Study& study) {
  std::map<std::string, std::set<std::string>> values;
  for (const RunRecord& r : study.runs)
    for (const auto& [k, v] : r.settings) values[k].insert(v);
  find_length_keys(study, values);
  for (RunRecord& r : study.runs) {
    std::string extra;
    for (const auto& [k, v] : r.settings) {
      if (values[k].size() < 2) continue;
      if (std::find(study.length_keys.begin(), study.length_keys.end(), k) != study.length_keys.end()) continue;
      extra += fmt::format("{}{}={}", extra.empty() ? "" : ", ", setting_name(k), v);
    }
    r.model = r.attention_label() + (extra.empty() ? "" : " (" + extra + ")");
    if (std::find(study.models.begin(), study.models.end(), r.model) == study.models.end()) study.models.push_back(r.model);
  }
}

}  // namespace

void label_study(Study& study) {
  fill_common_fields(study);
  complete_pending_settings(study);
  label_models(study);
}

}  // namespace sb::report
