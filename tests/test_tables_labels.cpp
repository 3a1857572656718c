// test_tables_labels.cpp: how `statebench table` names models and columns: settings bound to the
// length (a sweep zip axis) label the L columns instead of the models, settings that vary within a
// length stay in the label, bookkeeping keys never split a row, and cells without results (skipped
// by a staged protocol, missing) take the derived settings of their finished siblings.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
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

// A sweep `zip:` axis as in experiments/mqar.yaml: num_kv_pairs goes with the length (L=16: 4,
// L=32: 8) while d_model is crossed with both; one run per cell, val = 0.9 + length / 1000.
std::vector<RunSpec> zipped_runs() {
  std::vector<RunSpec> runs;
  for (const char* att : {"path", "rope"})
    for (int d_model : {64, 128})
      for (int length : {16, 32}) {
        RunSpec r;
        r.attention = att, r.d_model = d_model, r.length = length;
        r.params = {{"num_kv_pairs", fmt::format("{}", length / 4)}};
        r.evals = {{"val", {0.9 + length / 1000.0}}};
        runs.push_back(r);
      }
  return runs;
}

TEST(Tables, LengthBoundSettingLabelsTheColumnNotTheModel) {
  const Study s = load_study(write_sweep("zip", zipped_runs()).string());
  EXPECT_EQ(s.length_keys, (std::vector<std::string>{"task.params.num_kv_pairs"}));
  EXPECT_EQ(s.models, (std::vector<std::string>{"path (d_model=64)", "path (d_model=128)", "rope (d_model=64)", "rope (d_model=128)"}));
  const std::vector<std::string> columns{"L=16 (num_kv_pairs=4)", "L=32 (num_kv_pairs=8)"};
  const Table grid = accuracy_grid(s, {});
  EXPECT_EQ(grid.header, (std::vector<std::string>{"model", "depth", columns[0], columns[0] + " seq", columns[1], columns[1] + " seq"}));
  ASSERT_EQ(grid.rows.size(), 4u);  // a compact 4 x 2 grid, not a diagonal of 8 rows
  for (const auto& row : grid.rows) EXPECT_TRUE(row[2] != "-" && row[4] != "-") << row[0];
  EXPECT_EQ(cell(grid, {"rope (d_model=128)", "1"}, columns[1]), "0.932 (1)");
  ASSERT_FALSE(grid.notes.empty());
  EXPECT_EQ(grid.notes.back(), "num_kv_pairs takes one value per train length, so it is shown with L, not in the model label");
  const Table md = min_depth_table(s, {});
  EXPECT_EQ(md.header, (std::vector<std::string>{"model", columns[0], columns[1]}));
  EXPECT_EQ(row_of(md, {"path (d_model=128)"}), (std::vector<std::string>{"path (d_model=128)", "1 (1/1)", "1 (1/1)"}));
  // CSV: every table's numeric form has a num_kv_pairs column after L.
  EXPECT_NE(render_csv({grid}).find("\nmodel,depth,L,num_kv_pairs,lr,key,field,n,mean,"), std::string::npos);
  EXPECT_NE(render_csv({grid}).find("\nrope (d_model=128),1,32,8,0.0003,val,token_accuracy,1,0.932,"), std::string::npos);
  TableOptions all;
  all.tables = {"runs", "errors"};
  const std::vector<Table> listed = build_tables(s, all);
  EXPECT_EQ(cell(listed[0], {"rope_d1_L32_s0_lr0.0003_dm128_8"}, "num_kv_pairs"), "8");
  EXPECT_EQ(cell(listed[0], {"rope_d1_L32_s0_lr0.0003_dm128_8"}, "steps"), "100");  // summary.json "steps"
  EXPECT_EQ(cell(listed[1], {"path (d_model=64)", "16"}, "num_kv_pairs"), "4");
  // Two settings bound to the length: both in the header, which CSV quotes and parses back.
  std::vector<RunSpec> two = zipped_runs();
  for (RunSpec& r : two) r.params.push_back({"vocab", fmt::format("{}", 2 * r.length)});
  const Table grid2 = accuracy_grid(load_study(write_sweep("zip2", two).string()), {});
  EXPECT_EQ(grid2.header[4], "L=32 (num_kv_pairs=8, vocab=64)");
  const auto records = parse_csv(render_csv({grid2}));
  ASSERT_GE(records.size(), 2u);
  EXPECT_EQ(records[1], grid2.csv_header);
  EXPECT_EQ(std::vector<std::string>(records[1].begin(), records[1].begin() + 6),
            (std::vector<std::string>{"model", "depth", "L", "num_kv_pairs", "vocab", "lr"}));
}

TEST(Tables, SettingThatVariesWithinALengthStaysInTheLabel) {
  // A grid axis crossed with the length: num_kv_pairs 4 and 8 at both lengths.
  std::vector<RunSpec> crossed;
  for (int length : {16, 32})
    for (const char* kv : {"4", "8"}) {
      RunSpec r;
      r.length = length, r.params = {{"num_kv_pairs", kv}}, r.evals = {{"val", {0.95}}};
      crossed.push_back(r);
    }
  const Study a = load_study(write_sweep("crossed", crossed).string());
  EXPECT_TRUE(a.length_keys.empty());
  EXPECT_EQ(a.models, (std::vector<std::string>{"path (num_kv_pairs=4)", "path (num_kv_pairs=8)"}));
  EXPECT_EQ(accuracy_grid(a, {}).header, (std::vector<std::string>{"model", "depth", "L=16", "L=16 seq", "L=32", "L=32 seq"}));
  // One value at L=16 but two at L=32 (rope's runs use 16): not a function of the length either.
  std::vector<RunSpec> partial = zipped_runs();
  for (RunSpec& r : partial)
    if (r.attention == "rope" && r.length == 32) r.params = {{"num_kv_pairs", "16"}};
  const Study b = load_study(write_sweep("partial", partial).string());
  EXPECT_TRUE(b.length_keys.empty());
  EXPECT_EQ(b.models.size(), 8u);
  const Table grid = accuracy_grid(b, {});
  EXPECT_EQ(grid.header, (std::vector<std::string>{"model", "depth", "L=16", "L=16 seq", "L=32", "L=32 seq"}));
  EXPECT_EQ(cell(grid, {"rope (d_model=64, num_kv_pairs=16)", "1"}, "L=16"), "-");
  EXPECT_EQ(cell(grid, {"rope (d_model=64, num_kv_pairs=16)", "1"}, "L=32"), "0.932 (1)");
  // A run of unknown length that has the setting: nothing ties it to a column, so it stays.
  const fs::path dir = scratch("unknown_length");
  for (const RunSpec& r : zipped_runs()) write_run(dir / cell_id(r), r);
  fs::create_directories(dir / "pending");
  write_file_atomic((dir / "pending" / "config.yaml").string(), "task:\n  params: {num_kv_pairs: 4}\nmodel:\n  attention: path\n");
  EXPECT_TRUE(load_study(dir.string()).length_keys.empty());
}

// max_lr with stop_at: a cell's later learning rates are skipped, so only their manifest overrides
// are known; the finished runs' summaries add head_dim. Both must land on one row per model.
TEST(Tables, CellsWithoutResultsTakeTheDerivedSettingsOfTheirSiblings) {
  std::vector<RunSpec> runs;
  std::vector<std::string> skip;
  for (int d_model : {64, 128, 256})
    for (double lr : {3e-4, 1e-3}) {
      RunSpec r;
      r.d_model = d_model, r.head_dim = d_model / 2, r.lr = lr, r.evals = {{"val", {0.95}}};
      if (lr == 1e-3 || d_model == 256) skip.push_back(cell_id(r));  // d_model 256: no finished run at all
      runs.push_back(r);
    }
  const Study s = load_study(write_sweep("derived", runs, skip).string());
  EXPECT_EQ(s.models, (std::vector<std::string>{"path (d_model=64, head_dim=32)", "path (d_model=128, head_dim=64)",
                                                "path (d_model=256)"}));
  const Table grid = accuracy_grid(s, {});
  ASSERT_EQ(grid.rows.size(), 3u);
  EXPECT_EQ(cell(grid, {"path (d_model=128, head_dim=64)", "1"}, "L=16"), "0.950 (1) lr=0.0003");
  EXPECT_EQ(cell(grid, {"path (d_model=256)", "1"}, "L=16"), "-");
}

}  // namespace
}  // namespace sb::report

// Evaluation and bookkeeping keys (a zip over task.eval, eval sizes, threads) never split a model's
// row: only settings that change what is trained do.
TEST(Tables, BookkeepingKeysAreNotModelSettings) {
  sb::report::RunRecord r;
  sb::report::apply_setting(r, "task.eval", "[{split: val}, {split: val, length: 32}]");
  sb::report::apply_setting(r, "task.eval.0.length", "32");
  sb::report::apply_setting(r, "train.eval_examples", "64");
  sb::report::apply_setting(r, "train.threads", "1");
  EXPECT_TRUE(r.settings.empty());
  sb::report::apply_setting(r, "model.d_model", "128");
  EXPECT_EQ(r.settings.size(), 1u);
}
