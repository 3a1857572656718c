// test_tables_pooled.cpp: `statebench table A B ...` (report::load_studies): runs of several
// directories pooled into one study (a study and a later one that adds seeds), the refusals (a
// directory given twice, one table cell and seed in two directories), labels that keep studies of
// other step counts apart, the warning when the directories' protocols differ, and the CLI (no
// plots unless --plots).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "report/results.hpp"
#include "report/tables.hpp"
#include "tables_fixture.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;
using namespace tables_test;
using sb::test::run_cli;

// PaTH and RoPE at depth 2, length 32, seeds `seeds`; val token accuracy base + 0.1 seed.
std::vector<RunSpec> seed_runs(std::vector<int> seeds, double path_base, double rope_base) {
  std::vector<RunSpec> runs;
  for (const char* att : {"path", "rope"})
    for (int seed : seeds) {
      RunSpec r;
      r.attention = att, r.depth = 2, r.length = 32, r.seed = seed;
      r.evals = {{"val", {(att[0] == 'p' ? path_base : rope_base) + 0.1 * seed}}};
      runs.push_back(r);
    }
  return runs;
}

TEST(TablesPooled, SeedsFromSeveralDirectoriesAverageTogether) {
  const fs::path first = write_sweep("pool_first", seed_runs({0}, 0.5, 0.2));
  const fs::path more = write_sweep("pool_more", seed_runs({1, 2}, 0.5, 0.2));
  const Study s = load_studies({first.string(), more.string()});
  EXPECT_EQ(s.info.name, "pool_first + pool_more");
  EXPECT_EQ(s.info.protocol, "grid");
  ASSERT_EQ(s.runs.size(), 6u);
  EXPECT_EQ(s.models, (std::vector<std::string>{"path", "rope"}));  // one label per model across directories
  EXPECT_TRUE(s.warnings.empty());
  TableOptions o;
  o.tables = {"grid"};
  const auto tables = build_tables(s, o);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(cell(tables[0], {"path", "2"}, "L=32"), "0.600 ± 0.100 (3)");  // 0.5, 0.6, 0.7
  EXPECT_EQ(cell(tables[0], {"rope", "2"}, "L=32"), "0.300 ± 0.100 (3)");

  // One directory is load_study.
  EXPECT_EQ(load_studies({first.string()}).runs.size(), 2u);
}

TEST(TablesPooled, RefusesDoubleCountingAndWarnsOnDifferentProtocols) {
  const fs::path a = write_sweep("pool_a", seed_runs({0, 1}, 0.5, 0.2));
  const auto refused = [&](const fs::path& b, const std::string& why) {
    try {
      load_studies({a.string(), b.string()});
      ADD_FAILURE() << "pooled seed 1 of one cell twice: " << why;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("both seed 1 of path at depth 2, L = 32"), std::string::npos) << msg;
      EXPECT_NE(msg.find("count twice"), std::string::npos) << msg;
      EXPECT_NE(msg.find(why), std::string::npos) << msg;
      EXPECT_NE(msg.find((b / "cells").string()), std::string::npos) << msg;
    }
  };
  refused(write_sweep("pool_again", seed_runs({1}, 0.5, 0.2)), "(the same config)");
  // Seed 1 again under a config that differs where the labels do not look (another fingerprint).
  const fs::path other = write_sweep("pool_other", seed_runs({1}, 0.5, 0.2));
  for (const auto& e : fs::directory_iterator(other / "cells")) {
    const std::string f = (e.path() / "summary.json").string();
    std::string text = read_file(f);
    text.replace(text.find("\"config_fingerprint\": \""), 23, "\"config_fingerprint\": \"x");
    write_file_atomic(f, text);
  }
  refused(other, "differ in what the labels do not show");
  EXPECT_THROW(load_studies({a.string(), a.string()}), Error);                // given twice
  EXPECT_THROW(load_studies({a.string(), (a / "missing").string()}), Error);  // no such directory
  EXPECT_THROW(load_studies({}), Error);

  // Trained for other numbers of steps: other labels, so seed 1 is no repeat.
  std::vector<RunSpec> longer = seed_runs({1}, 0.8, 0.3);
  for (RunSpec& r : longer) r.target_steps = 300;
  const Study l = load_studies({a.string(), write_sweep("pool_longer", longer).string()});
  EXPECT_EQ(l.models, (std::vector<std::string>{"path (steps=100)", "rope (steps=100)", "path (steps=300)",
                                                "rope (steps=300)"}));

  const fs::path strict = write_sweep("pool_threshold", seed_runs({2}, 0.5, 0.2), {}, "grid", "{\"threshold\": 0.95}");
  const Study s = load_studies({a.string(), strict.string()});
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("threshold 0.95"), std::string::npos) << s.warnings[0];
  ASSERT_TRUE(s.info.threshold.has_value());
  EXPECT_DOUBLE_EQ(*s.info.threshold, 0.9);  // the first directory's
}

TEST(TablesPooledCli, PoolsAndWritesPlotsOnlyWhenAsked) {
  const fs::path first = write_sweep("pool_cli_first", seed_runs({0}, 0.5, 0.2));
  const fs::path more = write_sweep("pool_cli_more", seed_runs({1, 2}, 0.5, 0.2));
  const auto md = run_cli({"table", first.string(), more.string()});
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find("# pool_cli_first + pool_cli_more"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("0.600 ± 0.100 (3)"), std::string::npos) << md.out;
  EXPECT_NE(md.err.find("no plots"), std::string::npos) << md.err;
  EXPECT_FALSE(fs::exists(first / "plots"));
  EXPECT_FALSE(fs::exists(more / "plots"));

  const fs::path plots = scratch("pool_cli_plots");
  const auto with = run_cli({"table", first.string(), more.string(), "--plots", plots.string()});
  ASSERT_EQ(with.rc, 0) << with.err;
  EXPECT_TRUE(fs::exists(plots / "heatmap_models.svg"));  // one depth and length: one heatmap of all models

  const auto twice = run_cli({"table", first.string(), first.string()});
  EXPECT_EQ(twice.rc, 2);
  EXPECT_NE(twice.err.find("given twice"), std::string::npos) << twice.err;
  const auto missing = run_cli({"table", first.string(), (first / "nope").string()});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("no such directory"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace sb::report
