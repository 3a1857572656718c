// test_quick_runs.cpp: short runs of the shipped configs through the real binary. --set
// train.steps below the config's warm-up shortens the warm-up with a printed note (and the
// effective config says so) instead of failing; setting both wrongly names the key and a value to
// set. The progress line (plain mode: stderr is a file) prints its final line once, one ETA,
// and no loss before the first one is read.
#include "cli_run.hpp"
#include "test_util.hpp"

namespace sb::test {
namespace {

const std::string kQuickstart = std::string(SB_SOURCE_DIR) + "/experiments/configs/quickstart_base.yaml";

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(QuickRuns, ShortStepsShortenTheWarmupWithANote) {
  const fs::path dir = fresh_dir("quick_warmup");
  // quickstart_base.yaml warms up for 100 steps; a 30-step run keeps 3.
  const CliResult r = run_cli({"train", kQuickstart, "--set", "train.steps=30", "--set", "model.d_model=16",
                               "--set", "train.eval_examples=16", "--out", (dir / "run").string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_CONTAINS(r.err, "statebench: note: optim.warmup_steps 100 exceeds train.steps = 30; warm-up shortened to 3 steps");
  EXPECT_CONTAINS(read_file((dir / "run" / "config.yaml").string()), "warmup_steps: 3\n");

  // The progress line: one final line, at 30/30, with speed but no ETA once done, and no "nan".
  EXPECT_EQ(count(r.err, "train 100% 30/30 steps"), 1) << r.err;
  EXPECT_EQ(count(r.err, "nan"), 0) << r.err;
  EXPECT_EQ(count(r.err, "ETA"), 0) << r.err;
  for (const std::string& line : lines_of(r.err)) EXPECT_LE(count(line, " eta "), 1) << line;

  // --dry-run says the same; the note names how to choose the warm-up.
  const CliResult dry = run_cli({"train", kQuickstart, "--set", "train.steps=30", "--dry-run"});
  ASSERT_EQ(dry.rc, 0) << dry.err;
  EXPECT_CONTAINS(dry.err, "--set optim.warmup_steps=N to choose");
  EXPECT_CONTAINS(dry.out, "warmup_steps: 3\n");
}

TEST(QuickRuns, AnExplicitWarmupIsKeptOrNamed) {
  const CliResult ok = run_cli({"train", kQuickstart, "--set", "train.steps=30", "--set", "optim.warmup_steps=10", "--dry-run"});
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
  EXPECT_CONTAINS(ok.out, "warmup_steps: 10\n");
  const CliResult bad = run_cli({"train", kQuickstart, "--set", "train.steps=30", "--set", "optim.warmup_steps=50", "--dry-run"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_CONTAINS(bad.err, "optim.warmup_steps: 50 must be in [0, train.steps = 30] (e.g. --set optim.warmup_steps=3)");
}

TEST(QuickRuns, EarlyStopEndsTheProgressLineWhereItStopped) {
  const fs::path dir = fresh_dir("quick_early");
  // Parity of 4 bits reaches 50% token accuracy at once: stopped at the first evaluation (step 5).
  write_file_atomic((dir / "c.yaml").string(),
                    "task: {name: parity, params: {length: 4}}\n"
                    "model: {d_model: 8, n_layers: 1, n_heads: 2, attention: rope}\n"
                    "train: {steps: 50, batch_size: 4, log_every: 100, eval_every: 5, eval_examples: 8, "
                    "target_accuracy: 0.01, threads: 1}\n");
  const CliResult r = run_cli({"train", (dir / "c.yaml").string(), "--out", (dir / "run").string()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_CONTAINS(r.out, "early_stopped after 5 steps");
  EXPECT_EQ(count(r.err, "train  10% 5/50 steps"), 1) << r.err;  // not "100% 50/50"
  EXPECT_EQ(count(r.err, "100%"), 0) << r.err;
  EXPECT_EQ(count(r.err, "loss "), 1) << r.err;  // read at the evaluation step
}

}  // namespace
}  // namespace sb::test
