// test_sweep_plan.cpp: study parsing and its errors, grid/zip expansion with overrides applied and
// every cell validated, stable cell ids, summary.json reading, and the protocol scheduler
// (min_depth's depth-by-depth decisions and skips, restore/settle on resume).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <set>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "sweep/plan.hpp"
#include "sweep/study.hpp"
#include "tasks/registry.hpp"
#include "test_util.hpp"

namespace sb::sweep {
namespace {

namespace fs = std::filesystem;

const char* kInlineBase =
    "config:\n"
    "  task: {name: parity, params: {length: 16}}\n"
    "  model: {d_model: 32, n_heads: 2}\n"
    "  train: {steps: 100, batch_size: 8}\n";

Study study(const std::string& body) { return parse_study(std::string(kInlineBase) + body, "s.yaml", ""); }
Plan plan_of(const std::string& body, const TaskCheck& check = {}) { return make_plan(study(body), check); }
std::string plan_error(const std::string& body, const TaskCheck& check = {}) {
  return error_of([&] { plan_of(body, check); });
}

TEST(SweepStudy, GridProductOrderAndOverridesApplied) {
  const Plan p = plan_of(
      "name: t\n"
      "set: {train.steps: 50, optim.lr: 1e-3}\n"
      "grid:\n"
      "  model.attention: [path, rope]\n"
      "  model.n_layers: [1, 2, 3]\n"
      "  train.seed: [0, 7]\n");
  ASSERT_EQ(p.cells.size(), 12u);
  EXPECT_EQ(p.study.name, "t");
  EXPECT_EQ(p.study.protocol, Protocol::grid);
  // First grid axis slowest, last fastest.
  EXPECT_EQ(p.cells[0].label(), "attention=path,n_layers=1,seed=0");
  EXPECT_EQ(p.cells[1].label(), "attention=path,n_layers=1,seed=7");
  EXPECT_EQ(p.cells[2].label(), "attention=path,n_layers=2,seed=0");
  EXPECT_EQ(p.cells[11].label(), "attention=rope,n_layers=3,seed=7");
  std::set<std::string> combos;
  for (const auto& c : p.cells) {
    EXPECT_EQ(c.config.train.steps, 50);  // `set` reaches every cell
    EXPECT_DOUBLE_EQ(c.config.optim.lr, 1e-3);
    EXPECT_EQ(c.config.task.params.at("length"), "16");  // the base config underneath
    EXPECT_EQ(to_string(c.config.model.attention), c.value("model.attention")->label);
    EXPECT_EQ(std::to_string(c.config.model.n_layers), c.value("model.n_layers")->label);
    EXPECT_EQ(std::to_string(c.config.train.seed), c.value("train.seed")->label);
    EXPECT_EQ(c.overrides().size(), 3u);
    EXPECT_EQ(c.dir, "cells/" + c.id);
    combos.insert(c.label());
  }
  EXPECT_EQ(combos.size(), 12u);
}

TEST(SweepStudy, ZipVariesTogetherTimesGrid) {
  const Plan p = plan_of(
      "grid: {model.attention: [path, nope]}\n"
      "zip:\n"
      "  task.params.length: [8, 16, 32]\n"
      "  task.eval: [[{split: val, length: 8}], [{split: val, length: 16}], [{split: val, length: 32}]]\n");
  ASSERT_EQ(p.cells.size(), 6u);
  for (const auto& c : p.cells) {
    ASSERT_EQ(c.config.task.eval.size(), 1u);
    EXPECT_EQ(std::to_string(c.config.task.eval[0].length), c.config.task.params.at("length"));
  }
  EXPECT_EQ(p.cells[0].config.task.params.at("length"), "8");  // zip index fastest
  EXPECT_EQ(p.cells[2].config.task.params.at("length"), "32");
  EXPECT_EQ(p.cells[3].config.model.attention, Attention::nope);
  EXPECT_EQ(p.cells[3].value("task.eval")->text, "[{split: val, length: 8}]");
}

TEST(SweepStudy, BaseFileRelativeToTheStudy) {
  const fs::path dir = fs::path(SB_TEST_TMP) / "sweep_plan_base";
  fs::create_directories(dir / "sub");
  write_file_atomic((dir / "sub" / "base.yaml").string(), "task: {name: parity, params: {length: 12}}\n");
  write_file_atomic((dir / "study.yaml").string(), "base: sub/base.yaml\ngrid: {train.seed: [1, 2]}\n");
  const Study s = load_study((dir / "study.yaml").string());
  EXPECT_EQ(s.name, "study");  // the file's stem
  EXPECT_EQ(fs::path(s.base_file), (dir / "sub" / "base.yaml").lexically_normal());
  const Plan p = make_plan(s);
  ASSERT_EQ(p.cells.size(), 2u);
  EXPECT_EQ(p.cells[1].config.task.params.at("length"), "12");
  EXPECT_EQ(p.cells[1].config.train.seed, 2u);
}

TEST(SweepStudy, CellIdsAreStableReadableAndDistinct) {
  const std::string body = "grid:\n  model.attention: [path, rope]\n  task.params.length: [16, 64]\n";
  const Plan a = plan_of(body), b = plan_of(body);
  ASSERT_EQ(a.cells.size(), 4u);
  std::set<std::string> ids;
  for (size_t i = 0; i < a.cells.size(); ++i) {
    EXPECT_EQ(a.cells[i].id, b.cells[i].id);
    ids.insert(a.cells[i].id);
  }
  EXPECT_EQ(ids.size(), 4u);
  const std::string& id = a.cells[0].id;
  EXPECT_EQ(id.rfind("attention=path,length=16-", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("attention=path,length=16-").size() + 8);
  // The hash is over the sorted key=value texts: axis order changes the slug, not the hash.
  const Plan swapped = plan_of("grid:\n  task.params.length: [16, 64]\n  model.attention: [path, rope]\n");
  EXPECT_EQ(swapped.cells[0].id.substr(swapped.cells[0].id.size() - 8), id.substr(id.size() - 8));
  // Another value, another id; the same value in another study, the same id.
  EXPECT_NE(plan_of("grid:\n  model.attention: [path]\n  task.params.length: [17]\n").cells[0].id, id);
  EXPECT_EQ(plan_of("set: {train.steps: 7}\ngrid:\n  model.attention: [path]\n  task.params.length: [16]\n").cells[0].id, id);
}

TEST(SweepStudy, SlugsAreFilesystemSafeAndDisambiguated) {
  const std::string id = cell_id({{"task.params.length", {"8", "8"}},
                                  {"task.eval.0.length", {"16", "16"}},
                                  {"model.layers", {"[path, rope]", "[path, rope]"}}});
  EXPECT_EQ(id.rfind("params.length=8,0.length=16,layers=path_rope-", 0), 0u) << id;
  EXPECT_EQ(id.find('/'), std::string::npos);
  EXPECT_EQ(id.find(' '), std::string::npos);
  // Long values are truncated; the id stays short and unique through the hash.
  const std::string long_a(200, 'a'), long_b = std::string(199, 'a') + "b";
  const std::string ia = cell_id({{"task.name", {long_a, long_a}}}), ib = cell_id({{"task.name", {long_b, long_b}}});
  EXPECT_NE(ia, ib);
  EXPECT_LT(ia.size(), 64u);
}

TEST(SweepStudy, EveryCellIsValidatedBeforeAnythingRuns) {
  // Bad values name the study, the axis and the value.
  std::string e = plan_error("grid: {model.n_layers: [1, x]}\n");
  EXPECT_CONTAINS(e, "study 's.yaml': grid 'model.n_layers' value 'x'");
  EXPECT_CONTAINS(e, "expected an integer >= 1");
  e = plan_error("grid: {model.nlayers: [1, 2]}\n");
  EXPECT_CONTAINS(e, "grid 'model.nlayers' value '1'");
  EXPECT_CONTAINS(e, "unknown key 'model.nlayers'");
  e = plan_error("zip: {optim.lr: [1e-3, -1], train.seed: [0, 1]}\n");
  EXPECT_CONTAINS(e, "zip 'optim.lr' value '-1'");
  e = plan_error("set: {train.stepz: 5}\ngrid: {train.seed: [0]}\n");
  EXPECT_CONTAINS(e, "set 'train.stepz=5'");
  // Only the combination is invalid (rope needs an even head_dim): the cell is named.
  e = plan_error("grid:\n  model.attention: [path, rope]\n  model.head_dim: [4, 3]\n");
  EXPECT_CONTAINS(e, "cell 'attention=rope,head_dim=3'");
  EXPECT_CONTAINS(e, "even head dimension");
  // The task check runs for every distinct task (cached) and names a single task axis.
  int calls = 0;
  const TaskCheck check = [&calls](const TrainConfig& c) {
    ++calls;
    if (c.task.params.at("length") == "0") fail("length: must be >= 1");
    return TaskShape{std::stoll(c.task.params.at("length")), 2};
  };
  const Plan ok = plan_of("grid:\n  task.params.length: [4, 8]\n  train.seed: [0, 1, 2]\n", check);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(ok.cells[5].shape.seq_len, 8);
  e = plan_error("grid:\n  task.params.length: [4, 0]\n  train.seed: [0, 1]\n", check);
  EXPECT_CONTAINS(e, "grid 'task.params.length' value '0': task 'parity': length: must be >= 1");
  for (const auto& msg : {e, plan_error("grid: {model.n_layers: [x]}\n")}) EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(SweepStudy, StructuralErrors) {
  auto err = [](const std::string& text) { return error_of([&] { parse_study(text, "s.yaml", ""); }); };
  const std::string base(kInlineBase);
  EXPECT_CONTAINS(err(base + "grid: {train.seed: [0]}\nbogus: 1\n"), "study 's.yaml': unknown key 'bogus'");
  EXPECT_CONTAINS(err(base + "grid: {}\n"), "grid: empty");
  EXPECT_CONTAINS(err(base + "grid:\n"), "grid: empty");
  EXPECT_CONTAINS(err(base), "no axes");
  EXPECT_CONTAINS(err(base + "grid: {train.seed: []}\n"), "grid 'train.seed': empty list of values");
  EXPECT_CONTAINS(err(base + "grid: {train.seed: 3}\n"), "grid 'train.seed': expected a list of values");
  EXPECT_CONTAINS(err(base + "grid: {train.seed: [1, 1]}\n"), "value '1' is listed twice");
  // A zip list may repeat a value, but two zip entries may not be the same combination.
  EXPECT_CONTAINS(err(base + "zip: {train.seed: [1, 1], optim.lr: [0.1, 0.1]}\n"), "entries 1 and 2 are the same combination");
  EXPECT_CONTAINS(err(base + "zip: {train.seed: [0, 1], optim.lr: [1e-3]}\n"),
                  "zip: lists of unequal length ('train.seed' has 2 values, 'optim.lr' has 1)");
  EXPECT_CONTAINS(err(base + "grid: {train.seed: [0]}\nprotocol: fastest\n"), "unknown protocol 'fastest'");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\n"), "protocol min_depth needs");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\nmin_depth: {axis: model.n_layers}\n"),
                  "missing 'threshold'");
  EXPECT_CONTAINS(err(base + "grid: {train.seed: [0]}\nprotocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 0.9}\n"),
                  "min_depth.axis: 'model.n_layers' is not a grid axis");
  EXPECT_CONTAINS(err(base + "grid: {model.attention: [path]}\nprotocol: min_depth\nmin_depth: {axis: model.attention, threshold: 1}\n"),
                  "value 'path' is not a number");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\n"
                             "min_depth: {axis: model.n_layers, threshold: 0.9, best_over: [train.seed]}\n"),
                  "best_over: 'train.seed' is not an axis");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\n"
                             "min_depth: {axis: model.n_layers, threshold: 0.9, metric: accuracy}\n"),
                  "must be <eval key>.<field>");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\n"
                             "min_depth: {axis: model.n_layers, threshold: 0.9, metric: val.accuracy}\n"),
                  "min_depth.metric: metric 'val.accuracy': unknown field 'accuracy' (token_accuracy, sequence_accuracy, "
                  "error_rate or loss)");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 90}\n"),
                  "min_depth.threshold: 90 is out of range for token_accuracy (expected a number in [0, 1])");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\n"
                             "min_depth: {axis: model.n_layers, threshold: -1, metric: val.loss}\n"),
                  "min_depth.threshold: -1 is out of range for loss (expected a number >= 0)");
  EXPECT_CONTAINS(err(base + "grid: {optim.lr: [1e-3]}\nprotocol: max_lr\nmax_lr: {stop_at: 1.5, metric: val.sequence_accuracy}\n"),
                  "max_lr.stop_at: 1.5 is out of range for sequence_accuracy");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 0.9, x: 1}\n"),
                  "min_depth: unknown key 'x'");
  EXPECT_CONTAINS(err(base + "grid: {model.n_layers: [1]}\nprotocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 0.9, order: deepest}\n"),
                  "study 's.yaml': min_depth.order: unknown order 'deepest' (known: ascending, deepest_first)");
  EXPECT_CONTAINS(err(base + "grid: {train.seed: [0]}\nprotocol: max_lr\n"), "max_lr.axis: 'optim.lr' is not a grid axis");
  EXPECT_CONTAINS(err(base + "grid: {optim.lr: [1e-3]}\nprotocol: max_lr\nmax_lr: {stop_at: high}\n"),
                  "max_lr.stop_at: expected a number, got 'high'");
  EXPECT_CONTAINS(err(base + "grid: {optim.lr: [1e-3]}\nprotocol: max_lr\nmax_lr: {stop: 0.9}\n"), "stop");
  EXPECT_CONTAINS(err(base + "grid: {train.seed: [0]}\nmin_depth: {axis: train.seed, threshold: 1}\n"),
                  "options given but protocol is 'grid'");
  EXPECT_CONTAINS(err(base + "set: {train.seed: 1}\ngrid: {train.seed: [0]}\n"), "each config key may be set in one place");
  EXPECT_CONTAINS(err(base + "grid: {task: [x]}\nzip: {task.params.length: [1]}\n"), "overlaps");
  EXPECT_CONTAINS(err("grid: {train.seed: [0]}\n"), "missing `base`");
  EXPECT_CONTAINS(err("base: nowhere.yaml\ngrid: {train.seed: [0]}\n"), "base: config file 'nowhere.yaml' does not exist");
  EXPECT_CONTAINS(err(base + "base: x.yaml\ngrid: {train.seed: [0]}\n"), "either `base`");
  EXPECT_CONTAINS(err(base + "name: a/b\ngrid: {train.seed: [0]}\n"), "name: 'a/b'");
  EXPECT_CONTAINS(err("grid: [\n"), "YAML syntax error");
  EXPECT_CONTAINS(error_of([] { load_study("/nonexistent/study.yaml"); }), "study '/nonexistent/study.yaml': file does not exist");
  EXPECT_CONTAINS(error_of([] { load_study(SB_SOURCE_DIR "/experiments"); }), "': not a regular file");
}

// ---- summary.json ------------------------------------------------------------------------------

TEST(SweepResults, ReadsStatusMetricAndWallTime) {
  const fs::path dir = fs::path(SB_TEST_TMP) / "sweep_results";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "summary.json").string();
  EXPECT_FALSE(read_cell_result(path, "val.token_accuracy").has_value());
  write_file_atomic(path, R"({"status": "early_stopped", "message": "", "wall_seconds": 12.5,
     "eval": {"val": {"token_accuracy": 0.875, "loss": null}, "val@64": {"token_accuracy": 0.5}}})");
  auto r = read_cell_result(path, "val.token_accuracy");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, "early_stopped");
  EXPECT_TRUE(r->final());
  EXPECT_DOUBLE_EQ(r->wall_seconds, 12.5);
  ASSERT_TRUE(r->metric.has_value());
  EXPECT_DOUBLE_EQ(*r->metric, 0.875);
  EXPECT_DOUBLE_EQ(*read_cell_result(path, "val@64.token_accuracy")->metric, 0.5);
  EXPECT_FALSE(read_cell_result(path, "val.loss")->metric.has_value());  // null
  EXPECT_FALSE(read_cell_result(path, "test.token_accuracy")->metric.has_value());
  write_file_atomic(path, R"({"status": "diverged", "message": "loss is nan", "eval": {}})");
  r = read_cell_result(path, "val.token_accuracy");
  EXPECT_EQ(r->status, "diverged");
  EXPECT_TRUE(r->final());
  EXPECT_EQ(r->message, "loss is nan");
  write_file_atomic(path, "{\"status\": \"fine\"}");
  EXPECT_EQ(read_cell_result(path, "val.token_accuracy")->status, "failed");
  write_file_atomic(path, "{\"status\": ");
  r = read_cell_result(path, "val.token_accuracy");
  EXPECT_EQ(r->status, "failed");
  EXPECT_FALSE(r->final());
  EXPECT_CONTAINS(r->message, "unreadable summary.json");
}

// ---- scheduler ---------------------------------------------------------------------------------

const char* kMinDepth =
    "grid:\n"
    "  model.attention: [path, rope]\n"
    "  model.n_layers: [3, 1, 2]\n"
    "  train.seed: [0, 1]\n"
    "protocol: min_depth\n"
    "min_depth: {axis: model.n_layers, threshold: 0.9, best_over: [train.seed]}\n";

CellResult ok(double metric) { return {"completed", metric, 1.0, ""}; }

size_t find_cell(const Plan& p, const std::string& label) {
  for (const auto& c : p.cells)
    if (c.label() == label) return c.index;
  ADD_FAILURE() << "no cell " << label;
  return 0;
}

std::set<std::string> labels(const Plan& p, const std::vector<size_t>& cells) {
  std::set<std::string> out;
  for (const size_t c : cells) out.insert(p.cells[c].label());
  return out;
}

TEST(SweepScheduler, GridAndMaxLrRunEverything) {
  const Plan p = plan_of("grid: {optim.lr: [1e-3, 3e-3], train.seed: [0, 1]}\nprotocol: max_lr\n");
  EXPECT_EQ(p.study.max_lr.axis, "optim.lr");
  EXPECT_EQ(p.metric, "val.token_accuracy");
  Scheduler s(p);
  EXPECT_EQ(s.runnable().size(), 4u);
  s.start(0);
  EXPECT_EQ(s.runnable().size(), 3u);
  EXPECT_TRUE(s.finish(0, ok(0.1)).empty());
  for (size_t c = 1; c < 4; ++c) s.finish(c, ok(0.2));
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.count(CellState::finished), 4u);
  EXPECT_THROW(s.finish(1, ok(0.3)), Error);  // never recorded twice
}

TEST(SweepScheduler, MinDepthRunsDepthByDepthAndSkipsDeeper) {
  const Plan p = plan_of(kMinDepth);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].key, "attention=path");
  EXPECT_EQ(p.groups[0].labels, (std::vector<std::string>{"1", "2", "3"}));  // numeric order
  Scheduler s(p);
  EXPECT_EQ(labels(p, s.runnable()), (std::set<std::string>{"attention=path,n_layers=1,seed=0", "attention=path,n_layers=1,seed=1",
                                                            "attention=rope,n_layers=1,seed=0", "attention=rope,n_layers=1,seed=1"}));
  // path, depth 1: one seed reaches 0.95 -> the best over seeds reaches: decided, depths 2 and 3 skipped.
  s.start(find_cell(p, "attention=path,n_layers=1,seed=0"));
  EXPECT_TRUE(s.finish(find_cell(p, "attention=path,n_layers=1,seed=0"), ok(0.95)).empty());  // seed 1 still pending
  const auto skipped = s.finish(find_cell(p, "attention=path,n_layers=1,seed=1"), ok(0.4));
  EXPECT_EQ(labels(p, skipped), (std::set<std::string>{"attention=path,n_layers=2,seed=0", "attention=path,n_layers=2,seed=1",
                                                       "attention=path,n_layers=3,seed=0", "attention=path,n_layers=3,seed=1"}));
  EXPECT_TRUE(s.groups()[0].decided);
  EXPECT_EQ(*s.groups()[0].reached, 0u);
  // rope, depth 1 fails to reach (a failed cell has no metric) -> depth 2 becomes runnable.
  s.finish(find_cell(p, "attention=rope,n_layers=1,seed=0"), ok(0.3));
  EXPECT_TRUE(s.finish(find_cell(p, "attention=rope,n_layers=1,seed=1"), {"failed", std::nullopt, 0, "boom"}).empty());
  EXPECT_EQ(labels(p, s.runnable()), (std::set<std::string>{"attention=rope,n_layers=2,seed=0", "attention=rope,n_layers=2,seed=1"}));
  s.finish(find_cell(p, "attention=rope,n_layers=2,seed=0"), ok(0.9));  // >= threshold
  EXPECT_EQ(labels(p, s.finish(find_cell(p, "attention=rope,n_layers=2,seed=1"), ok(0.2))).size(), 2u);
  EXPECT_EQ(*s.groups()[1].reached, 1u);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.count(CellState::finished), 6u);
  EXPECT_EQ(s.count(CellState::skipped), 6u);
}

TEST(SweepScheduler, MinDepthNoDepthReaches) {
  const Plan p = plan_of("grid: {model.n_layers: [1, 2]}\nprotocol: min_depth\nmin_depth: {axis: model.n_layers, threshold: 0.99}\n");
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].key, "all");
  Scheduler s(p);
  ASSERT_EQ(s.runnable(), std::vector<size_t>{0});
  s.finish(0, ok(0.5));
  ASSERT_EQ(s.runnable(), std::vector<size_t>{1});
  s.finish(1, ok(0.98));
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.groups()[0].decided);
  EXPECT_FALSE(s.groups()[0].reached.has_value());
}

// The protocol's metric and threshold come from the study: sequence accuracy decides like token
// accuracy; error_rate and loss are lower-is-better (the best seed is the lowest, reaching is <=).
TEST(SweepScheduler, MinDepthOnSequenceAccuracyAndOnErrorRate) {
  const Plan seq = plan_of("grid: {model.n_layers: [1, 2, 3]}\nprotocol: min_depth\n"
                           "min_depth: {axis: model.n_layers, threshold: 0.99, metric: val.sequence_accuracy}\n");
  EXPECT_EQ(seq.metric, "val.sequence_accuracy");
  EXPECT_TRUE(seq.higher_is_better);
  Scheduler s(seq);
  s.finish(0, ok(0.98));
  EXPECT_EQ(s.finish(1, ok(0.995)), std::vector<size_t>{2});
  EXPECT_EQ(*s.groups()[0].reached, 1u);

  const Plan err = plan_of("grid: {model.n_layers: [1, 2, 3], train.seed: [0, 1]}\nprotocol: min_depth\n"
                           "min_depth: {axis: model.n_layers, threshold: 0.05, metric: val.error_rate, best_over: [train.seed]}\n");
  EXPECT_FALSE(err.higher_is_better);
  Scheduler e(err);
  e.finish(find_cell(err, "n_layers=1,seed=0"), ok(0.5));
  EXPECT_TRUE(e.finish(find_cell(err, "n_layers=1,seed=1"), ok(0.06)).empty());  // 0.06 > 0.05: depth 2 next
  e.finish(find_cell(err, "n_layers=2,seed=0"), ok(0.9));
  EXPECT_EQ(e.finish(find_cell(err, "n_layers=2,seed=1"), ok(0.05)).size(), 2u);  // lowest 0.05 <= 0.05: reached
  EXPECT_EQ(*e.groups()[0].reached, 1u);
}

// The metric must be one every cell evaluates, and an early stop must not end a run before the
// protocol's threshold can be reached (issue: depth decided on sequence accuracy while training
// stopped at a token accuracy of 0.9).
TEST(SweepStudy, ProtocolMetricIsEvaluatedAndNotCutShortByTheStopRule) {
  const std::string md = "grid: {model.n_layers: [1, 2]}\nprotocol: min_depth\n";
  EXPECT_EQ(plan_error(md + "min_depth: {axis: model.n_layers, threshold: 0.9, metric: test.token_accuracy}\n"),
            "study 's.yaml': min_depth.metric 'test.token_accuracy': cell 'n_layers=1' has no eval key 'test' (its "
            "task.eval gives: val)");
  EXPECT_NO_THROW(plan_of("set: ['task.eval=[{split: val}, {split: val, length: 64}]']\n" + md +
                          "min_depth: {axis: model.n_layers, threshold: 0.9, metric: val@64.token_accuracy}\n"));
  const std::string seq99 = "min_depth: {axis: model.n_layers, threshold: 0.99, metric: val.sequence_accuracy}\n";
  EXPECT_EQ(plan_error("set: {train.target_accuracy: 0.9}\n" + md + seq99),
            "study 's.yaml': cell 'n_layers=1': train.target_accuracy 0.9 on token_accuracy ends training before "
            "min_depth val.sequence_accuracy reaches 0.99 (min_depth.threshold); set train.target_metric: "
            "sequence_accuracy and train.target_accuracy >= 0.99, or train.target_accuracy: 0 (no early stop)");
  EXPECT_CONTAINS(plan_error("set: {train.target_accuracy: 0.99}\n" + md + seq99), "0.99 on token_accuracy ends training");
  EXPECT_CONTAINS(plan_error("set: {train.target_accuracy: 0.95, train.target_metric: sequence_accuracy}\n" + md + seq99),
                  "0.95 on sequence_accuracy ends training");
  EXPECT_NO_THROW(plan_of("set: {train.target_accuracy: 0.99, train.target_metric: sequence_accuracy}\n" + md + seq99));
  EXPECT_NO_THROW(plan_of("set: {train.target_accuracy: 1}\n" + md + seq99));  // every token right: every sequence
  EXPECT_NO_THROW(plan_of(md + seq99));                                          // no early stop
  EXPECT_NO_THROW(plan_of("set: {train.target_accuracy: 0.9}\n" + md + "min_depth: {axis: model.n_layers, threshold: 0.9}\n"));
  EXPECT_CONTAINS(plan_error("set: {train.target_accuracy: 0.9}\ngrid: {optim.lr: [1e-3, 1e-2]}\nprotocol: max_lr\n"
                             "max_lr: {stop_at: 0.99}\n"),
                  "ends training before max_lr val.token_accuracy reaches 0.99 (max_lr.stop_at)");
  // Lower-is-better metrics have no stop rule to cut them short.
  EXPECT_NO_THROW(plan_of("set: {train.target_accuracy: 0.5}\n" + md +
                          "min_depth: {axis: model.n_layers, threshold: 0.01, metric: val.error_rate}\n"));
}

// max_lr with stop_at: learning rates in the order listed, seeds of one rate together, decided on
// the mean over the seeds; later rates of a decided combination are skipped.
TEST(SweepScheduler, MaxLrStopAtTriesRatesInListedOrder) {
  const Plan p = plan_of("grid: {model.attention: [path, rope], optim.lr: [4.6e-4, 1e-4, 1e-2], train.seed: [0, 1]}\n"
                         "protocol: max_lr\nmax_lr: {stop_at: 0.9}\n");
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].key, "attention=path");
  EXPECT_EQ(p.groups[0].labels, (std::vector<std::string>{"4.6e-4", "1e-4", "1e-2"}));  // listed, not sorted
  EXPECT_EQ(p.stage_axis, "optim.lr");
  EXPECT_TRUE(p.stage_mean);
  Scheduler s(p);
  EXPECT_EQ(labels(p, s.runnable()), (std::set<std::string>{"attention=path,lr=4.6e-4,seed=0", "attention=path,lr=4.6e-4,seed=1",
                                                            "attention=rope,lr=4.6e-4,seed=0", "attention=rope,lr=4.6e-4,seed=1"}));
  // path: seeds 0.95 and 0.8 -> mean 0.875 < 0.9 (min_depth's best-over-seeds would have stopped here).
  s.finish(find_cell(p, "attention=path,lr=4.6e-4,seed=0"), ok(0.95));
  EXPECT_TRUE(s.finish(find_cell(p, "attention=path,lr=4.6e-4,seed=1"), ok(0.8)).empty());
  EXPECT_EQ(labels(p, s.runnable()), (std::set<std::string>{"attention=path,lr=1e-4,seed=0", "attention=path,lr=1e-4,seed=1",
                                                            "attention=rope,lr=4.6e-4,seed=0", "attention=rope,lr=4.6e-4,seed=1"}));
  s.finish(find_cell(p, "attention=path,lr=1e-4,seed=0"), ok(0.92));
  EXPECT_EQ(labels(p, s.finish(find_cell(p, "attention=path,lr=1e-4,seed=1"), ok(0.9))),
            (std::set<std::string>{"attention=path,lr=1e-2,seed=0", "attention=path,lr=1e-2,seed=1"}));
  EXPECT_EQ(*s.groups()[0].reached, 1u);
  EXPECT_EQ(labels(p, s.runnable()), (std::set<std::string>{"attention=rope,lr=4.6e-4,seed=0", "attention=rope,lr=4.6e-4,seed=1"}));
  // rope: a diverged seed (no metric) leaves the mean of the other; nothing reaches -> every rate runs.
  s.finish(find_cell(p, "attention=rope,lr=4.6e-4,seed=0"), {"diverged", std::nullopt, 0, ""});
  s.finish(find_cell(p, "attention=rope,lr=4.6e-4,seed=1"), ok(0.5));
  s.finish(find_cell(p, "attention=rope,lr=1e-4,seed=0"), ok(0.1));
  s.finish(find_cell(p, "attention=rope,lr=1e-4,seed=1"), ok(0.1));
  s.finish(find_cell(p, "attention=rope,lr=1e-2,seed=0"), ok(0.3));
  EXPECT_FALSE(s.done());
  s.finish(find_cell(p, "attention=rope,lr=1e-2,seed=1"), ok(0.3));
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.groups()[1].decided);
  EXPECT_FALSE(s.groups()[1].reached.has_value());
  EXPECT_EQ(s.count(CellState::skipped), 2u);
}

// Staged protocols run every group's earlier stages before any later stage (plan order within one).
TEST(SweepScheduler, StagedRunnableIsBreadthFirst) {
  const Plan p = plan_of("grid: {model.attention: [path, rope], optim.lr: [4.6e-4, 1e-4]}\nprotocol: max_lr\n"
                         "max_lr: {stop_at: 0.9}\n");
  Scheduler s(p);
  const size_t path1 = find_cell(p, "attention=path,lr=4.6e-4"), rope1 = find_cell(p, "attention=rope,lr=4.6e-4");
  ASSERT_EQ(s.runnable(), (std::vector<size_t>{path1, rope1}));
  s.finish(path1, ok(0.1));  // path moves to its second rate; rope's first still comes first
  EXPECT_EQ(s.runnable(), (std::vector<size_t>{rope1, find_cell(p, "attention=path,lr=1e-4")}));
}

TEST(SweepScheduler, MaxLrWithoutStopAtHasNoStages) {
  const Plan p = plan_of("grid: {optim.lr: [1e-3, 3e-3]}\nprotocol: max_lr\nmax_lr: {axis: optim.lr}\n");
  EXPECT_TRUE(p.groups.empty());
  EXPECT_EQ(Scheduler(p).runnable().size(), 2u);
}

TEST(SweepScheduler, RestoreThenSettleReusesFinishedDepths) {
  const Plan p = plan_of(kMinDepth);
  Scheduler s(p);
  // On disk: path depths 1 (not reaching) and 2 (reaching) and even a deeper one; rope depth 1 half done.
  for (const auto& [label, m] : std::vector<std::pair<std::string, double>>{{"attention=path,n_layers=1,seed=0", 0.2},
                                                                           {"attention=path,n_layers=1,seed=1", 0.3},
                                                                           {"attention=path,n_layers=2,seed=0", 0.5},
                                                                           {"attention=path,n_layers=2,seed=1", 0.97},
                                                                           {"attention=path,n_layers=3,seed=0", 0.99},
                                                                           {"attention=rope,n_layers=1,seed=0", 0.1}})
    s.restore(find_cell(p, label), ok(m));
  EXPECT_EQ(labels(p, s.settle()), (std::set<std::string>{"attention=path,n_layers=3,seed=1"}));
  EXPECT_EQ(*s.groups()[0].reached, 1u);
  EXPECT_EQ(s.state(find_cell(p, "attention=path,n_layers=3,seed=0")), CellState::finished);  // kept, not rerun
  EXPECT_EQ(labels(p, s.runnable()), (std::set<std::string>{"attention=rope,n_layers=1,seed=1"}));
}

}  // namespace
}  // namespace sb::sweep

// Every study shipped in experiments/ expands into a valid plan: each cell's config loads and its
// task (with every eval split and length) builds.
TEST(ShippedStudies, EveryStudyPlans) {
  sb::TaskRegistry tasks;
  sb::register_builtin_tasks(tasks);
  const auto check = [&](const sb::TrainConfig& c) {
    const auto task = tasks.create(c.task.name, c.task.params);
    for (const auto& e : c.task.eval) {
      auto params = c.task.params;
      if (e.length > 0) params["length"] = std::to_string(e.length);
      tasks.create(c.task.name, params)->split_index(e.split);
    }
    return sb::sweep::TaskShape{task->seq_len(), task->vocab_size()};
  };
  // Studies run from the repository root (their headers' commands), where task files such as
  // experiments/groups/*.yaml resolve; restore the working directory afterwards.
  struct Cwd {
    std::filesystem::path old = std::filesystem::current_path();
    ~Cwd() { std::filesystem::current_path(old); }
  } cwd;
  std::filesystem::current_path(SB_SOURCE_DIR);
  int studies = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(SB_SOURCE_DIR) + "/experiments")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    const sb::sweep::Study study = sb::sweep::load_study(entry.path().string());
    const sb::sweep::Plan plan = sb::sweep::make_plan(study, check);
    EXPECT_GT(plan.cells.size(), 0u);
    ++studies;
  }
  EXPECT_GE(studies, 1);
}
