// cli.hpp: what the statebench subcommands share, and the function each one registers with.
// Each src/cli/cmd_<name>.cpp owns one subcommand: add_<name>_command() declares its options on
// the CLI11 app and installs a callback; main.cpp wires them in.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tasks/registry.hpp"

namespace sb::cli {

struct Context {
  TaskRegistry tasks;                     // built-ins, then plugins
  std::vector<std::string> plugin_files;  // from --plugin (after STATEBENCH_PLUGIN_PATH)
  bool plugins_loaded = false;
  std::string command_line;               // argv joined, for provenance
  // Loads STATEBENCH_PLUGIN_PATH and --plugin files once; subcommands call it first.
  void load_plugins();
};

// Thrown by a subcommand that finished without a bad-input error but must exit non-zero
// (e.g. a diverged training run exits 1); main() returns the code.
struct ExitCode {
  int code;
  explicit ExitCode(int c) : code(c) {}
};

void add_tasks_command(CLI::App& app, Context& ctx);
void add_train_command(CLI::App& app, Context& ctx);
void add_generate_command(CLI::App& app, Context& ctx);
void add_bench_command(CLI::App& app, Context& ctx);
void add_sweep_command(CLI::App& app, Context& ctx);
void add_table_command(CLI::App& app, Context& ctx);
void add_eval_command(CLI::App& app, Context& ctx);
void add_export_command(CLI::App& app, Context& ctx);

// A --device value (cpu, cuda or cuda:N) as a train.device value: cuda:N makes device N current
// for this process and gives "cuda". sb::Error for a malformed value.
std::string select_device(const std::string& device);

// `statebench bench` subcommands, each in its own file, called by add_bench_command().
void add_bench_tasks(CLI::App& bench, Context& ctx);
void add_bench_train(CLI::App& bench, Context& ctx);
void add_bench_attention(CLI::App& bench, Context& ctx);  // CUDA kernels (fails without CUDA)

// Shared by subcommands that take a task: a repeatable `--param KEY=VALUE` option (one value per
// occurrence, so it never swallows a following positional argument) ...
CLI::Option* add_param_option(CLI::App& cmd, std::vector<std::string>& params);
// ... and the task built from a name and those strings. sb::Error for an unknown task, a
// malformed or unknown parameter, or a value the task rejects.
std::unique_ptr<Task> make_task(const Context& ctx, const std::string& name, const std::vector<std::string>& params);

// Left-aligned text columns two spaces apart (the last column unpadded), one line per row,
// each ending in '\n'; rows[0] is usually the header.
std::string format_table(const std::vector<std::vector<std::string>>& rows, const std::string& indent = "");

}  // namespace sb::cli
