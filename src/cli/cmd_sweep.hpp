// cmd_sweep.hpp: what cmd_sweep.cpp (the command, the local launcher, --dry-run) and
// cmd_sweep_slurm.cpp (--launcher slurm, --status, --wait, the array tasks' `sweep-task`) share.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "sweep/plan.hpp"
#include "sweep/slurm.hpp"

namespace sb::cli {

struct SweepArgs {
  std::string study, out, devices = "cpu", progress = "auto", train_exe, launcher = "local";
  std::vector<std::string> set;
  int workers = 0, threads = 0;
  bool dry_run = false, keep_going = false;
  // --launcher slurm
  sweep::SlurmOptions slurm;
  int cpus_per_task = 0;  // 0: the config's train.threads (1 when that is 0)
  bool slurm_dry_run = false, wait = false, follow_up = false;
  double wait_interval = 10;
  bool status = false;
  // Options given on the command line (by name, e.g. "--partition"), for conflicts between them.
  std::vector<std::string> given;
  bool was_given(const std::string& name) const;
};

// Adds --launcher, the Slurm options, --status and --wait to `sweep`.
void add_slurm_options(CLI::App& cmd, SweepArgs& args);
// Checks option combinations before the study is read (one-line sb::Error).
void check_launcher_options(const SweepArgs& args);
// --status: each cell's state from OUT and squeue.
void print_sweep_status(const sweep::Plan& plan, const std::string& out);
// --launcher slurm: submit (or --slurm-dry-run print) the unfinished cells; with --wait, wait.
void run_slurm_sweep(Context& ctx, const SweepArgs& args, const sweep::Plan& plan, const std::string& out);
// The hidden `statebench sweep-task OUT CELL` that array tasks run.
void add_sweep_task_command(CLI::App& app, Context& ctx);

}  // namespace sb::cli
