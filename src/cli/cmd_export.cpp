// cmd_export.cpp: `statebench export RUN_DIR -o model.safetensors [--check-data check.safetensors]`:
// a finished run's parameters (with their names, the model, task and config) as safetensors, and
// optionally examples with the C++ model's logits for tools/check_export.py (docs/run-format.md).
#include "cli/cli.hpp"
#include "core/error.hpp"
#include "train/export_run.hpp"

namespace sb::cli {

namespace {

struct ExportArgs {
  std::string run;
  ExportOptions options;
};

void run_export(Context& ctx, const ExportArgs& a) {
  ctx.load_plugins();
  const ExportResult r = export_run(a.run, ctx.tasks, a.options);
  fmt::print("{}: {} tensors, {} parameters (V={}) -> {}\n", a.run, r.tensors, r.params, r.vocab, a.options.out);
  if (!a.options.check_data.empty())
    fmt::print("check data: {} examples of length {} with their float64 logits -> {}\n"
               "compare with PyTorch: python3 tools/check_export.py {} {}\n",
               r.check_examples, r.check_length, a.options.check_data, a.options.out, a.options.check_data);
}

}  // namespace

void add_export_command(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "write a finished run's parameters and config as safetensors");
  cmd->add_option("run", a->run, "the run directory (summary.json and checkpoint.bin)")->required()->type_name("RUN_DIR");
  cmd->add_option("-o,--out", a->options.out, "the .safetensors file to write")->required()->type_name("FILE");
  cmd->add_option("--check-data", a->options.check_data,
                  "also write examples with the C++ model's logits (for tools/check_export.py)")
      ->type_name("FILE");
  cmd->add_option("--check-examples", a->options.check_examples, "examples in the check data (default 4)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--check-split", a->options.check_split, "their split (default: the run's first task.eval split)")
      ->type_name("SPLIT");
  cmd->add_option("--check-length", a->options.check_length,
                  "their length, through the task's length parameter (default: the training length; the PyTorch "
                  "reference computes PaTH by explicit products, so keep it short)")
      ->type_name("L")
      ->check(CLI::PositiveNumber);
  cmd->callback([&ctx, a] { run_export(ctx, *a); });
}

}  // namespace sb::cli
