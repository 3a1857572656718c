// test_train.cpp: the training loop end to end on tiny models: same seed -> bit-identical losses,
// resume from a checkpoint equals the uninterrupted run, divergence is recorded as diverged,
// early stopping (on every eval entry or on train.target_eval's), task.eval[].scale resolved with
// the task, the run directory's files, bad input failing before anything is written, and the
// memory estimate. Through the binary (kills, oversized runs): test_train_cli.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <yaml-cpp/yaml.h>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "model/transformer.hpp"
#include "test_util.hpp"
#include "train/evaluation.hpp"
#include "train/memory_estimate.hpp"
#include "train/trainer.hpp"

using namespace sb;
namespace fs = std::filesystem;

namespace {

const char* kTiny = R"(task: {name: flipflop, params: {length: 16}, eval: [{split: val}, {split: dense, length: 32}]}
model: {d_model: 16, n_layers: 1, n_heads: 2, attention: path, path: {rank: 4, block: 4}}
optim: {lr: 0.003, warmup_steps: 5, schedule: cosine}
train: {steps: 40, batch_size: 4, seed: 3, log_every: 1, eval_every: 10, eval_examples: 32, threads: 2}
)";

TaskRegistry& registry() {
  static TaskRegistry r = [] {
    TaskRegistry t;
    register_builtin_tasks(t);
    return t;
  }();
  return r;
}

std::string fresh(const std::string& name) {
  const fs::path p = fs::path(SB_TEST_TMP) / "train" / name;
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  return p.string();
}

TrainOutcome run(const std::string& dir, const std::vector<std::string>& sets = {}, bool resume = false,
                 int64_t interrupt = 0) {
  const TrainConfig cfg = parse_config(kTiny, sets);
  TrainOptions opt;
  opt.out_dir = dir;
  opt.resume = resume;
  opt.progress = false;
  opt.command = "test";
  opt.interrupt_at_step = interrupt;
  return train(cfg, registry(), opt);
}

// The loss of every train line, in order.
std::vector<double> losses(const std::string& dir) {
  std::vector<double> out;
  std::istringstream in(read_file(dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const YAML::Node n = YAML::Load(line);
    if (n["kind"].as<std::string>() == "train") out.push_back(n["loss"].as<double>());
  }
  return out;
}

YAML::Node summary(const std::string& dir) { return YAML::Load(read_file(dir + "/summary.json")); }

}  // namespace

TEST(Train, WritesTheRunDirectory) {
  const std::string dir = fresh("files");
  const TrainOutcome r = run(dir);
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.steps, 40);
  for (const char* f : {"config.yaml", "metrics.jsonl", "checkpoint.bin", "summary.json"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  const YAML::Node s = summary(dir);
  EXPECT_EQ(s["status"].as<std::string>(), "completed");
  EXPECT_EQ(s["steps"].as<int>(), 40);
  EXPECT_EQ(s["task"].as<std::string>(), "flipflop");
  EXPECT_EQ(s["task_params"]["length"].as<std::string>(), "16");
  EXPECT_EQ(s["model"]["layers"][0].as<std::string>(), "path");
  for (const char* key : {"val", "dense@32"}) {
    const YAML::Node e = s["eval"][key];
    ASSERT_TRUE(e) << key;
    const double acc = e["token_accuracy"].as<double>();
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
    EXPECT_EQ(e["errors"].as<int64_t>(), e["scored"].as<int64_t>() - static_cast<int64_t>(std::llround(acc * e["scored"].as<double>())));
    EXPECT_EQ(e["examples"].as<int>(), 32);
  }
  EXPECT_EQ(s["eval"]["dense@32"]["length"].as<int>(), 32);
  EXPECT_FALSE(s["provenance"]["commit"].as<std::string>().empty());
  EXPECT_EQ(losses(dir).size(), 40u);
  // The config written is the effective one and loads back.
  EXPECT_EQ(parse_config(read_file(dir + "/config.yaml")).train.steps, 40);
}

TEST(Train, SameSeedGivesBitIdenticalLosses) {
  const std::string a = fresh("same_a"), b = fresh("same_b"), c = fresh("same_c");
  run(a), run(b), run(c, {"train.seed=4"});
  EXPECT_EQ(losses(a), losses(b));
  EXPECT_NE(losses(a), losses(c));
  EXPECT_EQ(read_file(a + "/checkpoint.bin"), read_file(b + "/checkpoint.bin"));
}

TEST(Train, ResumeEqualsTheUninterruptedRun) {
  const std::string whole = fresh("whole"), parts = fresh("parts");
  run(whole);
  const TrainOutcome first = run(parts, {}, false, 17);
  EXPECT_EQ(first.status, "interrupted");
  EXPECT_FALSE(fs::exists(parts + "/summary.json"));
  EXPECT_TRUE(fs::exists(parts + "/checkpoint.bin"));
  // Without --resume an existing run is refused; with it, training continues from step 17.
  EXPECT_THROW(run(parts), Error);
  const TrainOutcome rest = run(parts, {}, true);
  EXPECT_EQ(rest.status, "completed");
  EXPECT_EQ(losses(parts), losses(whole));
  EXPECT_EQ(read_file(parts + "/checkpoint.bin"), read_file(whole + "/checkpoint.bin"));
  EXPECT_EQ(summary(parts)["eval"]["val"]["errors"].as<int>(), summary(whole)["eval"]["val"]["errors"].as<int>());
  // A finished run resumed again does nothing.
  EXPECT_EQ(run(parts, {}, true).status, "already_finished");
}

TEST(Train, DivergenceIsRecordedAsDiverged) {
  const std::string dir = fresh("diverged");
  const TrainOutcome r = run(dir, {"optim.lr=1e30", "optim.grad_clip=0", "optim.warmup_steps=0"});
  EXPECT_EQ(r.status, "diverged");
  EXPECT_EQ(r.exit_code, 1);
  const YAML::Node s = summary(dir);
  EXPECT_EQ(s["status"].as<std::string>(), "diverged");
  EXPECT_NE(s["message"].as<std::string>().find("non-finite"), std::string::npos);
  EXPECT_LT(s["steps"].as<int>(), 40);
}

TEST(Train, EarlyStopsAtTheTargetAccuracy) {
  const std::string dir = fresh("early");
  // Accuracy is always >= 0: the first evaluation (step 10) stops the run.
  const TrainOutcome r = run(dir, {"train.target_accuracy=1e-9"});
  EXPECT_EQ(r.status, "early_stopped");
  EXPECT_EQ(r.steps, 10);
  EXPECT_EQ(summary(dir)["status"].as<std::string>(), "early_stopped");
}

// task.eval[].scale: an entry at scale x the task's length parameter, keyed SPLIT@LENGTH as if the
// length were given; duplicates and train.target_eval are checked against the resolved keys.
TEST(Train, EvalScaleResolvesToTheScaledLength) {
  TrainConfig c = parse_config("task: {name: parity, params: {length: 8}, eval: [val, {split: val, scale: 2}]}\n"
                               "train: {target_eval: [val@16]}\n");
  resolve_eval_lengths(c, registry());
  EXPECT_EQ(c.task.eval[1], (EvalSplitConfig{"val", 16, 0, 0}));
  EXPECT_EQ(eval_key(c.task.eval[1]), "val@16");
  EXPECT_EQ(parse_config(to_yaml(c)), c);
  resolve_eval_lengths(c, registry());  // idempotent
  EXPECT_EQ(c.task.eval[1].length, 16);
  // Without the parameter in the config: its default.
  TrainConfig d = parse_config("task: {name: word_problem, eval: [{split: val, scale: 4}]}\n");
  resolve_eval_lengths(d, registry());
  EXPECT_EQ(d.task.eval[0].length, 4 * registry().create("word_problem", {})->seq_len());
  const auto resolve_error = [](const std::string& yaml, TaskRegistry& r) {
    return error_of([&] {
      TrainConfig e = parse_config(yaml);
      resolve_eval_lengths(e, r);
    });
  };
  EXPECT_EQ(resolve_error("task: {name: parity, params: {length: 8}, eval: [val, {split: val, scale: 2}]}\n"
                          "train: {target_eval: [val@32]}\n", registry()),
            "train.target_eval: 'val@32' is not the key of any task.eval entry (keys: val, val@16)");
  EXPECT_EQ(resolve_error("task: {name: parity, params: {length: 8}, eval: [{split: val, length: 16}, "
                          "{split: val, scale: 2}]}\n", registry()),
            "task.eval[1]: duplicates task.eval[0] (split 'val', length 16)");
  // A task of fixed length, and one whose length parameter is not an integer.
  TaskRegistry fake;
  const auto none = [](const Params&) -> std::unique_ptr<Task> { return nullptr; };
  fake.add({"fixed", "a fixed length", {}, none, "test", ""});
  fake.add({"named", "a named size", {{"size", "auto", "the size"}}, none, "test", "size"});
  EXPECT_EQ(resolve_error("task: {name: fixed, eval: [val, {split: val, scale: 2}]}\n", fake),
            "task.eval[1] (split 'val', scale 2): task 'fixed' (test) has a fixed length: it declares no length "
            "parameter, so it cannot be evaluated at another length (a plugin names one with length_param(); "
            "docs/adding-a-task.md)");
  EXPECT_EQ(resolve_error("task: {name: named, eval: [{split: val, scale: 2}]}\n", fake),
            "task.eval[0] (split 'val', scale 2): task 'named' parameter 'size' is 'auto', not an integer length to "
            "scale");
}

// train.target_eval: the early stop reads only the listed entries. RoPE trained at length 16 reaches
// sequence accuracy 0.5 at its training length by step 50 but stays below it at 4x (flip-flop):
// listing [val] stops there, while every entry (the default) keeps it training to the end.
TEST(Train, EarlyStopReadsOnlyTargetEval) {
  const std::vector<std::string> sets = {
      "task.eval=[{split: val}, {split: val, scale: 4}]", "model.attention=rope", "model.d_model=32",
      "train.steps=200", "train.eval_every=50", "train.batch_size=16", "train.eval_examples=200",
      "optim.warmup_steps=20", "train.target_metric=sequence_accuracy", "train.target_accuracy=0.5"};
  const std::string listed = fresh("target_eval"), every = fresh("target_every");
  std::vector<std::string> with = sets;
  with.push_back("train.target_eval=[val]");
  const TrainOutcome r = run(listed, with);
  EXPECT_EQ(r.status, "early_stopped");
  EXPECT_EQ(r.steps, 50);
  const YAML::Node s = summary(listed);
  EXPECT_GE(s["eval"]["val"]["sequence_accuracy"].as<double>(), 0.5);
  EXPECT_LT(s["eval"]["val@64"]["sequence_accuracy"].as<double>(), 0.5);
  EXPECT_CONTAINS(read_file(listed + "/config.yaml"), "    - {split: val, length: 64, examples: 0}\n");
  const TrainOutcome all = run(every, sets);
  EXPECT_EQ(all.status, "completed");
  EXPECT_EQ(all.steps, 200);
  EXPECT_LT(summary(every)["eval"]["val@64"]["sequence_accuracy"].as<double>(), 0.5);
}

TEST(Train, BadInputFailsBeforeWritingAnything) {
  const std::string dir = fresh("bad");
  EXPECT_THROW(run(dir, {"task.eval=[{split: nosuch}]"}), Error);
  EXPECT_THROW(run(dir, {"task.name=nosuch"}), Error);
  EXPECT_THROW(run(dir, {"task.params={length: 7}"}), Error);  // flipflop length must be even
  EXPECT_FALSE(fs::exists(dir));
}

// Learned positions cover model.max_len tokens (0: the training length): an evaluation at a longer
// length is a config error naming the key, before anything is written; with room it trains, here
// with stick-breaking attention in post-norm blocks.
TEST(Train, LearnedPositionsBoundTheEvaluationLength) {
  const std::string dir = fresh("positions");
  try {
    run(dir, {"model.position=learned"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "model.max_len: evaluation 'dense@32' has sequences of 32 tokens, more than the 16 learned positions "
              "(model.max_len, 0 = the training length 16)");
  }
  EXPECT_FALSE(fs::exists(dir));
  try {
    run(dir, {"model.position=learned", "model.max_len=8"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "model.max_len: 8 learned positions are fewer than the training sequences' 16 tokens");
  }
  EXPECT_FALSE(fs::exists(dir));
  const TrainOutcome r = run(dir, {"model.position=learned", "model.max_len=32", "model.attention=sba",
                                   "model.norm_position=post", "train.steps=12"});
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(losses(dir).size(), 12u);
  for (double l : losses(dir)) EXPECT_TRUE(std::isfinite(l));
}

TEST(Train, FixedTrainingSetCyclesItsExamples) {
  const std::string a = fresh("fixed_a"), b = fresh("fixed_b");
  // 8 examples, batch 4: steps 0 and 2 see the same batch, so with a frozen model (lr 1e-30) the
  // losses of steps 0, 2, 4, ... are equal; a fresh stream gives different batches.
  run(a, {"train.train_examples=8", "optim.lr=1e-30", "train.steps=6"});
  run(b, {"optim.lr=1e-30", "train.steps=6"});
  const auto la = losses(a), lb = losses(b);
  ASSERT_EQ(la.size(), 6u);
  EXPECT_EQ(la[0], la[2]);
  EXPECT_EQ(la[0], la[4]);
  EXPECT_EQ(la[1], la[3]);
  EXPECT_NE(la[0], la[1]);
  EXPECT_NE(lb[0], lb[2]);
}

TEST(Train, ShuffledFixedSetReadsEachEpochInItsOwnOrder) {
  // 8 examples, batch 4, frozen model: an epoch is 2 steps. Each epoch scores the same 8 examples
  // (the same loss summed over its two steps, up to rounding), in another order than index order
  // (step 2's batch is not step 0's); the order is a pure function of the step (resume is exact).
  const std::vector<std::string> sets = {"train.train_examples=8", "train.shuffle=epoch", "optim.lr=1e-30",
                                         "train.steps=8", "task.params.loss=all"};
  const std::string a = fresh("shuffle_a"), b = fresh("shuffle_b");
  run(a, sets);
  const auto la = losses(a);
  ASSERT_EQ(la.size(), 8u);
  for (size_t e = 1; e < 4; ++e) EXPECT_NEAR(la[2 * e] + la[2 * e + 1], la[0] + la[1], 1e-5) << "epoch " << e;
  EXPECT_NE(la[0], la[2]);
  EXPECT_EQ(run(b, sets, false, 3).status, "interrupted");
  EXPECT_EQ(run(b, sets, true).status, "completed");
  EXPECT_EQ(losses(b), la);
}

// Evaluation chunks: at the training length they fill the training batch (or the engine's budget);
// at other lengths they hold the engine's budget of tokens, so that evaluating a length-128 model at
// 512 does not build buffers for 1024 x 512 tokens (it ran 8 sweep cells out of device memory).
TEST(Train, EvalChunksAreBoundedByTokensNotSequences) {
  EXPECT_EQ(sb::eval_chunk(1000, 128, 1024, 128, 32768), 1000);  // training length: the training batch
  EXPECT_EQ(sb::eval_chunk(1000, 512, 1024, 128, 32768), 64);    // other lengths: the engine's 32768 tokens
  EXPECT_EQ(sb::eval_chunk(1000, 256, 1024, 128, 32768), 128);
  EXPECT_EQ(sb::eval_chunk(1000, 64, 1024, 128, 32768), 512);
  EXPECT_EQ(sb::eval_chunk(16000, 512, 16, 512, 32768), 64);     // the engine's budget is larger
  EXPECT_EQ(sb::eval_chunk(16000, 512, 16, 512, 8192), 16);
  EXPECT_EQ(sb::eval_chunk(5, 100000, 1, 8, 8192), 1);           // at least one sequence
  EXPECT_EQ(sb::eval_chunk(3, 8, 64, 8, 8192), 3);               // at most the set
}

// The memory estimate counts the model's parameters as the model does (for every layer kind, MLP,
// norm and head), grows with what the config makes large, and refuses only above what is available.
TEST(Train, MemoryEstimateCountsTheParametersAndRefusesWhatDoesNotFit) {
  const std::vector<std::vector<std::string>> variants = {
      {},
      {"model.attention=rope", "model.mlp=gelu", "model.norm=layernorm"},
      {"model.attention=fox", "model.tied_embeddings=true", "model.n_layers=3"},
      {"model.attention=path_fox", "model.path.conv_bias=true", "model.mlp=none"},
      {"model.n_layers=2", "model.layers=[path, nope]", "model.d_model=24", "model.n_heads=3"},
  };
  for (const auto& sets : variants) {
    const TrainConfig cfg = parse_config(kTiny, sets);
    const Transformer<float> model(cfg.model, 5);
    EXPECT_EQ(count_params(cfg.model, 5), model.params().num_params()) << testing::PrintToString(sets);
  }
  const TrainConfig cfg = parse_config(kTiny);
  const std::vector<EvalShape> evals{{"val", "train.eval_examples = 32", 32, 16}};
  const MemoryEstimate small = estimate_memory(cfg, 5, 16, evals);
  EXPECT_GT(small.total, 7 * 4.0 * static_cast<double>(small.params));
  EXPECT_GT(estimate_memory(parse_config(kTiny, {"train.batch_size=64"}), 5, 16, evals).total, small.total);
  const MemoryEstimate long_eval = estimate_memory(cfg, 5, 16, {{"val@4096", "task.eval[0].length = 4096", 32, 4096}});
  EXPECT_EQ(long_eval.largest().key, "task.eval[0].length = 4096");
  EXPECT_NO_THROW(check_memory(small, small.total));
  EXPECT_NO_THROW(check_memory(small, std::nullopt));  // unknown: no check
  const std::string e = error_of([&] { check_memory(long_eval, 1e6); });
  EXPECT_EQ(e.rfind("task.eval[0].length = 4096: the run needs an estimated ", 0), 0u) << e;
  EXPECT_NE(e.find("more than the 977 KiB available"), std::string::npos) << e;
}
