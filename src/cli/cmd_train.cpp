// cmd_train.cpp: `statebench train CONFIG.yaml [--set a.b=c]... [--out DIR] [--device cpu]
// [--threads N] [--resume] [--dry-run]`: one training run into a run directory (docs/run-format.md).
// SIGINT / SIGTERM stop it after the step in progress, checkpoint written (exit 2, resumable). The
// hidden `--stop-after` is a testing aid: it ends the process as kill -9 would, at one boundary
// between the run's writes.
#include <cstdio>

#include "cli/cli.hpp"
#include "cli/interrupt_guard.hpp"
#include "core/error.hpp"
#include "model/transformer.hpp"
#include "sweep/slurm.hpp"
#include "tasks/plugin_loader.hpp"
#include "train/engine.hpp"
#include "train/evaluation.hpp"
#include "train/trainer.hpp"

namespace sb::cli {

namespace {
struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out, device, stop_after;
  int64_t threads = -1;
  bool resume = false, dry_run = false, quiet = false;
};

// "metrics:S", "checkpoint:S" or "summary".
StopPoint parse_stop_point(const std::string& text) {
  StopPoint p;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon), step = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "summary" && colon == std::string::npos) return {StopPoint::summary, 0};
  p.kind = kind == "metrics" ? StopPoint::metrics : kind == "checkpoint" ? StopPoint::checkpoint : StopPoint::none;
  if (p.kind == StopPoint::none || step.empty() || step.size() > 12 ||
      step.find_first_not_of("0123456789") != std::string::npos)
    fail("--stop-after '{}': expected metrics:STEP, checkpoint:STEP or summary", text);
  p.step = std::stoll(step);
  return p;
}

void run_train(Context& ctx, const TrainArgs& a) {
  ctx.load_plugins();
  std::vector<std::string> overrides = a.sets;
  if (!a.device.empty()) overrides.push_back("train.device=" + select_device(a.device));
  if (a.threads >= 0) overrides.push_back("train.threads=" + std::to_string(a.threads));
  if (!a.out.empty()) overrides.push_back("out_dir=" + a.out);
  std::vector<std::string> notes;
  TrainConfig cfg = load_config(a.config, overrides, &notes);
  resolve_eval_lengths(cfg, ctx.tasks);  // task.eval[].scale: needs the task's length
  for (const auto& note : notes) fmt::print(stderr, "statebench: note: {}\n", note);
  const StopPoint stop = a.stop_after.empty() ? StopPoint{} : parse_stop_point(a.stop_after);
  if (a.dry_run) {
    // The memory check comes first: the model below allocates its parameters.
    const MemoryEstimate memory = estimate_run_memory(cfg, ctx.tasks);
    const auto available = available_memory();
    check_memory(memory, available);
    const auto task = ctx.tasks.create(cfg.task.name, cfg.task.params);
    const Transformer<float> model(resolve_max_len(cfg.model, task->seq_len()), task->vocab_size());
    std::fputs(to_yaml(cfg).c_str(), stdout);
    fmt::print("# task {}: T={} V={}; model: {} parameters in {} tensors\n", cfg.task.name, task->seq_len(),
               task->vocab_size(), model.params().num_params(), model.params().views().size());
    fmt::print("# memory: about {} (available: {})\n", format_bytes(memory.total),
               available ? format_bytes(*available) : "unknown");
    return;
  }
  TrainOptions opt;
  opt.out_dir = cfg.out_dir;
  opt.resume = a.resume;
  opt.command = ctx.command_line;
  opt.plugins = loaded_plugin_files(ctx.tasks);
  opt.slurm = sweep::current_slurm_job();
  opt.progress = !a.quiet;
  opt.stop_after = stop;
  opt.interrupt = &InterruptGuard::flag();
  TrainOutcome r;
  {
    InterruptGuard guard;  // Ctrl-C / SIGTERM: stop after the step in progress, its checkpoint written
    r = train(cfg, ctx.tasks, opt);
  }
  if (r.status == "interrupted")
    fail("interrupted after step {}: its checkpoint is in '{}'; run the same command with --resume to go on", r.steps,
         opt.out_dir);
  if (r.status == "already_finished") {
    fmt::print("{}: already finished (summary.json exists); nothing to do\n", opt.out_dir);
    return;
  }
  fmt::print("{}: {} after {} steps; results in {}/summary.json\n", cfg.task.name, r.status, r.steps, opt.out_dir);
  if (r.exit_code != 0) throw ExitCode(r.exit_code);
}
}  // namespace

std::string select_device(const std::string& device) {
  // cpu, cuda, or cuda:N (device N of the visible ones; sweeps give each worker its own).
  if (device.rfind("cuda:", 0) != 0) return device;
  const std::string idx = device.substr(5);
  if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos || idx.size() > 4)
    fail("--device '{}': expected cpu, cuda or cuda:N", device);
  select_cuda_device(std::stoi(idx));
  return "cuda";
}

void add_train_command(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train one model on one task (config: docs/config.md)");
  cmd->add_option("config", a->config, "the run's YAML config")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", a->sets, "override a config key, KEY.PATH=VALUE (repeatable)")->type_name("K=V")
      ->allow_extra_args(false);
  cmd->add_option("--out", a->out, "run directory (default: the config's out_dir)")->type_name("DIR");
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N (when built with CUDA)")->type_name("DEVICE");
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--resume", a->resume, "continue the run in --out from its checkpoint");
  cmd->add_flag("--dry-run", a->dry_run, "print the effective config and the model size, train nothing");
  cmd->add_flag("--quiet,-q", a->quiet, "no progress line");
  // Testing aid, not in --help: end as kill -9 would after step S's metrics lines, after step S's
  // checkpoint, or while writing summary.json (docs/run-format.md, "Crash safety").
  cmd->add_option("--stop-after", a->stop_after, "")->group("");
  cmd->callback([&ctx, a] { run_train(ctx, *a); });
}

}  // namespace sb::cli
