// cmd_bench.cpp: the `statebench bench` command group. Each benchmark is a subcommand defined in
// its own file by an add_bench_<name>(bench, ctx) function declared in cli.hpp; add a call below
// for a new one (tasks: bench_tasks.cpp, attention: bench_attention.cpp).
#include "cli/cli.hpp"

namespace sb::cli {

void add_bench_command(CLI::App& app, Context& ctx) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks: task generation, training throughput");
  bench->require_subcommand(1);
  add_bench_tasks(*bench, ctx);
  add_bench_train(*bench, ctx);
  add_bench_attention(*bench, ctx);
}

}  // namespace sb::cli
