// cmd_sweep_slurm.cpp: `statebench sweep STUDY --launcher slurm [--partition P] ... [--wait]`,
// `statebench sweep STUDY --status`, and the hidden `statebench sweep-task OUT CELL` that each array
// task runs (docs/sweeps.md, "Slurm"). The mechanisms live in src/sweep/slurm*.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "cli/cmd_sweep.hpp"
#include "cli/interrupt_guard.hpp"
#include "core/error.hpp"
#include "sweep/slurm_launch.hpp"
#include "sweep/slurm_task.hpp"
#include "tasks/plugin_loader.hpp"

namespace sb::cli {

namespace fs = std::filesystem;

bool SweepArgs::was_given(const std::string& name) const {
  return std::find(given.begin(), given.end(), name) != given.end();
}

void add_slurm_options(CLI::App& cmd, SweepArgs& a) {
  const char* group = "Slurm (--launcher slurm)";
  cmd.add_option("--launcher", a.launcher, "local: child processes on this machine; slurm: one job array per submission")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  cmd.add_option("--partition", a.slurm.partition, "the partition (default: the cluster's)")->group(group);
  cmd.add_option("--account", a.slurm.account, "the account to charge")->group(group);
  cmd.add_option("--time", a.slurm.time, "time limit per cell, as sbatch takes it (e.g. 2:00:00)")->group(group);
  cmd.add_option("--gpus-per-task", a.slurm.gpus_per_task, "GPUs per cell (> 0: cells run on cuda:0 of their GPUs)")
      ->group(group);
  cmd.add_option("--cpus-per-task", a.cpus_per_task,
                 "CPUs per cell, also its train.threads (default: the config's train.threads, else 1)")
      ->group(group);
  cmd.add_option("--mem", a.slurm.mem, "memory per cell, as sbatch takes it (e.g. 8G)")->group(group);
  cmd.add_option("--max-running", a.slurm.max_running, "cells running at once (the array's %N; 0 = no cap)")
      ->group(group);
  cmd.add_option("--sbatch-arg", a.slurm.sbatch_args, "one more sbatch option, e.g. --sbatch-arg=--qos=high (repeatable)")
      ->type_name("OPTION")
      ->allow_extra_args(false)
      ->group(group);
  cmd.add_flag("--slurm-dry-run", a.slurm_dry_run, "print the batch script(s) a submission would send; submit nothing")
      ->group(group);
  cmd.add_flag("--wait", a.wait, "after submitting, wait until the study's jobs have left the queue, then print --status")
      ->group(group);
  cmd.add_option("--wait-interval", a.wait_interval, "seconds between squeue polls with --wait")
      ->capture_default_str()
      ->group(group);
  cmd.add_flag("--slurm-follow-up", a.follow_up, "")->group("");  // the follow-up job's own submission
  cmd.add_flag("--status", a.status,
               "print each cell's state (done, running, queued, failed, ...) from OUT and squeue; run nothing");
}

void check_launcher_options(const SweepArgs& a) {
  const bool slurm = a.launcher == "slurm";
  if (a.status) {
    for (const char* o : {"--dry-run", "--slurm-dry-run", "--wait"})
      if (a.was_given(o)) fail("--status: give it without {} (it only reads the sweep directory and the queue)", o);
    return;
  }
  if (!slurm) {
    for (const char* o : {"--partition", "--account", "--time", "--gpus-per-task", "--cpus-per-task", "--mem",
                          "--max-running", "--sbatch-arg", "--slurm-dry-run", "--wait", "--wait-interval"})
      if (a.was_given(o)) fail("{} needs --launcher slurm", o);
    return;
  }
  if (a.was_given("--devices")) fail("--devices is for --launcher local; on Slurm use --gpus-per-task");
  if (a.was_given("--workers")) fail("--workers is for --launcher local; on Slurm use --max-running");
  if (a.was_given("--threads")) fail("--threads is for --launcher local; on Slurm use --cpus-per-task");
  if (a.was_given("--dry-run")) fail("--dry-run is for --launcher local; with --launcher slurm use --slurm-dry-run");
  if (a.wait && a.slurm_dry_run) fail("--wait: give it without --slurm-dry-run");
  if (!(a.wait_interval > 0 && a.wait_interval <= 3600)) fail("--wait-interval {}: expected seconds in (0, 3600]", a.wait_interval);
  if (a.cpus_per_task < 0) fail("--cpus-per-task {}: expected 1 or more", a.cpus_per_task);
#ifndef STATEBENCH_HAVE_CUDA
  if (a.slurm.gpus_per_task > 0)
    fail("--gpus-per-task {}: cells would run on the GPU, but this build has no CUDA backend", a.slurm.gpus_per_task);
#endif
  sweep::check_slurm_options(a.slurm);
}

void print_sweep_status(const sweep::Plan& plan, const std::string& out_arg) {
  const std::string out = fs::absolute(out_arg).lexically_normal().string();
  if (!fs::exists(fs::path(out) / "manifest.json"))
    fail("--status: '{}' holds no sweep yet (no manifest.json); --out names the sweep directory", out);
  const sweep::SlurmJobs jobs = sweep::read_slurm_jobs(out);
  const sweep::StudyStatus st = sweep::study_status(plan, out, jobs, false);
  sweep::refresh_manifest(plan, out, st);
  fmt::print("{}", sweep::format_status(plan, out, st));
}

namespace {

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find this statebench binary (/proc/self/exe): {}", ec.message());
  return p.string();
}

// This submission's command again, with absolute paths, for the follow-up job.
std::vector<std::string> resubmit_command(const SweepArgs& a, const std::string& exe, const std::vector<std::string>& plugins,
                                          const std::string& out) {
  std::vector<std::string> c{exe};
  for (const auto& p : plugins) c.insert(c.end(), {"--plugin", p});
  c.insert(c.end(), {"sweep", fs::absolute(a.study).lexically_normal().string(), "--out", out, "--launcher", "slurm"});
  const sweep::SlurmOptions& s = a.slurm;
  auto add = [&](const char* name, const std::string& v) {
    if (!v.empty()) c.insert(c.end(), {name, v});
  };
  add("--partition", s.partition);
  add("--account", s.account);
  add("--time", s.time);
  add("--mem", s.mem);
  if (s.gpus_per_task > 0) add("--gpus-per-task", std::to_string(s.gpus_per_task));
  if (a.cpus_per_task > 0) add("--cpus-per-task", std::to_string(a.cpus_per_task));
  if (s.max_running > 0) add("--max-running", std::to_string(s.max_running));
  for (const auto& x : s.sbatch_args) c.push_back("--sbatch-arg=" + x);
  for (const auto& x : a.set) c.insert(c.end(), {"--set", x});
  if (!a.train_exe.empty()) add("--train-exe", fs::absolute(a.train_exe).string());
  c.push_back("--slurm-follow-up");
  return c;
}

}  // namespace

void run_slurm_sweep(Context& ctx, const SweepArgs& a, const sweep::Plan& plan, const std::string& out_arg) {
  const std::string out = fs::absolute(out_arg).lexically_normal().string();
  const std::string exe = self_exe();
  const std::vector<std::string> plugins = loaded_plugin_files(ctx.tasks);
  sweep::SubmitRequest req;
  req.slurm = a.slurm;
  const int64_t config_threads = plan.cells.front().config.train.threads;
  req.slurm.cpus_per_task = a.cpus_per_task > 0 ? a.cpus_per_task : static_cast<int>(std::max<int64_t>(1, config_threads));
  req.task_command = {exe};
  for (const auto& p : plugins) req.task_command.insert(req.task_command.end(), {"--plugin", p});
  req.task_command.insert(req.task_command.end(), {"sweep-task", out});
  req.task_args = {"--device", a.slurm.gpus_per_task > 0 ? "cuda:0" : "cpu"};
  if (a.slurm.gpus_per_task == 0 && !plan.study.sets_key("train.threads"))
    req.task_args.insert(req.task_args.end(), {"--threads", std::to_string(req.slurm.cpus_per_task)});
  if (!a.train_exe.empty()) req.task_args.insert(req.task_args.end(), {"--train-exe", fs::absolute(a.train_exe).string()});
  req.resubmit = resubmit_command(a, exe, plugins, out);
  req.workdir = fs::current_path().string();
  req.follow_up = a.follow_up;

  if (a.slurm_dry_run) {
    fmt::print("{}", sweep::dry_run_scripts(plan, out, req));
    fmt::print("nothing was submitted (--slurm-dry-run)\n");
    return;
  }
  const sweep::SubmitResult r = sweep::submit_study(plan, out, req);
  fmt::print("study {} in {}: {}\n", plan.study.name, out, sweep::status_counts(r.status));
  if (!r.job_id.empty()) {
    fmt::print("submitted job array {}: {} cell{} ({}{}); Slurm logs: {}\n", r.job_id, r.cells.size(),
               r.cells.size() == 1 ? "" : "s",
               r.cells.size() == 1 ? "array task 0" : fmt::format("array tasks 0-{}", r.cells.size() - 1),
               a.slurm.max_running > 0 ? fmt::format(", at most {} at once", a.slurm.max_running) : "",
               (fs::path(sweep::slurm_dir(out)) / "logs" / (r.job_id + "_<task>.out")).string());
    if (!r.follow_up_job.empty())
      fmt::print("follow-up job {} submits the cells the protocol needs next once job {} has ended\n", r.follow_up_job,
                 r.job_id);
  } else if (r.status.complete) {
    fmt::print("nothing to submit: every cell is done or skipped; make the table: statebench table {}\n", out);
  } else if (!r.status.active_jobs.empty()) {
    fmt::print("nothing to submit: the cells not done are queued or running (jobs {})\n",
               fmt::join(r.status.active_jobs, ", "));
  } else {
    fmt::print("nothing to submit now: the cells not done failed before (see --status); run the sweep by hand to "
               "resubmit them\n");
  }
  if (!a.wait) {
    if (!r.job_id.empty()) fmt::print("follow it: statebench sweep {} --out {} --status\n", a.study, out);
    return;
  }
  std::string last;
  for (int unanswered = 0;;) {
    const sweep::StudyStatus st = sweep::study_status(plan, out, sweep::read_slurm_jobs(out), false);
    unanswered = st.queue.known ? 0 : unanswered + 1;
    if (unanswered >= 10) fail("--wait: {} (10 times in a row); the jobs may still run: see --status later", st.queue.problem);
    const std::string line = sweep::status_counts(st);
    if (line != last) fmt::print("{}\n", line), std::fflush(stdout);
    last = line;
    if (st.active_jobs.empty() && st.queue.known) {
      sweep::refresh_manifest(plan, out, st);
      fmt::print("{}", sweep::format_status(plan, out, st));
      if (!st.complete) throw ExitCode(1);
      return;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(a.wait_interval));
  }
}

// ---- sweep-task -----------------------------------------------------------------------------------

namespace {

struct TaskArgs {
  std::string out, cell, device = "cpu", train_exe;
  int threads = 0;
};

}  // namespace

void add_sweep_task_command(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<TaskArgs>();
  CLI::App* cmd = app.add_subcommand("sweep-task", "run one cell of a Slurm sweep (what its array tasks run)");
  cmd->group("");  // internal: written into the batch scripts by `sweep --launcher slurm`
  cmd->add_option("out", a->out, "the sweep directory")->required();
  cmd->add_option("cell", a->cell, "the cell id")->required();
  cmd->add_option("--device", a->device, "cpu or cuda:N");
  cmd->add_option("--threads", a->threads, "train.threads for cpu cells (0: the config's)");
  cmd->add_option("--train-exe", a->train_exe, "the binary that runs `train` (default: this one)");
  cmd->callback([&ctx, a] {
    sweep::CellTaskOptions o;
    o.out_dir = a->out;
    o.cell_id = a->cell;
    for (const auto& p : ctx.plugin_files) o.plugins.push_back(fs::absolute(p).lexically_normal().string());
    if (!a->train_exe.empty()) o.train_exe = a->train_exe;
    o.device = a->device;
    o.cpu_threads = a->threads;
    o.stop = &InterruptGuard::flag();
    int code = 0;
    {
      InterruptGuard guard;  // Slurm's SIGTERM (scancel, the time limit, preemption): stop the cell
      code = sweep::run_cell_task(o);
    }
    if (code != 0) throw ExitCode(code);
  });
}

}  // namespace sb::cli
