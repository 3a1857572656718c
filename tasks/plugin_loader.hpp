// plugin_loader.hpp: loads task plugins (shared libraries) into a TaskRegistry through the
// versioned C entry point declared in include/statebench/plugin_abi.h.
#pragma once
#include <string>
#include <vector>

#include "tasks/registry.hpp"

namespace sb {

// The environment variable naming plugin directories (':'-separated); every *.so in them loads.
inline constexpr const char* kPluginPathEnv = "STATEBENCH_PLUGIN_PATH";

// dlopen()s `path` and registers its tasks. Throws sb::Error naming the file for a missing file,
// a missing entry symbol, an ABI version mismatch, or a task the registry refuses.
void load_plugin(TaskRegistry& registry, const std::string& path);

// Loads every plugin found through kPluginPathEnv (a missing directory is an error).
void load_plugins_from_env(TaskRegistry& registry);

// The plugin files whose tasks are in `registry` (absolute paths, sorted, each once): what a
// child process must load to know the same tasks, and what provenance records.
std::vector<std::string> loaded_plugin_files(const TaskRegistry& registry);

}  // namespace sb
