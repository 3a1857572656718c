// test_tables_curves.cpp: `statebench table --curves DIR` through the real binary: learning curves
// (loss and accuracy against step, a line per seed) from a live sweep's cells/*/metrics.jsonl, the
// same figures from the study's curves.jsonl.gz (tools/curves.sh pack, which thins long training
// logs) and from a committed study; bad curve files and studies without curves are one-line
// errors; errors name what the user gave, also for a study whose cells all failed; and --at-step
// tables each run as it stood at one step.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "io/atomic_file.hpp"
#include "tables_fixture.hpp"
#include "test_util.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;
using namespace tables_test;
using sb::test::run_cli;

std::vector<RunSpec> runs() {
  std::vector<RunSpec> out;
  for (const char* att : {"path", "rope"})
    for (int seed : {0, 1}) {
      RunSpec r;
      r.attention = att, r.seed = seed;
      r.evals = {{"val", {att[0] == 'p' ? 0.95 : 0.6}}};
      out.push_back(r);
    }
  return out;
}

// metrics.jsonl of a run: train lines every 10 steps to 100 (loss falling from 2), evals every 50.
std::string metrics(double final_acc) {
  std::string text;
  for (int step = 10; step <= 100; step += 10) {
    text += fmt::format(R"({{"kind":"train","step":{},"loss":{},"lr":0.001,"grad_norm":1.5,"tokens_per_s":1234.5,"elapsed_s":0.5}})",
                        step, 2.0 / step * 10) + "\n";
    if (step % 50 == 0)
      text += fmt::format(R"({{"kind":"eval","step":{},"eval":{{"val":{{"token_accuracy":{},"sequence_accuracy":{}}}}}}})", step,
                          final_acc * step / 100, final_acc * step / 200) + "\n";
  }
  return text;
}

fs::path sweep_with_curves(const std::string& name) {
  const fs::path dir = write_sweep(name, runs());
  for (const RunSpec& r : runs())
    write_file_atomic((dir / "cells" / cell_id(r) / "metrics.jsonl").string(), metrics(r.evals[0].second.acc));
  return dir;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TableCurves, OneFigurePerCellWithALinePerSeed) {
  const fs::path dir = sweep_with_curves("curves_live"), out = dir / "curves";
  const auto r = run_cli({"table", dir.string(), "--no-plots", "--curves", out.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_CONTAINS(r.err, "wrote 2 learning-curve plots to " + out.string());
  ASSERT_EQ(files_in(out), (std::vector<std::string>{"curves_path_d1_L16.svg", "curves_rope_d1_L16.svg"}));
  const std::string svg = read_file((out / "curves_path_d1_L16.svg").string());
  EXPECT_CONTAINS(svg, ">path, depth 1, L=16: training loss</text>");
  EXPECT_CONTAINS(svg, ">path, depth 1, L=16: val accuracy</text>");
  EXPECT_EQ(count(svg, ">seed 0</text>"), 2u);  // in both legends
  EXPECT_EQ(count(svg, ">seed 1</text>"), 2u);
  EXPECT_EQ(count(svg, ">seed 0 seq</text>"), 1u);
  EXPECT_EQ(count(svg, ">seed 1 seq</text>"), 1u);
  // Per seed: one loss line (10 points), one token and one dashed sequence accuracy line (2 points).
  EXPECT_EQ(count(svg, "<polyline "), 6u);
  EXPECT_EQ(count(svg, "<polyline points=\""), 6u);
  EXPECT_EQ(count(svg, "stroke-dasharray=\"6 4\"/>"), 2u + 2u);  // the seq lines and their legend keys
  // The loss axis ends at a round number above the highest loss (2), the step axis at 100.
  EXPECT_CONTAINS(svg, ">2</text>");
  EXPECT_CONTAINS(svg, ">100</text>");
}

TEST(TableCurves, FromTheStudysPackedCurvesAsFromItsCells) {
  const fs::path dir = sweep_with_curves("curves_packed"), live = dir / "live", packed = dir / "packed";
  ASSERT_EQ(run_cli({"table", dir.string(), "--no-plots", "--curves", live.string()}).rc, 0);
  const std::string script = std::string(SB_SOURCE_DIR) + "/tools/curves.sh";
  ASSERT_EQ(std::system(("bash '" + script + "' pack '" + dir.string() + "' '" + (dir / "curves.jsonl.gz").string() +
                         "' 2> /dev/null").c_str()),
            0);
  for (const RunSpec& r : runs()) fs::remove(dir / "cells" / cell_id(r) / "metrics.jsonl");
  const auto r = run_cli({"table", dir.string(), "--no-plots", "--curves", packed.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(files_in(packed), files_in(live));
  for (const auto& f : files_in(live))  // 6 significant digits in the file: the same figure to 0.1 px
    EXPECT_EQ(read_file((packed / f).string()), read_file((live / f).string())) << f;
}

// A cell that logged more than 100 training lines is packed with every k-th of them (k = ceil(n /
// 100)) and its last, every evaluation kept: 250 train lines -> every 3rd, 84 lines, steps 1 .. 250.
TEST(TableCurves, PackKeepsEveryEvaluationAndAboutAHundredTrainingLines) {
  const fs::path dir = sb::test::fresh_dir("curves_thinned"), cell = dir / "cells" / "long-0123abcd";
  std::string text;
  for (int step = 1; step <= 250; ++step) {
    text += fmt::format(R"({{"kind":"train","step":{},"loss":0.5}})", step) + "\n";
    if (step % 25 == 0) text += fmt::format(R"({{"kind":"eval","step":{},"eval":{{"val":{{"token_accuracy":0.5}}}}}})", step) + "\n";
  }
  fs::create_directories(cell);
  write_file_atomic((cell / "metrics.jsonl").string(), text);
  const std::string script = std::string(SB_SOURCE_DIR) + "/tools/curves.sh";
  const fs::path packed = dir / "curves.jsonl.gz", out = dir / "unpacked";
  ASSERT_EQ(std::system(("bash '" + script + "' pack '" + dir.string() + "' '" + packed.string() + "' 2> /dev/null && bash '" +
                         script + "' unpack '" + packed.string() + "' '" + out.string() + "'").c_str()),
            0);
  const std::string back = read_file((out / "cells" / "long-0123abcd" / "metrics.jsonl").string());
  EXPECT_EQ(count(back, "\"kind\":\"eval\""), 10u);
  EXPECT_EQ(count(back, "\"kind\":\"train\""), 84u);
  EXPECT_CONTAINS(back, "{\"kind\":\"train\",\"step\":1,");
  EXPECT_CONTAINS(back, "{\"kind\":\"train\",\"step\":4,");
  EXPECT_EQ(back.find("{\"kind\":\"train\",\"step\":2,"), std::string::npos);
  EXPECT_CONTAINS(back, "{\"kind\":\"train\",\"step\":250,");
}

TEST(TableCurves, ACommittedStudysCurves) {
  const fs::path out = sb::test::fresh_dir("curves_committed");
  const auto r = run_cli({"table", std::string(SB_SOURCE_DIR) + "/results/fflm/fflm", "--no-plots", "--curves", out.string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(files_in(out), (std::vector<std::string>{"curves_fox_d1_L512.svg", "curves_path_d1_L512.svg",
                                                     "curves_path_fox_d1_L512.svg", "curves_rope_d1_L512.svg"}));
  // 3 seeds: a loss line each; one evaluation (at the end): a dot each for token and sequence accuracy.
  const std::string svg = read_file((out / "curves_rope_d1_L512.svg").string());
  EXPECT_EQ(count(svg, "<polyline "), 3u);
  EXPECT_EQ(count(svg, "<circle "), 6u);
}

TEST(TableCurves, ErrorsNameTheInput) {
  const fs::path dir = write_sweep("curves_none", runs());
  const auto none = run_cli({"table", dir.string(), "--no-plots", "--curves", (dir / "c").string()});
  EXPECT_EQ(none.rc, 2);
  EXPECT_CONTAINS(none.err, fmt::format("no learning curves in '{}' (neither cells/*/metrics.jsonl nor curves.jsonl.gz)",
                                        dir.string()));
  const fs::path bad = sweep_with_curves("curves_bad");
  const fs::path file = bad / "cells" / cell_id(runs()[1]) / "metrics.jsonl";
  write_file_atomic(file.string(), metrics(0.9) + "{\"kind\": \"train\", \"step\": \n");
  const auto corrupt = run_cli({"table", bad.string(), "--no-plots", "--curves", (bad / "c").string()});
  EXPECT_EQ(corrupt.rc, 2);
  EXPECT_CONTAINS(corrupt.err, fmt::format("'{}' line 13: not valid JSON", file.string()));
  EXPECT_EQ(std::count(corrupt.err.begin(), corrupt.err.end(), '\n'), 1) << corrupt.err;
}

// Every cell failed: the tables show "fail" where a value would be and name the runs; asking for an
// eval key names the option and says why there is none (it used to be "--keys: no run has eval key
// 'val'" without any --keys given).
// --at-step N: each run's last evaluation at or before step N from its curve (evals at 50 and 100 of
// 100 steps: 0.5 and 1.0 of the final accuracy); a run with no curve, or none by then, has no value;
// at the last step the summaries themselves; an unfinished run that got past N counts.
TEST(TableCurves, AtStepTakesEachRunsLastEvaluationByThen) {
  const fs::path dir = sweep_with_curves("curves_at_step");
  const auto at = [&](const std::string& step) {
    return run_cli({"table", dir.string(), "--no-plots", "--tables", "grid", "--at-step", step});
  };
  const auto mid = at("60");
  ASSERT_EQ(mid.rc, 0) << mid.err;
  EXPECT_CONTAINS(mid.out, "# curves_at_step (at step 60)");
  EXPECT_CONTAINS(mid.out, "| path  | 1     | 0.475 ± 0.000 (2) |");
  EXPECT_CONTAINS(mid.out, "| rope  | 1     | 0.300 ± 0.000 (2) |");
  const auto end = at("100");
  ASSERT_EQ(end.rc, 0) << end.err;
  EXPECT_CONTAINS(end.out, "| path  | 1     | 0.950 ± 0.000 (2) |");
  RunSpec rope1 = runs()[3];
  fs::remove(dir / "cells" / cell_id(rope1) / "metrics.jsonl");  // no curve: no value at step 60
  fs::remove(dir / "cells" / cell_id(runs()[0]) / "summary.json");  // unfinished, its curve past step 60
  const auto cut = at("60");
  ASSERT_EQ(cut.rc, 0) << cut.err;
  EXPECT_CONTAINS(cut.out, "| path  | 1     | 0.475 ± 0.000 (2) |");
  EXPECT_CONTAINS(cut.out, "| rope  | 1     | 0.300 (1)         |");
  EXPECT_CONTAINS(cut.err, "rope, depth 1, L = 16, seed 1): unfinished: no learning curve to read step 60 from");
  const auto past = at("150");  // the unfinished run's curve ends at step 100
  ASSERT_EQ(past.rc, 0) << past.err;
  EXPECT_CONTAINS(past.out, "| path  | 1     | 0.950 (1)         |");
  EXPECT_CONTAINS(past.err, "path, depth 1, L = 16, seed 0): unfinished: stopped at step 100, before step 150");
  const auto early = at("20");  // no evaluation by step 20
  EXPECT_EQ(early.rc, 2);
  EXPECT_CONTAINS(early.err, "has an evaluation at or before step 20");
  EXPECT_EQ(at("0").rc, 2);
}

TEST(TableCurves, AStudyWhoseCellsAllFailed) {
  std::vector<RunSpec> failed = runs();
  for (RunSpec& r : failed) r.status = "failed", r.evals.clear();
  const fs::path dir = write_sweep("all_failed", failed);
  const auto r = run_cli({"table", dir.string(), "--no-plots"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_CONTAINS(r.out, "4 runs (protocol grid): 4 failed.");
  EXPECT_CONTAINS(r.out, "| path  | 1     | fail |");
  EXPECT_CONTAINS(r.err, "warning: not used: " + cell_id(failed[0]) + " (path, depth 1, L = 16, seed 0): failed");
  const auto keys = run_cli({"table", dir.string(), "--no-plots", "--keys", "val"});
  EXPECT_EQ(keys.rc, 2);
  EXPECT_CONTAINS(keys.err, "--keys val: no run has eval key 'val' (no run has an evaluation: 4 runs: 4 failed)");
  const auto csv = run_cli({"table", dir.string(), "--no-plots", "--format", "csv"});
  EXPECT_EQ(csv.rc, 0) << csv.err;
  const fs::path ok = write_sweep("metric_input", runs());
  const auto metric = run_cli({"table", ok.string(), "--no-plots", "--metric", "test.token_accuracy"});
  EXPECT_EQ(metric.rc, 2);
  EXPECT_CONTAINS(metric.err, "--metric test.token_accuracy: no run has eval key 'test' (keys: val)");
}

}  // namespace
}  // namespace sb::report
