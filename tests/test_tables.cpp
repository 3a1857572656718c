// test_tables.cpp: `statebench table` on hand-written sweep directories: loading (manifest,
// scanned cells, single run, config.yaml of unfinished runs, corrupt and missing files), the
// accuracy grid's means and spreads, best learning rate, flip-flop error counts with exact bounds
// (0 of N), CSV that parses and the CLI's exit codes. Model and column labels:
// test_tables_labels.cpp; the min-depth tables: test_tables_depth.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "report/results.hpp"
#include "report/tables.hpp"
#include "tables_fixture.hpp"
#include "train/stats.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;
using namespace tables_test;
using sb::test::run_cli;

TEST(Tables, LoadsManifestCellsInOrder) {
  const Study s = load_study(write_sweep("load", grid_runs()).string());
  EXPECT_EQ(s.info.name, "load");
  EXPECT_EQ(s.info.protocol, "grid");
  ASSERT_TRUE(s.info.threshold.has_value());
  EXPECT_DOUBLE_EQ(*s.info.threshold, 0.9);
  ASSERT_EQ(s.runs.size(), 16u);
  EXPECT_EQ(s.models, (std::vector<std::string>{"path", "rope"}));
  EXPECT_EQ(s.eval_keys, (std::vector<std::string>{"val", "val@64"}));
  const RunRecord& r = s.runs[5];  // path, depth 2, length 16, seed 1
  EXPECT_EQ(r.attention, "path");
  EXPECT_EQ(r.depth, 2);
  EXPECT_EQ(r.train_length, 16);
  EXPECT_EQ(r.seed, 1);
  ASSERT_TRUE(r.lr.has_value());
  EXPECT_DOUBLE_EQ(*r.lr, 3e-4);
  EXPECT_EQ(r.status, RunStatus::completed);
  ASSERT_NE(r.eval("val@64"), nullptr);
  EXPECT_EQ(r.eval("val@64")->split, "val");
  EXPECT_EQ(r.eval("val@64")->at_length, 64);
  EXPECT_DOUBLE_EQ(r.eval("val")->token_accuracy, 1.0);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(Tables, AccuracyGridMeansAndSpreads) {
  const Study s = load_study(write_sweep("grid", grid_runs()).string());
  const Table t = accuracy_grid(s, {});
  // Sequence accuracy (the fixture's is half the token accuracy) beside token accuracy.
  EXPECT_EQ(t.header, (std::vector<std::string>{"model", "depth", "L=16", "L=16 seq", "L=32", "L=32 seq"}));
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(cell(t, {"path", "1"}, "L=16 seq"), "0.425 ± 0.035 (2)");
  EXPECT_EQ(cell(t, {"path", "1"}, "L=16"), "0.850 ± 0.071 (2)");
  EXPECT_EQ(cell(t, {"path", "1"}, "L=32"), "0.750 ± 0.071 (2)");
  EXPECT_EQ(cell(t, {"path", "2"}, "L=16"), "0.975 ± 0.035 (2)");
  EXPECT_EQ(cell(t, {"path", "2"}, "L=32"), "0.910 ± 0.042 (2)");
  EXPECT_EQ(cell(t, {"rope", "2"}, "L=16"), "0.890 ± 0.057 (2)");
  EXPECT_EQ(cell(t, {"rope", "1"}, "L=32"), "0.450 ± 0.071 (2)");
  TableOptions range;
  range.spread = "range";
  EXPECT_EQ(cell(accuracy_grid(s, range), {"path", "2"}, "L=32"), "0.910 [0.880, 0.940] (2)");
  TableOptions other;
  other.metric = "val@64.token_accuracy";
  EXPECT_EQ(cell(accuracy_grid(s, other), {"path", "1"}, "L=16"), "0.425 ± 0.035 (2)");
  TableOptions keys;
  keys.keys = {"all"};
  const Table both = accuracy_grid(s, keys);
  EXPECT_EQ(both.header, (std::vector<std::string>{"model", "depth", "L=16 val", "L=16 val seq", "L=16 val@64",
                                                  "L=16 val@64 seq", "L=32 val", "L=32 val seq", "L=32 val@64",
                                                  "L=32 val@64 seq"}));
  EXPECT_EQ(cell(both, {"rope", "2"}, "L=16 val@64"), "0.445 ± 0.028 (2)");
  // With the metric on sequence accuracy, token accuracy is the column beside it.
  TableOptions seq;
  seq.metric = "val.sequence_accuracy";
  const Table by_seq = accuracy_grid(s, seq);
  EXPECT_EQ(by_seq.header, (std::vector<std::string>{"model", "depth", "L=16", "L=16 token", "L=32", "L=32 token"}));
  EXPECT_EQ(cell(by_seq, {"path", "1"}, "L=16"), "0.425 ± 0.035 (2)");
  EXPECT_EQ(cell(by_seq, {"path", "1"}, "L=16 token"), "0.850 ± 0.071 (2)");
  // An error-rate metric has no companion column.
  TableOptions err;
  err.metric = "val.error_rate";
  EXPECT_EQ(accuracy_grid(s, err).header, (std::vector<std::string>{"model", "depth", "L=16", "L=32"}));
}

TEST(Tables, MissingDivergedAndFailedCells) {
  auto runs = grid_runs();
  for (auto& r : runs) {
    if (r.attention == "rope" && r.depth == 2 && r.length == 32 && r.seed == 1) r.status = "diverged";
    if (r.attention == "rope" && r.depth == 1 && r.length == 32) r.status = "diverged";
    if (r.attention == "path" && r.depth == 2 && r.length == 32) r.status = "failed";
  }
  const Study s = load_study(write_sweep("statuses", runs, {"path_d1_L32_s0_lr0.0003", "path_d1_L32_s1_lr0.0003"}).string());
  const Table t = accuracy_grid(s, {});
  EXPECT_EQ(cell(t, {"path", "1"}, "L=32"), "-");
  EXPECT_EQ(cell(t, {"path", "2"}, "L=32"), "fail");
  EXPECT_EQ(cell(t, {"rope", "1"}, "L=32"), "div");
  EXPECT_EQ(cell(t, {"rope", "2"}, "L=32"), "0.600 (1) [1 div]");
  EXPECT_EQ(s.runs[2].status, RunStatus::missing);
  EXPECT_EQ(s.runs[2].depth, 1);  // known from the manifest's overrides
  ASSERT_FALSE(t.notes.empty());
}

TEST(Tables, ProtocolSkippedCellsAreCountedApartFromMissingOnes) {
  auto runs = grid_runs();
  const std::string skipped = "path_d1_L32_s0_lr0.0003", missing = "path_d1_L32_s1_lr0.0003";
  const fs::path dir = write_sweep("skipped", runs, {skipped, missing}, "min_depth");
  const fs::path manifest = dir / "manifest.json";
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "{\"id\": \"" + skipped + "\", ";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + key.size(), "\"state\": \"skipped\", ");
  write_file_atomic(manifest.string(), text);
  const Study s = load_study(dir.string());
  size_t n_skipped = 0, n_missing = 0;
  for (const RunRecord& r : s.runs) {
    if (r.id == skipped) EXPECT_EQ(r.status, RunStatus::skipped);
    if (r.id == missing) EXPECT_EQ(r.status, RunStatus::missing);
    n_skipped += r.status == RunStatus::skipped, n_missing += r.status == RunStatus::missing;
  }
  EXPECT_EQ(n_skipped, 1u);
  EXPECT_EQ(n_missing, 1u);
  const std::string md = render_markdown(s, {});
  EXPECT_NE(md.find("1 missing, 1 skipped"), std::string::npos) << md.substr(0, 200);
}

TEST(Tables, BestLearningRate) {
  std::vector<RunSpec> runs;
  for (double lr : {1e-3, 1e-2})
    for (int seed : {0, 1}) {
      RunSpec r;
      r.lr = lr, r.seed = seed;
      r.evals = {{"val", {lr == 1e-3 ? 0.7 + 0.1 * seed : 0.9 + 0.02 * seed}}};
      if (lr == 1e-2 && seed == 1) r.status = "diverged";
      runs.push_back(r);
    }
  const Study s = load_study(write_sweep("lr", runs, {}, "max_lr", "{}").string());
  const Table t = accuracy_grid(s, {});
  EXPECT_EQ(cell(t, {"path", "1"}, "L=16"), "0.900 (1) [1 div] lr=0.01");
  EXPECT_NE(t.title.find("best learning rate"), std::string::npos) << t.title;
}

// A rate tried on one seed (a tuning run) does not beat a rate's mean over three, however high its
// value; once it has as many seeds, it competes.
TEST(Tables, BestLearningRateComparesRatesRunOnAsManySeeds) {
  auto study = [](const std::string& name, int tuned_seeds) {
    std::vector<RunSpec> runs;
    for (int seed : {0, 1, 2}) {
      RunSpec r;
      r.lr = 1e-3, r.seed = seed, r.evals = {{"val", {0.7 + 0.05 * seed}}};
      runs.push_back(r);
      if (seed >= tuned_seeds) continue;
      r.lr = 3e-4, r.evals = {{"val", {0.95}}};
      runs.push_back(r);
    }
    return load_study(write_sweep(name, runs, {}, "grid", "{}").string());
  };
  EXPECT_EQ(cell(accuracy_grid(study("lr_one_seed", 1), {}), {"path", "1"}, "L=16"), "0.750 ± 0.050 (3) lr=0.001");
  EXPECT_EQ(cell(accuracy_grid(study("lr_all_seeds", 3), {}), {"path", "1"}, "L=16"), "0.950 ± 0.000 (3) lr=0.0003");
}

TEST(Tables, FlipFlopErrorCountsAndExactBounds) {
  const fs::path dir = scratch("flipflop");
  const int64_t val_errors[2][2] = {{0, 0}, {3, 5}};
  for (int m = 0; m < 2; ++m)
    for (int seed = 0; seed < 2; ++seed) {
      RunSpec r;
      r.attention = m == 0 ? "path" : "rope", r.seed = seed, r.length = 512, r.task = "flipflop";
      r.evals = {{"val", {1, 7000, val_errors[m][seed], std::pair{0.0, 0.0005}}},
                 {"sparse", {1, 35000, m == 0 ? 0 : 10 * seed}},
                 {"dense", {1, 57000, 0}}};
      write_run(dir / "cells" / fmt::format("{}_s{}", r.attention, seed), r);
    }
  const Study s = load_study(dir.string());  // no manifest: cells/*/summary.json
  ASSERT_EQ(s.runs.size(), 4u);
  TableOptions o;
  o.per_seed = true;
  const std::vector<Table> tables = build_tables(s, {});
  ASSERT_TRUE(std::any_of(tables.begin(), tables.end(), [](const Table& t) { return t.id == "errors"; }));
  const Table t = error_table(s, o);
  EXPECT_EQ(t.header, (std::vector<std::string>{"model", "seeds", "val", "sparse", "dense"}));
  EXPECT_NE(t.title.find("L=512"), std::string::npos);
  EXPECT_EQ(cell(t, {"path", "0,1"}, "val"), "0/14000 = 0% [0%, 0.0263%]");  // 1 - 0.025^(1/14000)
  EXPECT_EQ(cell(t, {"path", "0,1"}, "sparse"), "0/70000 = 0% [0%, 0.00527%]");
  EXPECT_EQ(cell(t, {"rope", "0,1"}, "dense"), "0/114000 = 0% [0%, 0.00324%]");
  // Bounds checked against an independent binomial-CDF bisection.
  EXPECT_EQ(cell(t, {"rope", "0,1"}, "val"), "8/14000 = 0.0571% [0.0247%, 0.113%]");
  EXPECT_EQ(cell(t, {"rope", "0,1"}, "sparse"), "10/70000 = 0.0143% [0.00685%, 0.0263%]");
  // Per seed: the run's own error_ci95 from summary.json.
  EXPECT_EQ(cell(t, {"rope", "1"}, "val"), "5/7000 = 0.0714% [0%, 0.0500%]");
  EXPECT_EQ(cell(t, {"path", "0"}, "val"), "0/7000 = 0% [0%, 0.0500%]");
  EXPECT_EQ(format_percent(0), "0");
  EXPECT_EQ(format_percent(0.069), "6.90");
  EXPECT_EQ(format_percent(0.403), "40.3");
}

TEST(Tables, LengthGeneralisationTable) {
  const Study s = load_study(write_sweep("length", grid_runs()).string());
  const Table t = length_table(s, {});
  EXPECT_EQ(t.header, (std::vector<std::string>{"model", "depth", "train L", "val (train L)", "val@64"}));
  EXPECT_EQ(cell(t, {"path", "2", "32"}, "val@64"), "0.455 ± 0.021 (2)");
  EXPECT_EQ(cell(t, {"rope", "1", "16"}, "val (train L)"), "0.550 ± 0.071 (2)");
  const auto ids = [&] {
    std::vector<std::string> out;
    for (const Table& x : build_tables(s, {})) out.push_back(x.id);
    return out;
  }();
  EXPECT_EQ(ids, (std::vector<std::string>{"grid", "seeds", "min-depth", "length"}));
}

// Each length scored at 2x and 4x itself (task.eval scale): the columns are the multiples, each cell
// reading its own val@(2L) and val@(4L), where absolute lengths would be three mostly empty columns.
TEST(Tables, LengthTableByMultiplesOfTheTrainingLength) {
  std::vector<RunSpec> runs = grid_runs();
  for (RunSpec& r : runs) {
    const double a = r.evals.front().second.acc;  // val
    r.evals = {{"val", {a}}, {fmt::format("val@{}", 2 * r.length), {a / 2}}, {fmt::format("val@{}", 4 * r.length), {a / 4}}};
  }
  const Study s = load_study(write_sweep("length_x", runs).string());
  const Table t = length_table(s, {});
  EXPECT_EQ(t.header, (std::vector<std::string>{"model", "depth", "train L", "val (train L)", "val@2x", "val@4x"}));
  EXPECT_EQ(cell(t, {"path", "2", "32"}, "val@2x"), "0.455 ± 0.021 (2)");  // its val@64
  EXPECT_EQ(cell(t, {"path", "2", "16"}, "val@4x"), "0.244 ± 0.009 (2)");  // its val@64 too
  bool found = false;  // the CSV keeps each cell's own key and absolute length
  for (const auto& row : t.csv_rows)
    if (std::find(row.begin(), row.end(), "val@128") != row.end()) found = true;
  EXPECT_TRUE(found);
  // One absolute length for every cell (val@64 at L 16 and 32) stays one column, not two multiples.
  EXPECT_EQ(length_table(load_study(write_sweep("length_abs", grid_runs()).string()), {}).header.back(), "val@64");
}

TEST(Tables, MarkdownAndCsvRendering) {
  const Study s = load_study(write_sweep("render", grid_runs()).string());
  const std::vector<Table> tables = build_tables(s, {});
  const std::string md = render_markdown(s, tables);
  EXPECT_NE(md.find("# render\n"), std::string::npos);
  EXPECT_NE(md.find("16 runs (protocol grid): 16 completed."), std::string::npos) << md;
  EXPECT_NE(md.find("| path  | 1     | 0.850 ± 0.071 (2) | 0.425 ± 0.035 (2) | 0.750 ± 0.071 (2) | 0.375 ± 0.035 (2) |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("## Minimum depth"), std::string::npos);
  // CSV: blocks of "# title", header, rows with the header's field count; quoted fields round-trip.
  const std::string csv = render_csv(tables);
  const std::vector<std::vector<std::string>> records = parse_csv(csv);
  size_t titles = 0, width = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& rec = records[i];
    if (rec.empty()) continue;
    if (rec.size() == 1 && rec[0].rfind("# ", 0) == 0) {
      if (i + 1 < records.size() && !records[i + 1].empty() && records[i + 1][0] == "model") width = records[i + 1].size(), ++titles;
      continue;
    }
    EXPECT_EQ(rec.size(), width) << "record " << i;
  }
  EXPECT_EQ(titles, tables.size());
  EXPECT_NE(csv.find("\"# Accuracy grid: val.token_accuracy; seq columns: sequence_accuracy (mean ± sd over seeds, (n) = seeds)\""),
            std::string::npos) << csv;
  EXPECT_NE(csv.find("\npath,1,16,0.0003,val,token_accuracy,2,0.85,0.0707107,0.8,0.9,0.85,0.9,1,0,0,0,0.8,0.9\n"), std::string::npos)
      << csv;
  EXPECT_EQ(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
}

TEST(Tables, ScannedDirectoriesSingleRunAndModelLabels) {
  // No manifest and no cells/: the subdirectories are the runs; d_model differs, so it labels them.
  const fs::path dir = scratch("scan");
  RunSpec a, b;
  a.evals = b.evals = {{"val", {0.5}}};
  b.d_model = 128;
  write_run(dir / "run10", a);
  write_run(dir / "run9", b);
  fs::create_directories(dir / "plots");  // not a run
  const Study s = load_study(dir.string());
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].id, "run9");  // natural order
  EXPECT_EQ(s.models, (std::vector<std::string>{"path (d_model=128)", "path (d_model=64)"}));
  // A single run directory.
  const Study one = load_study((dir / "run10").string());
  ASSERT_EQ(one.runs.size(), 1u);
  EXPECT_EQ(one.runs[0].id, "run10");
  EXPECT_EQ(cell(accuracy_grid(one, {}), {"path", "1"}, "L=16"), "0.500 (1)");
  // An unfinished run: no summary.json, its config.yaml says what it is.
  fs::create_directories(dir / "run11");
  write_file_atomic((dir / "run11" / "config.yaml").string(),
                    "task:\n  name: word_problem\n  params: {group: A5, length: 16}\nmodel:\n  attention: rope\n  n_layers: 3\n"
                    "  d_model: 64\ntrain:\n  seed: 4\noptim:\n  lr: 0.0003\n");
  const Study with = load_study(dir.string());
  ASSERT_EQ(with.runs.size(), 3u);
  EXPECT_EQ(with.runs[2].status, RunStatus::unfinished);
  EXPECT_EQ(with.runs[2].attention, "rope");
  EXPECT_EQ(with.runs[2].depth, 3);
  EXPECT_EQ(with.runs[2].seed, 4);
  EXPECT_EQ(cell(accuracy_grid(with, {}), {"rope (d_model=64)", "3"}, "L=16"), "-");
}

TEST(Tables, ManifestVariantsAndHybridModels) {
  // Overrides as a map with list / map / number values or as "key=value" strings, axes as a map,
  // unknown fields, a default cell dir: all accepted.
  const fs::path dir = scratch("variants");
  write_file_atomic((dir / "manifest.json").string(), R"({"study": "v", "protocol": "min_depth", "extra": {"x": 1},
    "protocol_options": {"axis": "model.n_layers", "threshold": 0.5, "metric": "val.token_accuracy", "best_over": ["train.seed"]},
    "axes": {"model.layers": [["path", "rope"]], "optim.weight_decay": [0.1, 0.0]},
    "cells": [
      {"id": "h", "overrides": {"model.layers": ["path", "rope"], "model.n_layers": 2, "optim.weight_decay": 0.1,
                                "task.eval": [{"split": "val", "length": 64}]}},
      {"id": "u", "overrides": ["model.attention=rope", "model.n_layers=2", "optim.weight_decay=0.0"]}]})");
  fs::create_directories(dir / "cells" / "h");
  write_file_atomic((dir / "cells" / "h" / "summary.json").string(),
                    R"({"status": "early_stopped", "task": "parity", "task_params": {"length": "32"},
                        "model": {"attention": "path", "layers": ["path", "rope"], "n_layers": 2, "init": {"std": 0.02}},
                        "seed": 1, "lr": 0.001, "eval": {"val": {"token_accuracy": 0.75, "sequence_accuracy": null}}})");
  const Study s = load_study(dir.string());
  EXPECT_EQ(s.info.axes, (std::vector<std::string>{"model.layers", "optim.weight_decay"}));
  EXPECT_EQ(s.info.best_over, (std::vector<std::string>{"train.seed"}));
  EXPECT_EQ(s.info.axis, "model.n_layers");
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].status, RunStatus::early_stopped);
  EXPECT_EQ(s.runs[0].model, "path+rope (weight_decay=0.1)");
  EXPECT_TRUE(std::isnan(s.runs[0].eval("val")->sequence_accuracy));
  EXPECT_EQ(s.runs[1].status, RunStatus::missing);
  EXPECT_EQ(s.runs[1].model, "rope (weight_decay=0.0)");
  EXPECT_EQ(s.runs[1].depth, 2);
  EXPECT_EQ(s.runs[1].train_length, 32);  // filled in: every run with a length agrees
  const Table md = min_depth_table(s, {});
  EXPECT_NE(md.title.find(">= 0.5"), std::string::npos) << md.title;
  EXPECT_EQ(row_of(md, {"path+rope (weight_decay=0.1)"}), (std::vector<std::string>{"path+rope (weight_decay=0.1)", "2 (1/1)"}));
  EXPECT_EQ(row_of(md, {"rope (weight_decay=0.0)"}), (std::vector<std::string>{"rope (weight_decay=0.0)", "?"}));
  TableOptions runs;
  runs.tables = {"runs"};
  const Table listed = build_tables(s, runs).front();
  EXPECT_EQ(cell(listed, {"h"}, "status"), "early_stopped");
  EXPECT_EQ(cell(listed, {"h"}, "steps"), "-");  // this summary does not say
}

TEST(Tables, CorruptSummaryIsSkippedWithWarningOrStrictError) {
  const fs::path dir = write_sweep("corrupt", grid_runs());
  const fs::path bad = dir / "cells" / "rope_d2_L32_s1_lr0.0003" / "summary.json";
  write_file_atomic(bad.string(), "{\"status\": \"completed\", \"eval\": {\"val\": {\"token_accuracy\": 0.5,");
  const Study s = load_study(dir.string());
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find(bad.string()), std::string::npos) << s.warnings[0];
  EXPECT_EQ(s.warnings[0].find('\n'), std::string::npos);
  EXPECT_EQ(cell(accuracy_grid(s, {}), {"rope", "2"}, "L=32"), "0.600 (1)");
  try {
    load_study(dir.string(), {true});
    ADD_FAILURE() << "strict load accepted a corrupt summary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
  }
  // Wrong types are corrupt too.
  write_file_atomic(bad.string(), "{\"status\": \"completed\", \"model\": {\"n_layers\": \"two\"}}");
  EXPECT_NE(load_study(dir.string()).warnings.at(0).find("n_layers"), std::string::npos);
  write_file_atomic(bad.string(), "[1, 2]");
  EXPECT_NE(load_study(dir.string()).warnings.at(0).find("expected a JSON object"), std::string::npos);
}

TEST(Tables, LoadErrors) {
  auto message = [](const std::string& dir) {
    try {
      load_study(dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const fs::path empty = scratch("empty");
  EXPECT_NE(message(empty.string()).find("no runs found in '" + empty.string() + "'"), std::string::npos);
  EXPECT_NE(message((empty / "nope").string()).find("no such directory"), std::string::npos);
  const fs::path m = scratch("bad_manifest");
  write_file_atomic((m / "manifest.json").string(), "{\"study\": \"x\", \"cells\": [");
  const std::string mm = message(m.string());
  EXPECT_NE(mm.find("manifest '" + (m / "manifest.json").string() + "'"), std::string::npos) << mm;
  write_file_atomic((m / "manifest.json").string(), "{\"study\": \"x\", \"cells\": [{\"id\": \"a\"}]}");
  EXPECT_NE(message(m.string()).find("no runs found"), std::string::npos);
  const Study s = load_study(write_sweep("metric", grid_runs()).string());
  TableOptions o;
  o.metric = "val.accuracy";
  EXPECT_THROW(build_tables(s, o), Error);
  o.metric = "sparse.token_accuracy";
  EXPECT_THROW(build_tables(s, o), Error);
  o.metric = "sequence_accuracy";  // field only: the first eval key
  EXPECT_EQ(parse_metric(o.metric, s).name(), "val.sequence_accuracy");
}

TEST(TableCli, ExitCodesOutputsAndPlots) {
  const fs::path dir = write_sweep("cli", grid_runs());
  const auto missing = run_cli({"table", (dir / "nope").string()});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("no such directory"), std::string::npos) << missing.err;
  const auto empty = run_cli({"table", scratch("cli_empty").string()});
  EXPECT_EQ(empty.rc, 2);
  EXPECT_NE(empty.err.find("no runs found in"), std::string::npos) << empty.err;
  const fs::path group = scratch("cli_group");  // a results group: studies in its folders, no runs of its own
  for (const char* study : {"s2", "s1"}) {
    fs::create_directories(group / study);
    write_file_atomic((group / study / "manifest.json").string(), "{}");
  }
  const auto pooled = run_cli({"table", group.string()});
  EXPECT_EQ(pooled.rc, 2);
  EXPECT_NE(pooled.err.find("it holds the studies s1, s2; name them (statebench table " + group.string() + "/s1 ...)"),
            std::string::npos)
      << pooled.err;
  EXPECT_EQ(run_cli({"table", dir.string(), "--metric", "bogus"}).rc, 2);
  EXPECT_EQ(run_cli({"table", dir.string(), "--format", "xml"}).rc, 2);

  const auto md = run_cli({"table", dir.string()});
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find("## Accuracy grid"), std::string::npos);
  EXPECT_NE(md.out.find("0.975 ± 0.035 (2)"), std::string::npos);
  for (const char* f : {"heatmap_path.svg", "heatmap_rope.svg", "length_rope.svg"})
    EXPECT_TRUE(fs::exists(dir / "plots" / f)) << f;
  EXPECT_FALSE(fs::exists(dir / "plots" / "heatmap_path.png"));  // SVG only

  const fs::path out = dir / "tables.csv", plots = scratch("cli_plots");
  const auto csv = run_cli({"table", dir.string(), "--format", "csv", "--out", out.string(), "--plots", plots.string(),
                            "--tables", "grid,runs"});
  ASSERT_EQ(csv.rc, 0) << csv.err;
  EXPECT_TRUE(csv.out.empty());
  const std::string text = read_file(out.string());
  EXPECT_EQ(text.rfind("\"# Accuracy grid", 0), 0u) << text;
  EXPECT_NE(text.find("\n\"# Runs: token_accuracy of every eval key, sequence_accuracy beside it\"\nid,model,depth,L,seed,lr,"
                      "status,steps,val token_accuracy,val sequence_accuracy,val@64 token_accuracy,val@64 sequence_accuracy,message\n"),
            std::string::npos) << text;
  EXPECT_TRUE(fs::exists(plots / "heatmap_rope.svg"));

  // A corrupt summary: a warning naming it and exit 0; --strict makes it exit 2.
  write_file_atomic((dir / "cells" / "path_d1_L16_s0_lr0.0003" / "summary.json").string(), "not json {");
  const auto warned = run_cli({"table", dir.string(), "--no-plots"});
  EXPECT_EQ(warned.rc, 0);
  EXPECT_NE(warned.err.find("warning: skipping"), std::string::npos) << warned.err;
  EXPECT_NE(warned.out.find("0.900 (1)"), std::string::npos);
  EXPECT_EQ(run_cli({"table", dir.string(), "--no-plots", "--strict"}).rc, 2);
}

// Runs that give no value for the metric are named, on stderr and under the grid, and each entry
// says how many seeds it used: an unfinished cell (config.yaml, no summary.json) and a cell whose
// summary says completed but holds no evaluation (what a resume at the last step used to write).
TEST(TableCli, NamesTheRunsItCouldNotUse) {
  const fs::path dir = write_sweep("unused", grid_runs());
  const std::string unfinished = "rope_d2_L32_s1_lr0.0003", empty = "path_d1_L16_s0_lr0.0003";
  fs::remove(dir / "cells" / unfinished / "summary.json");
  write_file_atomic((dir / "cells" / unfinished / "config.yaml").string(),
                    "task: {name: word_problem, params: {group: A5, length: 32}}\nmodel: {attention: rope, n_layers: 2}\n");
  write_file_atomic((dir / "cells" / empty / "summary.json").string(),
                    R"({"status": "completed", "task": "word_problem", "task_params": {"length": "16"},
                        "model": {"attention": "path", "n_layers": 1}, "seed": 0, "lr": 0.0003, "eval": {}})");
  const auto r = run_cli({"table", dir.string(), "--no-plots"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("warning: not used: " + unfinished + " (rope, depth 2, L = 32, seed 1): unfinished (no summary.json)"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("warning: not used: " + empty + " (path, depth 1, L = 16, seed 0): completed without a 'val' evaluation"),
            std::string::npos) << r.err;
  EXPECT_NE(r.out.find("not used (2 runs): " + empty), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.600 (1)"), std::string::npos) << r.out;  // rope, depth 2, L = 32: one seed of two
  EXPECT_NE(r.out.find("0.900 (1)"), std::string::npos) << r.out;  // path, depth 1, L = 16
  EXPECT_NE(r.out.find("(n) = seeds"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace sb::report
