// test_tables_depth.cpp: the min-depth tables of `statebench table` on hand-written sweeps (the grid
// of tables_fixture.hpp): best and mean over seeds, undecided depths ("?"), "> d_max", depths the
// protocol skipped (deepest_first), the token-accuracy reading beside a sequence-accuracy rule, and
// one-depth studies without the table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "io/atomic_file.hpp"
#include "report/results.hpp"
#include "report/tables.hpp"
#include "tables_fixture.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;
using namespace tables_test;

TEST(Tables, MinDepthBestMeanAndUndecided) {
  const Study s = load_study(write_sweep("mindepth", grid_runs()).string());
  const Table best = min_depth_table(s, {});
  EXPECT_EQ(best.header, (std::vector<std::string>{"model", "L=16", "L=32"}));
  // d (k/n): k of the n seeds at depth d pass.
  EXPECT_EQ(row_of(best, {"path"}), (std::vector<std::string>{"path", "1 (1/2)", "2 (1/2)"}));  // 0.90 >= 0.9 counts
  EXPECT_EQ(row_of(best, {"rope"}), (std::vector<std::string>{"rope", "2 (1/2)", "> 2"}));
  TableOptions mean;
  mean.min_depth_over = "mean";
  const Table m = min_depth_table(s, mean);
  EXPECT_EQ(row_of(m, {"path"}), (std::vector<std::string>{"path", "2 (2/2)", "2 (1/2)"}));
  EXPECT_EQ(row_of(m, {"rope"}), (std::vector<std::string>{"rope", "> 2", "> 2"}));
  TableOptions lower;
  lower.threshold = 0.45;
  EXPECT_EQ(row_of(min_depth_table(s, lower), {"rope"}), (std::vector<std::string>{"rope", "1 (2/2)", "1 (1/2)"}));
  // Not all depths decided: a missing seed at depth 1 leaves the answer open.
  const Study open = load_study(write_sweep("mindepth_open", grid_runs(), {"rope_d1_L16_s0_lr0.0003", "rope_d1_L32_s1_lr0.0003"}).string());
  EXPECT_EQ(row_of(min_depth_table(open, {}), {"rope"}), (std::vector<std::string>{"rope", "? (<= 2)", "?"}));
  // The manifest's threshold is the default; a lower-is-better metric compares with <=.
  const Study t95 = load_study(write_sweep("mindepth_t95", grid_runs(), {}, "min_depth", "{\"threshold\": 0.95, \"metric\": \"val.token_accuracy\"}").string());
  EXPECT_EQ(row_of(min_depth_table(t95, {}), {"path"}), (std::vector<std::string>{"path", "2 (2/2)", "> 2"}));
  TableOptions err;
  err.metric = "val.error_rate";
  err.threshold = 0.1;
  EXPECT_EQ(row_of(min_depth_table(s, err), {"path"}), (std::vector<std::string>{"path", "1 (1/2)", "2 (1/2)"}));
  // On sequence accuracy (half the token accuracy here) at 0.46: path passes at depth 2.
  TableOptions seq;
  seq.metric = "val.sequence_accuracy";
  seq.threshold = 0.46;
  EXPECT_EQ(row_of(min_depth_table(s, seq), {"path"}), (std::vector<std::string>{"path", "2 (2/2)", "2 (1/2)"}));
  const Table csv = min_depth_table(s, {});
  EXPECT_EQ(csv.csv_header, (std::vector<std::string>{"model", "L", "min_depth", "answer", "passed", "runs"}));
  EXPECT_EQ(csv.csv_rows[0], (std::vector<std::string>{"path", "16", "1", "1", "1", "2"}));
  EXPECT_EQ(csv.csv_rows[3], (std::vector<std::string>{"rope", "32", "", "> 2", "", ""}));
}

// min_depth order deepest_first: depths skipped below a deepest depth that fails are failures (the
// protocol's reading); below one that passes they stay undecided.
TEST(Tables, MinDepthSkippedBelowAFailingDeeperDepthFails) {
  const std::vector<std::string> skipped = {"rope_d1_L16_s0_lr0.0003", "rope_d1_L16_s1_lr0.0003", "rope_d1_L32_s0_lr0.0003",
                                            "rope_d1_L32_s1_lr0.0003"};
  const fs::path dir = write_sweep("deepest_first", grid_runs(), skipped, "min_depth");
  const fs::path manifest = dir / "manifest.json";
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string& id : skipped) {
    const std::string key = "{\"id\": \"" + id + "\", ";
    const size_t at = text.find(key);
    ASSERT_NE(at, std::string::npos) << id;
    text.insert(at + key.size(), "\"state\": \"skipped\", ");
  }
  write_file_atomic(manifest.string(), text);
  const Study s = load_study(dir.string());
  // rope depth 2: L=16 passes (0.93), L=32 fails (0.70): "?" below a pass, "> 2" below a failure.
  EXPECT_EQ(row_of(min_depth_table(s, {}), {"rope"}), (std::vector<std::string>{"rope", "? (<= 2)", "> 2"}));
  // Under a threshold depth 2 passes at L=32 too, the skipped depth 1 stays undecided there.
  TableOptions lower;
  lower.threshold = 0.65;
  EXPECT_EQ(row_of(min_depth_table(s, lower), {"rope"}), (std::vector<std::string>{"rope", "? (<= 2)", "? (<= 2)"}));
}

// A depth study on sequence accuracy (the Merrill studies) also gets its token reading at 0.9.
TEST(Tables, SequenceDepthStudyHasTheTokenReadingBesideIt) {
  const Study s = load_study(write_sweep("mindepth_seq", grid_runs(), {}, "min_depth",
                                         "{\"threshold\": 0.46, \"metric\": \"val.sequence_accuracy\"}").string());
  const std::vector<Table> tables = build_tables(s, {});
  std::vector<std::string> ids;
  for (const Table& t : tables) ids.push_back(t.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"grid", "seeds", "min-depth", "min-depth-token", "length"}));
  const Table& seq = tables[2];
  const Table& token = tables[3];
  EXPECT_NE(seq.title.find("val.sequence_accuracy >= 0.46"), std::string::npos) << seq.title;
  EXPECT_NE(token.title.find("val.token_accuracy >= 0.9"), std::string::npos) << token.title;
  EXPECT_EQ(row_of(seq, {"path"}), (std::vector<std::string>{"path", "2 (2/2)", "2 (1/2)"}));
  // Token: path depth 1 at L 16 has 0.80 / 0.90 (the best passes); at L 32 depth 1 fails (0.70 /
  // 0.80) and depth 2 has 0.88 / 0.94.
  EXPECT_EQ(row_of(token, {"path"}), (std::vector<std::string>{"path", "1 (1/2)", "2 (1/2)"}));
  EXPECT_EQ(row_of(token, {"rope"}), (std::vector<std::string>{"rope", "2 (1/2)", "> 2"}));
  // Not where each word has one label (token = sequence accuracy: the identity-label studies).
  std::vector<RunSpec> one_label = grid_runs();
  for (RunSpec& r : one_label) {
    const double a = r.evals.front().second.acc;
    r.evals = {{"val", {a, 1000, -1, std::nullopt, a}}};
  }
  const Study id = load_study(write_sweep("mindepth_id", one_label, {}, "min_depth",
                                          "{\"threshold\": 0.9, \"metric\": \"val.sequence_accuracy\"}").string());
  for (const Table& t : build_tables(id, {})) EXPECT_NE(t.id, "min-depth-token");
  // Not on a token-accuracy study, and by name on request.
  const Study tok = load_study(write_sweep("mindepth_tok", grid_runs(), {}, "min_depth").string());
  for (const Table& t : build_tables(tok, {})) EXPECT_NE(t.id, "min-depth-token");
  TableOptions only;
  only.tables = {"min-depth-token"};
  EXPECT_EQ(build_tables(s, only).front().id, "min-depth-token");
}

// With one depth the min-depth table would only repeat the grid: not made unless asked for.
TEST(Tables, OneDepthStudiesGetNoMinDepthTableByDefault) {
  std::vector<RunSpec> runs;
  for (const RunSpec& r : grid_runs())
    if (r.depth == 1) runs.push_back(r);
  const Study s = load_study(write_sweep("one_depth", runs).string());
  std::vector<std::string> ids;
  for (const Table& x : build_tables(s, {})) ids.push_back(x.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"grid", "seeds", "length"}));
  TableOptions asked;
  asked.tables = {"min-depth"};
  EXPECT_EQ(build_tables(s, asked).front().id, "min-depth");
}

}  // namespace
}  // namespace sb::report
