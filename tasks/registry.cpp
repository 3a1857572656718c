// registry.cpp: the name -> task factory table.
#include "tasks/registry.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace sb {

void TaskRegistry::add(TaskInfo info) {
  if (info.name.empty()) fail("cannot register a task with an empty name (from {})", info.origin);
  if (!info.create) fail("task '{}' (from {}) has no factory", info.name, info.origin);
  const auto it = tasks_.find(info.name);
  if (it != tasks_.end())
    fail("task '{}' from {} is already registered (from {})", info.name, info.origin, it->second.origin);
  if (!info.length_param.empty() &&
      std::none_of(info.params.begin(), info.params.end(), [&](const ParamSpec& p) { return p.name == info.length_param; }))
    fail("task '{}' (from {}): its length parameter '{}' is not one of its parameters", info.name, info.origin,
         info.length_param);
  std::string key = info.name;
  tasks_.emplace(std::move(key), std::move(info));
}

bool TaskRegistry::contains(const std::string& name) const { return tasks_.count(name) > 0; }

const TaskInfo& TaskRegistry::get(const std::string& name) const {
  const auto it = tasks_.find(name);
  if (it == tasks_.end()) {
    std::string names;
    for (const auto& [n, info] : tasks_) names += (names.empty() ? "" : ", ") + n;
    fail("unknown task '{}' (known: {}); a plugin's tasks load with --plugin FILE.so (before the subcommand), "
         "STATEBENCH_PLUGIN_PATH=DIR, or a study's `plugins:` list", name, names);
  }
  return it->second;
}

std::vector<const TaskInfo*> TaskRegistry::list() const {
  std::vector<const TaskInfo*> out;
  for (const auto& [n, info] : tasks_) out.push_back(&info);
  return out;
}

std::unique_ptr<Task> TaskRegistry::create(const std::string& name,
                                           const std::map<std::string, std::string>& params) const {
  const TaskInfo& info = get(name);
  return info.create(Params("task '" + name + "'", info.params, params));
}

std::map<std::string, std::string> TaskRegistry::params_at_length(const std::string& name,
                                                                 std::map<std::string, std::string> params,
                                                                 int64_t length) const {
  const TaskInfo& info = get(name);
  if (info.length_param.empty())
    fail("task '{}' ({}) has a fixed length: it declares no length parameter, so it cannot be evaluated at "
         "length {} (a plugin names one with length_param(); docs/adding-a-task.md)",
         name, info.origin, length);
  params[info.length_param] = std::to_string(length);
  return params;
}

std::unique_ptr<Task> TaskRegistry::create_at_length(const std::string& name,
                                                     const std::map<std::string, std::string>& params,
                                                     int64_t length) const {
  return create(name, params_at_length(name, params, length));
}

}  // namespace sb
