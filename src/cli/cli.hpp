// cli.hpp: what the statebench subcommands share, and the function each one registers with.
// Each src/cli/cmd_<name>.cpp owns one subcommand: add_<name>_command() declares its options on
// the CLI11 app and installs a callback; main.cpp wires them in.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tasks/registry.hpp"

namespace sb::cli {

struct Context {
  TaskRegistry tasks;                     // built-ins, then plugins
  std::vector<std::string> plugin_files;  // from --plugin (after STATEBENCH_PLUGIN_PATH)
  bool plugins_loaded = false;
  // Loads STATEBENCH_PLUGIN_PATH and --plugin files once; subcommands call it first.
  void load_plugins();
};

void add_tasks_command(CLI::App& app, Context& ctx);
void add_generate_command(CLI::App& app, Context& ctx);
void add_bench_command(CLI::App& app, Context& ctx);

}  // namespace sb::cli
