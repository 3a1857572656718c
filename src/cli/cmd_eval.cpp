// cmd_eval.cpp: `statebench eval RUN_DIR [--split S]... [--length L]... [--examples N] [--device D]`:
// scores a finished run's checkpoint on splits and lengths (its own evaluation's examples, so
// `eval RUN --split val` repeats summary.json's "val") and merges the results into RUN_DIR/eval.json.
#include <cmath>

#include "cli/cli.hpp"
#include "core/error.hpp"
#include "train/finished_run.hpp"

namespace sb::cli {

namespace {

struct EvalArgs {
  std::string run, device;
  std::vector<std::string> splits;
  std::vector<int64_t> lengths;
  int64_t examples = 0, threads = -1;
};

std::string percent(double x) { return std::isnan(x) ? "-" : fmt::format("{:.4f}", x); }

void run_eval(Context& ctx, const EvalArgs& a) {
  ctx.load_plugins();
  EvalRequest request;
  request.splits = a.splits;
  request.lengths = a.lengths;
  request.examples = a.examples;
  request.device = a.device.empty() ? "" : select_device(a.device);
  request.threads = a.threads;
  request.command = ctx.command_line;
  const EvalRunResult r = evaluate_run(a.run, ctx.tasks, request);
  std::vector<std::vector<std::string>> rows{{"key", "split", "length", "examples", "token_acc", "seq_acc", "loss"}};
  for (const auto& [key, e] : r.results)
    rows.push_back({key, e.split, std::to_string(e.length), std::to_string(e.examples), percent(e.token_accuracy),
                    percent(e.sequence_accuracy), percent(e.loss)});
  std::fputs(format_table(rows).c_str(), stdout);
  fmt::print("{}: evaluated on {}; results in {}\n", a.run, r.device, r.file);
}

}  // namespace

void add_eval_command(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "score a finished run's checkpoint on other splits and lengths (results: RUN_DIR/eval.json)");
  cmd->add_option("run", a->run, "the run directory (summary.json and checkpoint.bin)")->required()->type_name("RUN_DIR");
  cmd->add_option("--split", a->splits, "a split of the task (repeatable; default: the run's task.eval splits)")
      ->type_name("SPLIT")
      ->allow_extra_args(false);
  cmd->add_option("--length", a->lengths, "a sequence length, through the task's length parameter (repeatable; "
                                          "default: the training length)")
      ->type_name("L")
      ->check(CLI::PositiveNumber)
      ->allow_extra_args(false);
  cmd->add_option("--examples", a->examples, "examples per split and length (default: as many as the run used there, else its "
                                      "train.eval_examples)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N (default: the run's train.device)")->type_name("DEVICE");
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cmd->callback([&ctx, a] { run_eval(ctx, *a); });
}

}  // namespace sb::cli
