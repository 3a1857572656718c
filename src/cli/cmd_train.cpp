// cmd_train.cpp: `statebench train CONFIG.yaml [--set a.b=c]... [--out DIR] [--device cpu]
// [--threads N] [--resume] [--dry-run]`: one training run into a run directory (docs/run-format.md).
#include <cstdio>

#include "cli/cli.hpp"
#include "core/error.hpp"
#include "model/transformer.hpp"
#include "train/engine.hpp"
#include "train/trainer.hpp"

namespace sb::cli {

namespace {
struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out, device;
  int64_t threads = -1;
  bool resume = false, dry_run = false, quiet = false;
};

void run_train(Context& ctx, const TrainArgs& a) {
  ctx.load_plugins();
  std::vector<std::string> overrides = a.sets;
  if (!a.device.empty()) {
    // cpu, cuda, or cuda:N (device N of the visible ones; sweeps give each worker its own).
    std::string device = a.device;
    if (device.rfind("cuda:", 0) == 0) {
      const std::string idx = device.substr(5);
      if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos || idx.size() > 4)
        fail("--device '{}': expected cpu, cuda or cuda:N", device);
      select_cuda_device(std::stoi(idx));
      device = "cuda";
    }
    overrides.push_back("train.device=" + device);
  }
  if (a.threads >= 0) overrides.push_back("train.threads=" + std::to_string(a.threads));
  if (!a.out.empty()) overrides.push_back("out_dir=" + a.out);
  const TrainConfig cfg = load_config(a.config, overrides);
  if (a.dry_run) {
    const auto task = ctx.tasks.create(cfg.task.name, cfg.task.params);
    const Transformer<float> model(resolve_max_len(cfg.model, task->seq_len()), task->vocab_size());
    std::fputs(to_yaml(cfg).c_str(), stdout);
    fmt::print("# task {}: T={} V={}; model: {} parameters in {} tensors\n", cfg.task.name, task->seq_len(),
               task->vocab_size(), model.params().num_params(), model.params().views().size());
    return;
  }
  TrainOptions opt;
  opt.out_dir = cfg.out_dir;
  opt.resume = a.resume;
  opt.command = ctx.command_line;
  opt.progress = !a.quiet;
  const TrainOutcome r = train(cfg, ctx.tasks, opt);
  if (r.status == "already_finished") {
    fmt::print("{}: already finished (summary.json exists); nothing to do\n", opt.out_dir);
    return;
  }
  fmt::print("{}: {} after {} steps; results in {}/summary.json\n", cfg.task.name, r.status, r.steps, opt.out_dir);
  if (r.exit_code != 0) throw ExitCode(r.exit_code);
}
}  // namespace

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
  cmd->callback([&ctx, a] { run_train(ctx, *a); });
}

}  // namespace sb::cli
