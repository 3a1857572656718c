// cmd_sweep.cpp: `statebench sweep STUDY.yaml [--out DIR] [--devices LIST] [--workers N] ...`:
// expands a study (docs/sweeps.md) into cells, validates every cell's config and task before
// anything runs, then runs the cells as `statebench train` child processes (resumable), or with
// --dry-run prints the plan and a time estimate. Ctrl-C stops the children; rerun to resume.
// --launcher slurm and --status are in cmd_sweep_slurm.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/cmd_sweep.hpp"
#include "cli/interrupt_guard.hpp"
#include "core/error.hpp"
#include "io/progress.hpp"
#include "sweep/display.hpp"
#include "sweep/manifest.hpp"
#include "sweep/runner.hpp"
#include "tasks/plugin_loader.hpp"
#include "train/evaluation.hpp"

namespace sb::cli {

namespace {

namespace fs = std::filesystem;

constexpr int kStopAfterInitialFailures = 3;

// Builds the cell's task and every evaluation variant, as train will (task.eval[].scale resolved).
sweep::TaskShape check_task(const Context& ctx, TrainConfig& c) {
  resolve_eval_lengths(c, ctx.tasks);
  const auto task = ctx.tasks.create(c.task.name, c.task.params);
  for (const auto& e : c.task.eval) {
    if (e.length == 0) {
      task->split_index(e.split);
      continue;
    }
    try {  // at the task's own length parameter (a plugin may name it otherwise)
      ctx.tasks.create_at_length(c.task.name, c.task.params, e.length)->split_index(e.split);
    } catch (const Error& err) {
      fail("eval {{split: {}, length: {}}}: {}", e.split, e.length, err.what());
    }
  }
  return {task->seq_len(), task->vocab_size()};
}

// Rough seconds for one cell from its size (no measurement available): forward+backward FLOPs of
// the training tokens plus forward FLOPs of the evaluations, at an assumed throughput.
double rough_cell_seconds(const sweep::Cell& cell, const std::string& device, int cpu_threads) {
  const TrainConfig& c = cell.config;
  const double T = static_cast<double>(std::max<int64_t>(cell.shape.seq_len, 1));
  const double V = static_cast<double>(std::max<int64_t>(cell.shape.vocab, 2));
  const double D = static_cast<double>(c.model.d_model), H = static_cast<double>(c.model.n_heads);
  const double Dh = static_cast<double>(c.model.head_dim), hidden = static_cast<double>(c.model.mlp_hidden());
  const double mlp = c.model.mlp == MlpKind::none ? 0 : (c.model.mlp == MlpKind::swiglu ? 3 : 2) * D * hidden;
  const double per_layer = 4 * D * H * Dh + mlp + static_cast<double>(c.model.path.rank) * (D + Dh);
  const double params = static_cast<double>(c.model.n_layers) * per_layer + V * D;
  const double attention = static_cast<double>(c.model.n_layers) * 4 * T * H * Dh * 2;  // PaTH's extra work: x2
  const double per_token = 2 * params + attention;
  const double train_tokens = static_cast<double>(c.train.steps * c.train.batch_size) * T;
  const double evals = c.train.eval_every > 0 ? static_cast<double>(c.train.steps / c.train.eval_every) + 1 : 1;
  double eval_tokens = 0;  // per evaluation, each entry at its own length
  for (const auto& e : c.task.eval)
    eval_tokens += static_cast<double>(e.examples > 0 ? e.examples : c.train.eval_examples) *
                   (e.length > 0 ? static_cast<double>(e.length) : T);
  eval_tokens *= evals;
  const double flops = 3 * per_token * train_tokens + per_token * eval_tokens;
  // Rates fitted to `statebench bench train` (flip-flop reference model): ~7e10 of these FLOPs/s
  // per CPU thread (native build; 6e10 used, to err long), ~4e12 on an H100 with tf32, and small models launch-bound.
  if (device == "cpu") return flops / (6e10 * std::max(1, cpu_threads));
  const double launch_bound = static_cast<double>(c.train.steps) * 1e-3 * (1 + static_cast<double>(c.model.n_layers));
  return std::max(flops / 4e12, launch_bound);
}

void print_dry_run(const sweep::Plan& plan, const std::string& out, const std::vector<std::string>& slots, int cpu_threads) {
  const sweep::Study& s = plan.study;
  fmt::print("study {} ({}): protocol {}, {} cells\n", s.name, s.file, sweep::to_string(s.protocol), plan.cells.size());
  fmt::print("  base config: {}{}\n", sweep::base_config_path(plan, out), s.base_file.empty() ? " (inline, written at start)" : "");
  for (const auto& o : s.set) fmt::print("  set: {}\n", o);
  for (const auto& a : s.axes) {
    std::vector<std::string> labels;
    for (const auto& v : a.values) labels.push_back(v.label);
    fmt::print("  {} {}: {}\n", a.zipped ? "zip " : "grid", a.key, fmt::join(labels, " | "));
  }
  size_t first_stage = 0;  // staged protocols: the cells of every group's first stage
  for (const auto& g : plan.groups) first_stage += g.stages.front().size();
  if (s.protocol == sweep::Protocol::min_depth) {
    fmt::print("  min_depth over {} ({}), reached when best {} >= {}{}: {} groups; {}, {} to {} cells\n",
               s.min_depth.axis, fmt::join(plan.groups.front().labels, ", "), s.min_depth.metric, s.min_depth.threshold,
               s.min_depth.best_over.empty() ? "" : fmt::format(" over {}", fmt::join(s.min_depth.best_over, ", ")),
               plan.groups.size(), plan.gate_first ? "the deepest depth first, then upward if it reaches" : "depth by depth",
               first_stage, plan.cells.size());
    std::vector<std::string> per_depth;
    for (size_t d = 0; d < plan.groups.front().labels.size(); ++d) {
      size_t n = 0;
      for (const auto& g : plan.groups) n += g.stages[d].size();
      per_depth.push_back(fmt::format("{}: {}", plan.groups.front().labels[d], n));
    }
    fmt::print("  cells per depth: {}\n", fmt::join(per_depth, ", "));
  } else if (s.protocol == sweep::Protocol::max_lr) {
    if (s.max_lr.stop_at) {
      fmt::print("  max_lr: {} values in the order listed ({}), one at a time per combination; later values skipped once "
                 "the mean {} >= {:g}: {} groups, {} to {} cells\n",
                 s.max_lr.axis, fmt::join(plan.groups.front().labels, ", "), s.max_lr.metric, *s.max_lr.stop_at,
                 plan.groups.size(), first_stage, plan.cells.size());
    } else {
      fmt::print("  max_lr: every cell runs; the table takes the max of {} over {}\n", s.max_lr.metric, s.max_lr.axis);
    }
  }
  size_t cpu_slots = 0;
  for (const auto& d : slots) cpu_slots += d == "cpu";
  fmt::print("  workers: {} ({}){}\n", slots.size(), fmt::join(slots, ", "),
             cpu_slots && cpu_threads > 0 ? fmt::format(", {} thread(s) per cpu cell", cpu_threads) : "");
  fmt::print("  out: {}\n", out);

  double measured = 0;
  size_t n_measured = 0, n_done = 0, n_other = 0;
  std::vector<std::string> states;
  for (const auto& cell : plan.cells) {
    const fs::path dir = fs::path(out) / cell.dir;
    const auto r = sweep::read_cell_result((dir / "summary.json").string(), plan.metric);
    std::string state = "new";
    if (sweep::cell_run_with_other_config(cell, out)) {
      state = "run with another config: the sweep refuses to start";
      ++n_other;
    } else if (r && r->final()) {
      state = r->status + (r->metric ? fmt::format(" {}={:.4g}", plan.metric, *r->metric) : "");
      ++n_done;
      if (r->wall_seconds > 0) measured += r->wall_seconds, ++n_measured;
    } else if (r) {
      state = "failed (retried)";
    } else if (fs::exists(dir / "checkpoint.bin")) {
      state = "unfinished (resumes from its checkpoint)";
    } else if (fs::exists(dir)) {
      state = "unfinished (restarts)";
    }
    states.push_back(state);
  }
  fmt::print("cells:\n");
  for (const auto& cell : plan.cells) fmt::print("  {}  [{}]\n", cell.id, states[cell.index]);

  double total = 0, first = 0;
  for (const auto& cell : plan.cells) {
    if (states[cell.index].rfind("completed", 0) == 0 || states[cell.index].rfind("early_stopped", 0) == 0 ||
        states[cell.index].rfind("diverged", 0) == 0)
      continue;
    const double t = n_measured ? measured / static_cast<double>(n_measured) : rough_cell_seconds(cell, slots.front(), cpu_threads);
    total += t;
    if (!plan.groups.empty() && cell.value(plan.stage_axis)->label == plan.groups.front().labels.front()) first += t;
  }
  // Measured wall times were taken with the workers sharing their devices, so they divide by the
  // worker count; the rough guess assumes a whole GPU per cell (workers on one GPU share it).
  const double w = n_measured ? static_cast<double>(slots.size()) : sweep::concurrent_lanes(slots);
  const std::string basis = n_measured ? fmt::format("the mean wall time of {} finished cells", n_measured)
                                       : "a rough guess from steps x batch x T and the model size at an assumed throughput";
  fmt::print("{} of {} cells finished; estimated time for the rest: {} of work, about {} with {} workers", n_done,
             plan.cells.size(), sweep::format_seconds(total), sweep::format_seconds(total / w), slots.size());
  if (!plan.groups.empty())
    fmt::print(" (at most; the first {} alone: about {})", s.protocol == sweep::Protocol::min_depth ? "depths" : "values",
               sweep::format_seconds(first / w));
  fmt::print("\n  (an ESTIMATE from {})\n", basis);
  if (n_other > 0)
    fmt::print("{} cell(s) in '{}' were run with another config (the base config or `set` changed since): the sweep "
               "will refuse to start; use another --out, or delete those cell directories to rerun them\n",
               n_other, out);
  fmt::print("nothing was run (--dry-run)\n");
}

void run_sweep_command(Context& ctx, const SweepArgs& opt) {
  check_launcher_options(opt);
  ctx.load_plugins();
  sweep::Study study = sweep::load_study(opt.study);
  for (const auto& file : study.plugins) {  // the study's own `plugins:` (a file already loaded is kept)
    try {
      load_plugin(ctx.tasks, file);
    } catch (const Error& e) {
      fail("study '{}': plugins: {}", opt.study, e.what());
    }
  }
  for (const auto& o : opt.set) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0) fail("--set '{}': expected key.path=value", o);
    if (study.find_axis(o.substr(0, eq))) fail("--set '{}': '{}' is an axis of the study", o, o.substr(0, eq));
    study.set.push_back(o);
  }
  const std::vector<std::string> devices = sweep::parse_devices(opt.devices);
#ifndef STATEBENCH_HAVE_CUDA
  for (const auto& d : devices)
    if (d != "cpu") fail("--devices: '{}' needs the CUDA backend, which this build does not have", d);
#endif
  if (opt.workers < 0) fail("--workers {}: expected a positive number (0 = automatic)", opt.workers);
  if (opt.threads < 0) fail("--threads {}: expected a positive number (0 = automatic)", opt.threads);
  const sweep::Plan plan = sweep::make_plan(study, [&ctx](TrainConfig& c) { return check_task(ctx, c); });
  const std::string out = opt.out.empty() ? (fs::path("sweeps") / study.name).string() : opt.out;
  if (opt.status) {
    print_sweep_status(plan, out);
    return;
  }
  if (opt.launcher == "slurm") {
    run_slurm_sweep(ctx, opt, plan, out);
    return;
  }

  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool threads_in_study = study.sets_key("train.threads");
  int threads = opt.threads;
  if (threads == 0 && opt.workers == 0) threads = std::max<int>(1, static_cast<int>(plan.cells.front().config.train.threads));
  std::vector<std::string> slots = sweep::make_slots(devices, opt.workers, cores, std::max(1, threads));
  if (threads == 0) {  // --workers given: share the cores among the cpu slots
    const auto cpu = std::count(slots.begin(), slots.end(), "cpu");
    threads = std::max<int>(1, cores / static_cast<int>(std::max<long>(1, cpu)));
  }
  const int cpu_threads = threads_in_study ? 0 : threads;

  if (opt.dry_run) {
    print_dry_run(plan, out, slots, cpu_threads);
    return;
  }
  using sweep::DisplayMode;
  const DisplayMode mode = opt.progress == "live" ? DisplayMode::live
                           : opt.progress == "plain" ? DisplayMode::plain
                           : opt.progress == "quiet" ? DisplayMode::quiet
                           : is_terminal(stdout) ? DisplayMode::live : DisplayMode::plain;
  sweep::ProcessLauncher launcher(opt.train_exe.empty() ? "/proc/self/exe" : fs::absolute(opt.train_exe).string());
  sweep::SweepDisplay display(plan, out, slots.size(), mode);
  sweep::RunnerOptions ropt;
  ropt.out_dir = out;
  ropt.slots = slots;
  ropt.cpu_threads = cpu_threads;
  ropt.plugins = loaded_plugin_files(ctx.tasks);  // every cell loads what this sweep loaded
  ropt.interrupt = &InterruptGuard::flag();
  ropt.stop_after_initial_failures = opt.keep_going ? 0 : kStopAfterInitialFailures;
  sweep::SweepResult result;
  {
    InterruptGuard guard;
    result = sweep::run_sweep(plan, launcher, ropt, &display);
  }
  display.finish(result);
  if (!result.stopped_because.empty())
    fail("sweep '{}' stopped: the first {} cells it ran all failed ({}; see each cell's log.txt); fix the cause and "
         "run the same command again (--keep-going: do not stop)", study.name, kStopAfterInitialFailures, result.stopped_because);
  if (result.interrupted)
    fail("sweep '{}' interrupted: {} cells unfinished; run the same command again to resume", study.name,
         result.counts.pending + result.counts.running);
}

}  // namespace

void add_sweep_command(CLI::App& app, Context& ctx) {
  auto opt = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "run a study: train runs over a grid of configs, in parallel, resumable");
  cmd->footer(
      "A study (docs/sweeps.md) names a base train config, `set` overrides, `grid`/`zip` axes over config\n"
      "keys and a protocol (grid, min_depth, max_lr). Every cell's config is validated before anything runs.\n"
      "Cells run as `statebench train` children in OUT/cells/<id>/ (log.txt holds their output).\n"
      "Run the same command again to resume: finished cells are kept, unfinished ones resume from their\n"
      "checkpoint, failed ones are retried. Then: statebench table OUT\n"
      "On a Slurm cluster: --launcher slurm submits the unfinished cells as one job array (run the same\n"
      "command again to resubmit what is not finished); --status shows each cell's state.");
  cmd->add_option("study", opt->study, "the study file (YAML)")->required()->type_name("STUDY.yaml");
  cmd->add_option("--out,-o", opt->out, "sweep directory (default: sweeps/<study name>)")->type_name("DIR");
  cmd->add_option("--devices", opt->devices, "devices for cells, e.g. cpu or cuda:0,cuda:1 or cpu,cuda:0")->capture_default_str();
  cmd->add_option("--workers,-j", opt->workers,
                  "cells at once over all devices (0 = cores/threads for cpu plus one per GPU)")->capture_default_str();
  cmd->add_option("--threads", opt->threads,
                  "CPU threads per cpu cell (0 = the config's train.threads, or cores/workers with --workers)")->capture_default_str();
  cmd->add_option("--set", opt->set, "override a config key for every cell, KEY=VALUE (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_flag("--keep-going", opt->keep_going,
                fmt::format("do not stop when the first {} cells run all fail", kStopAfterInitialFailures));
  cmd->add_flag("--dry-run", opt->dry_run, "print the plan, the cells' states and a time estimate; run nothing");
  cmd->add_option("--progress", opt->progress, "auto (live on a terminal, else plain lines), live, plain or quiet")
      ->check(CLI::IsMember({"auto", "live", "plain", "quiet"}))
      ->capture_default_str();
  cmd->add_option("--train-exe", opt->train_exe, "the statebench binary that runs the cells (default: this one)")
      ->type_name("PATH")
      ->check(CLI::ExistingFile);
  add_slurm_options(*cmd, *opt);
  cmd->callback([&ctx, opt, cmd] {
    for (const CLI::Option* o : cmd->get_options())
      if (o->count() > 0 && !o->get_lnames().empty()) opt->given.push_back("--" + o->get_lnames().front());
    run_sweep_command(ctx, *opt);
  });
  add_sweep_task_command(app, ctx);
}

}  // namespace sb::cli
