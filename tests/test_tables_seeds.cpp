// test_tables_seeds.cpp: the per-seed side of `statebench table`: the seeds table (each seed's
// token and sequence accuracy, median, best, how many pass the threshold; diverged seeds named),
// and the CSV form that tools read, parsed here as numbers through the real binary: mean, sd, n and
// one column per seed in the grid block, one row per seed in the seeds block.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "report/results.hpp"
#include "report/tables.hpp"
#include "tables_fixture.hpp"
#include "test_util.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;
using namespace tables_test;
using sb::test::run_cli;

// path and rope at depths 1, 2, L = 16, seeds 0-2; token accuracy by hand, sequence = token / 2.
std::vector<RunSpec> runs() {
  const std::map<std::string, std::vector<double>> acc = {
      {"path1", {0.80, 0.95, 0.60}}, {"path2", {0.97, 0.99, 0.91}}, {"rope1", {0.50, 0.55, 0.40}}, {"rope2", {0.93, 0.70, 0.85}}};
  std::vector<RunSpec> out;
  for (const char* att : {"path", "rope"})
    for (int depth : {1, 2})
      for (int seed : {0, 1, 2}) {
        RunSpec r;
        r.attention = att, r.depth = depth, r.seed = seed;
        r.evals = {{"val", {acc.at(fmt::format("{}{}", att, depth))[seed]}}};
        if (std::string(att) == "rope" && depth == 1 && seed == 1) r.status = "diverged";
        out.push_back(r);
      }
  return out;
}

TEST(SeedsTable, EachSeedMedianBestAndHowManyPass) {
  const Study s = load_study(write_sweep("seeds", runs()).string());
  const Table t = seeds_table(s, {});
  EXPECT_EQ(t.header, (std::vector<std::string>{"model", "depth", "L", "seeds", "token", "token median", "token best",
                                                "passed", "seq", "seq median", "seq best"}));
  EXPECT_EQ(row_of(t, {"path", "1"}), (std::vector<std::string>{"path", "1", "16", "0,1,2", "0.800 0.950 0.600", "0.800",
                                                                "0.950", "1/3", "0.400 0.475 0.300", "0.400", "0.475"}));
  EXPECT_EQ(cell(t, {"path", "2"}, "passed"), "3/3");
  // A diverged seed keeps its place and counts in no statistic.
  EXPECT_EQ(cell(t, {"rope", "1"}, "token"), "0.500 div 0.400");
  EXPECT_EQ(cell(t, {"rope", "1"}, "token median"), "0.450");
  EXPECT_EQ(cell(t, {"rope", "1"}, "passed"), "0/2");
  EXPECT_CONTAINS(t.title, "passed = seeds whose val.token_accuracy >= 0.9");
  // The threshold and metric are the table's: sequence accuracy at 0.45.
  TableOptions seq;
  seq.metric = "val.sequence_accuracy";
  seq.threshold = 0.45;
  const Table by_seq = seeds_table(s, seq);
  EXPECT_EQ(cell(by_seq, {"path", "1"}, "seq"), "0.400 0.475 0.300");
  EXPECT_EQ(cell(by_seq, {"path", "1"}, "passed"), "1/3");
  EXPECT_EQ(cell(by_seq, {"path", "1"}, "token best"), "0.950");
  // Error rate: lower is better, so best is the lowest and passing is <=.
  TableOptions err;
  err.metric = "val.error_rate";
  err.threshold = 0.05;
  const Table by_err = seeds_table(s, err);
  EXPECT_EQ(cell(by_err, {"path", "2"}, "error best"), "0.010");
  EXPECT_EQ(cell(by_err, {"path", "2"}, "passed"), "2/3");
}

// Under another metric than the study's, a depth the protocol skipped is not decided: it was not
// run (min_depth skipped it because a smaller depth reached the study's threshold).
// A cell that compared learning rates shows each rate's seeds on a row of its own, the chosen rate
// marked, so that the per-seed spread of a rate that lost stays on the page (and in the CSV).
TEST(SeedsTable, EveryLearningRateOnItsOwnRow) {
  std::vector<RunSpec> runs;
  for (double lr : {1e-3, 3e-4})
    for (int seed : {0, 1}) {
      RunSpec r;
      r.lr = lr, r.seed = seed, r.evals = {{"val", {lr == 1e-3 ? 0.6 + 0.1 * seed : 0.9 + 0.05 * seed}}};
      runs.push_back(r);
    }
  const Study s = load_study(write_sweep("seeds_lrs", runs).string());
  const Table t = seeds_table(s, {});
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(cell(t, {"path", "1", "16", "0.0003 (best)"}, "token"), "0.900 0.950");
  EXPECT_EQ(cell(t, {"path", "1", "16", "0.001"}, "token"), "0.600 0.700");
  EXPECT_EQ(cell(t, {"path", "1", "16", "0.001"}, "passed"), "0/2");
  EXPECT_CONTAINS(t.title, "a row per learning rate run");
  std::map<std::string, int> csv_rows_by_lr;  // lr is the fourth CSV column (no length keys here)
  for (const auto& row : t.csv_rows) ++csv_rows_by_lr[row.at(3)];
  EXPECT_EQ(csv_rows_by_lr, (std::map<std::string, int>{{"0.0003", 2}, {"0.001", 2}}));
}

TEST(SeedsTable, MinDepthOnAnotherMetricLeavesSkippedDepthsOpen) {
  std::vector<RunSpec> rs;
  for (int depth : {1, 2, 3})
    for (int seed : {0, 1}) {
      RunSpec r;
      r.depth = depth, r.seed = seed;
      r.evals = {{"val", {depth == 1 ? 0.5 : 0.92}}};  // sequence accuracy 0.46 at depth 2
      rs.push_back(r);
    }
  const fs::path dir = write_sweep("skipped_other_metric", rs, {}, "min_depth", "{\"threshold\": 0.9}");
  std::string manifest = read_file((dir / "manifest.json").string());
  for (int seed : {0, 1}) {  // depth 3 skipped: depth 2 reached 0.9 token accuracy
    RunSpec r = rs[static_cast<size_t>(4 + seed)];
    const std::string key = "{\"id\": \"" + cell_id(r) + "\", ";
    manifest.insert(manifest.find(key) + key.size(), "\"state\": \"skipped\", ");
    fs::remove_all(dir / "cells" / cell_id(r));
  }
  write_file_atomic((dir / "manifest.json").string(), manifest);
  const Study s = load_study(dir.string());
  EXPECT_EQ(row_of(min_depth_table(s, {}), {"path"}), (std::vector<std::string>{"path", "2 (2/2)"}));
  TableOptions seq;
  seq.metric = "val.sequence_accuracy";
  seq.threshold = 0.99;
  EXPECT_EQ(row_of(min_depth_table(s, seq), {"path"}), (std::vector<std::string>{"path", "?"}));  // not "> 3"
  seq.threshold = 0.4;
  EXPECT_EQ(row_of(min_depth_table(s, seq), {"path"}), (std::vector<std::string>{"path", "2 (2/2)"}));
}

// The CSV of every table, parsed as numbers: a block per table ("# title", header, rows).
struct Block {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  size_t col(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<size_t>(it - header.begin());
  }
};

std::map<std::string, Block> csv_blocks(const std::string& csv) {
  std::map<std::string, Block> out;
  Block* at = nullptr;  // the block being read; a blank line ends it
  for (const auto& rec : parse_csv(csv)) {
    if (rec.empty()) {
      at = nullptr;
    } else if (rec.size() == 1 && rec[0].rfind("# ", 0) == 0) {
      if (!at) at = &out[rec[0].substr(2, rec[0].find(':') - 2)];  // a title; later ones are notes
    } else if (at->header.empty()) {
      at->header = rec;
    } else {
      at->rows.push_back(rec);
    }
  }
  return out;
}

double number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  EXPECT_TRUE(!text.empty() && *end == '\0') << "not a number: '" << text << "'";
  return v;
}

TEST(TableCsv, NumbersInTheirOwnColumns) {
  const fs::path dir = write_sweep("csv_numbers", runs());
  const auto r = run_cli({"table", dir.string(), "--format", "csv", "--no-plots"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto blocks = csv_blocks(r.out);
  for (const auto& [title, block] : blocks)  // no "mean ± sd (n)" texts
    for (const auto& row : block.rows)
      for (const auto& field : row) EXPECT_EQ(field.find("±"), std::string::npos) << title << ": " << field;
  ASSERT_TRUE(blocks.count("Accuracy grid") && blocks.count("Seeds") && blocks.count("Minimum depth")) << r.out;

  const Block& grid = blocks.at("Accuracy grid");
  for (const char* c : {"n", "mean", "sd", "min", "max", "median", "best", "passed", "seed 0", "seed 1", "seed 2"}) grid.col(c);
  ASSERT_EQ(grid.rows.size(), 8u);  // 2 models x 2 depths x (token, sequence accuracy)
  for (const auto& row : grid.rows) {
    ASSERT_EQ(row.size(), grid.header.size());
    for (size_t c = grid.col("n"); c < row.size(); ++c)
      if (!row[c].empty()) number(row[c]);  // every statistic and seed value is a plain number
  }
  auto find = [&](const std::string& model, const std::string& depth, const std::string& field) {
    for (const auto& row : grid.rows)
      if (row[0] == model && row[1] == depth && row[grid.col("field")] == field) return row;
    ADD_FAILURE() << model << " " << depth << " " << field;
    return std::vector<std::string>(grid.header.size());
  };
  const auto path1 = find("path", "1", "token_accuracy");
  EXPECT_EQ(path1[grid.col("L")], "16");
  EXPECT_EQ(number(path1[grid.col("n")]), 3);
  EXPECT_NEAR(number(path1[grid.col("mean")]), (0.80 + 0.95 + 0.60) / 3, 1e-6);
  EXPECT_NEAR(number(path1[grid.col("sd")]), 0.175594, 1e-6);
  EXPECT_EQ(number(path1[grid.col("median")]), 0.8);
  EXPECT_EQ(number(path1[grid.col("best")]), 0.95);
  EXPECT_EQ(number(path1[grid.col("passed")]), 1);
  EXPECT_EQ(number(path1[grid.col("seed 2")]), 0.6);
  const auto rope1 = find("rope", "1", "token_accuracy");
  EXPECT_EQ(rope1[grid.col("seed 1")], "");  // diverged: no value
  EXPECT_EQ(number(rope1[grid.col("diverged")]), 1);
  EXPECT_EQ(number(rope1[grid.col("n")]), 2);
  EXPECT_EQ(find("path", "2", "sequence_accuracy")[grid.col("passed")], "");  // only the metric is tested
  EXPECT_NEAR(number(find("path", "2", "sequence_accuracy")[grid.col("mean")]), (0.97 + 0.99 + 0.91) / 6, 1e-6);

  const Block& seeds = blocks.at("Seeds");
  EXPECT_EQ(seeds.header, (std::vector<std::string>{"model", "depth", "L", "lr", "seed", "status", "token_accuracy",
                                                    "sequence_accuracy", "passed"}));
  ASSERT_EQ(seeds.rows.size(), 12u);
  for (const auto& row : seeds.rows)
    if (row[5] != "diverged") number(row[6]), number(row[7]), number(row[8]);
  EXPECT_EQ(seeds.rows[1], (std::vector<std::string>{"path", "1", "16", "0.0003", "1", "completed", "0.95", "0.475", "1"}));
  EXPECT_EQ(seeds.rows[7], (std::vector<std::string>{"rope", "1", "16", "0.0003", "1", "diverged", "", "", ""}));

  const Block& depth = blocks.at("Minimum depth");
  EXPECT_EQ(depth.header, (std::vector<std::string>{"model", "L", "min_depth", "answer", "passed", "runs"}));
  EXPECT_EQ(depth.rows[0], (std::vector<std::string>{"path", "16", "1", "1", "1", "3"}));  // the best seed decides
  EXPECT_EQ(depth.rows[1], (std::vector<std::string>{"rope", "16", "2", "2", "1", "3"}));
}

TEST(TableCsv, ErrorCountsAsNumbers) {
  std::vector<RunSpec> rs;
  for (int seed : {0, 1}) {
    RunSpec r;
    r.task = "flipflop", r.seed = seed;
    r.evals = {{"val", {1.0, 70000, 0}}, {"sparse", {0.9, 1000, 100 + seed}}};
    rs.push_back(r);
  }
  const fs::path dir = write_sweep("csv_errors", rs);
  const auto r = run_cli({"table", dir.string(), "--format", "csv", "--no-plots", "--tables", "errors"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto blocks = csv_blocks(r.out);
  const Block& errors = blocks.at("Error rates");
  EXPECT_EQ(errors.header, (std::vector<std::string>{"model", "depth", "L", "lr", "seeds", "key", "errors", "scored",
                                                     "error_rate", "ci95_lo", "ci95_hi", "runs", "diverged", "failed"}));
  ASSERT_EQ(errors.rows.size(), 2u);
  EXPECT_EQ(errors.rows[0][errors.col("errors")], "0");
  EXPECT_EQ(errors.rows[0][errors.col("scored")], "140000");
  EXPECT_EQ(number(errors.rows[0][errors.col("ci95_lo")]), 0);
  EXPECT_NEAR(number(errors.rows[0][errors.col("ci95_hi")]), 2.635e-5, 1e-8);  // 3.69 / 140000
  EXPECT_EQ(errors.rows[1][errors.col("errors")], "201");
  EXPECT_NEAR(number(errors.rows[1][errors.col("error_rate")]), 0.1005, 1e-9);
}

}  // namespace
}  // namespace sb::report
