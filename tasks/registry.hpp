// registry.hpp: tasks created by name. Built-ins are added by register_builtin_tasks() (one
// explicit function, tasks/builtin.cpp); plugins add theirs through tasks/plugin_loader.cpp.
// Unknown task names and unknown parameters are sb::Error. Evaluation at other lengths goes
// through create_at_length(), which sets the task's declared length parameter.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "tasks/task.hpp"

namespace sb {

struct TaskInfo {
  std::string name;
  std::string summary;                 // one line for `statebench tasks`
  std::vector<ParamSpec> params;       // declared parameters with defaults and help
  std::function<std::unique_ptr<Task>(const Params&)> create;
  std::string origin = "built-in";     // or the plugin file it came from
  // The parameter whose value sets the sequence length: evaluation at length L creates the task
  // with it set to L. "" = a fixed length (no evaluation at other lengths). Must be in params.
  // Every built-in task names "length"; plugins name theirs (plugin_abi.h).
  std::string length_param = "";
};

class TaskRegistry {
 public:
  void add(TaskInfo info);  // throws on a duplicate name
  bool contains(const std::string& name) const;
  const TaskInfo& get(const std::string& name) const;  // throws, listing the known tasks
  std::vector<const TaskInfo*> list() const;           // sorted by name
  std::unique_ptr<Task> create(const std::string& name, const std::map<std::string, std::string>& params) const;
  // `params` with the task's length parameter set to `length`. Throws sb::Error naming the task
  // when it has a fixed length (no length parameter).
  std::map<std::string, std::string> params_at_length(const std::string& name, std::map<std::string, std::string> params,
                                                      int64_t length) const;
  // create(name, params_at_length(name, params, length)).
  std::unique_ptr<Task> create_at_length(const std::string& name, const std::map<std::string, std::string>& params,
                                         int64_t length) const;

 private:
  std::map<std::string, TaskInfo> tasks_;
};

// Adds every built-in task. The single place a new built-in task is wired in.
void register_builtin_tasks(TaskRegistry& registry);

}  // namespace sb
