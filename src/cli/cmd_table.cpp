// cmd_table.cpp: `statebench table DIR...`: loads a sweep (or run) directory, or several pooled
// (report/results.hpp), prints the expressivity tables as Markdown or CSV (report/tables.hpp),
// writes the heatmaps and length plots as SVG (report/study_plots.hpp) and, on request, the
// learning curves (report/curves.hpp). docs/tables.md is its manual.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "report/curves.hpp"
#include "report/results.hpp"
#include "report/study_plots.hpp"
#include "report/tables.hpp"

namespace sb::cli {

namespace {

struct TableArgs {
  std::vector<std::string> dirs;
  std::string format = "md", out, plots, curves, metric, keys, tables, spread = "std", min_depth_over = "best";
  double threshold = -1;
  int64_t at_step = 0;  // 0: each run as it ended
  bool per_seed = false, no_plots = false, strict = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void run_table(const TableArgs& a) {
  report::LoadOptions load;
  load.strict = a.strict;
  report::Study study = report::load_studies(a.dirs, load);
  if (a.at_step > 0) report::cut_at_step(study, a.at_step);
  for (const auto& w : study.warnings) std::fprintf(stderr, "statebench: warning: %s\n", w.c_str());
  report::TableOptions o;
  o.metric = a.metric;
  o.keys = split_list(a.keys);
  o.spread = a.spread;
  if (a.threshold >= 0) o.threshold = a.threshold;
  o.min_depth_over = a.min_depth_over;
  o.per_seed = a.per_seed;
  o.tables = split_list(a.tables);
  const std::vector<report::Table> tables = report::build_tables(study, o);
  // Every run without a value for the metric is named (a table entry's (n) counts the seeds used).
  const auto unused = report::unused_runs(study, report::parse_metric(o.metric, study).key);
  for (size_t i = 0; i < unused.size() && i < 20; ++i)
    std::fprintf(stderr, "statebench: warning: not used: %s\n", unused[i].c_str());
  if (unused.size() > 20) std::fprintf(stderr, "statebench: warning: not used: %zu more runs\n", unused.size() - 20);
  const std::string text = a.format == "csv" ? report::render_csv(tables) : report::render_markdown(study, tables);
  if (!a.no_plots && a.plots.empty() && a.dirs.size() > 1) {  // none of the directories owns the pooled plots
    std::fprintf(stderr, "statebench: several directories: no plots (--plots DIR writes them)\n");
  } else if (!a.no_plots) {
    const std::string dir = a.plots.empty() ? (std::filesystem::path(a.dirs.front()) / "plots").string() : a.plots;
    const auto files = report::write_study_plots(study, o, dir);
    std::fprintf(stderr, "statebench: wrote %zu plot files to %s\n", files.size(), dir.c_str());
  }
  if (!a.curves.empty()) {
    const auto files = report::write_curve_plots(study, o, a.curves);
    std::fprintf(stderr, "statebench: wrote %zu learning-curve plots to %s\n", files.size(), a.curves.c_str());
  }
  if (a.out.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    write_file_atomic(a.out, text);
    std::fprintf(stderr, "statebench: wrote %s\n", a.out.c_str());
  }
}

}  // namespace

void add_table_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<TableArgs>();
  CLI::App* cmd = app.add_subcommand(
      "table", "expressivity tables (Markdown/CSV) and plots (SVG) from a sweep or run directory");
  cmd->add_option("DIR", args->dirs,
                  "sweep directory (manifest.json, cells/*/) or one run directory; several: their runs pooled "
                  "(e.g. a study and one that adds seeds)")
      ->required();
  cmd->add_option("--format", args->format, "md (default) or csv (numbers in their own columns)")->check(CLI::IsMember({"md", "csv"}));
  cmd->add_option("--out", args->out, "write the tables to this file instead of stdout")->type_name("FILE");
  cmd->add_option("--plots", args->plots, "directory for the SVG plots (default DIR/plots; several DIRs: none)")
      ->type_name("DIR");
  cmd->add_flag("--no-plots", args->no_plots, "write no plots");
  cmd->add_option("--curves", args->curves,
                  "also draw learning curves into DIR: per cell, loss and accuracy against step, a line per seed "
                  "(from cells/*/metrics.jsonl or curves.jsonl.gz)")
      ->type_name("DIR");
  cmd->add_option("--metric", args->metric,
                  "KEY.FIELD, e.g. val.token_accuracy, sparse.error_rate, val@512.sequence_accuracy "
                  "(default: the manifest's metric, else the first eval key's token_accuracy)");
  cmd->add_option("--keys", args->keys, "eval keys in the accuracy grid, comma-separated, or 'all' (default: the metric's key)");
  cmd->add_option("--threshold", args->threshold, "min-depth threshold (default: the manifest's, else 0.9)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("X");
  cmd->add_option("--min-depth-over", args->min_depth_over, "best (default: best seed) or mean (mean over seeds)")
      ->check(CLI::IsMember({"best", "mean"}));
  cmd->add_option("--spread", args->spread, "std (mean ± sd) or range (mean [min, max])")->check(CLI::IsMember({"std", "range"}));
  cmd->add_flag("--per-seed", args->per_seed, "error table: also one row per seed");
  cmd->add_option("--tables", args->tables, "comma-separated: grid, seeds, min-depth, min-depth-token, errors, length, runs (default: automatic)");
  cmd->add_option("--at-step", args->at_step,
                  "each run as it stood at this training step: its last evaluation by then, from its learning curve "
                  "(runs that ended sooner as they ended)")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  cmd->add_flag("--strict", args->strict, "a corrupt summary.json is an error (default: warning, run skipped)");
  cmd->callback([args] {
    for (const std::string& dir : args->dirs)
      if (!std::filesystem::is_directory(dir)) fail("no such directory '{}'", dir);
    run_table(*args);
  });
  (void)ctx;
}

}  // namespace sb::cli
