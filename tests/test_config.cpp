// test_config.cpp: YAML config mapping: defaults, round trip through to_yaml, every error path
// (unknown keys with suggestions, wrong types, ranges, --set, cross-field), fingerprint, and the
// shipped experiments/configs/*.yaml files.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "train/config.hpp"
#include "test_util.hpp"

namespace sb {
namespace {

std::string parse_error(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return error_of([&] { parse_config(yaml, sets, "test.yaml"); });
}

TEST(Config, DefaultsAndResolution) {
  const TrainConfig c = parse_config("");
  EXPECT_EQ(c.task.name, "flipflop");
  EXPECT_TRUE(c.task.params.empty());
  ASSERT_EQ(c.task.eval.size(), 1u);
  EXPECT_EQ(c.task.eval[0].split, "val");
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.model.n_heads, 2);
  EXPECT_EQ(c.model.head_dim, 32);  // resolved d_model / n_heads
  EXPECT_EQ(c.model.attention, Attention::path);
  EXPECT_EQ(c.model.layer_attention(0), Attention::path);
  EXPECT_EQ(c.model.mlp_hidden(), 256);
  EXPECT_EQ(c.model.path.rank, 32);
  EXPECT_EQ(c.model.path.block, 32);
  EXPECT_EQ(c.optim.betas[0], 0.9);
  EXPECT_EQ(c.optim.betas[1], 0.999);
  EXPECT_EQ(c.optim.schedule, LrSchedule::cosine);
  EXPECT_EQ(c.train.device, Device::cpu);
  EXPECT_EQ(c.train.precision, Precision::fp32);
  EXPECT_EQ(c.out_dir, "runs/flipflop");
  // A config built in code resolves the same way.
  TrainConfig d;
  resolve_and_validate(d);
  EXPECT_EQ(c, d);
  // Null values mean "default".
  EXPECT_EQ(parse_config("model:\n  head_dim:\n  n_layers: ~\n"), c);
}

TEST(Config, ExplicitValuesAreRead) {
  const TrainConfig c = parse_config(R"(
task:
  name: word_problem
  params: {group: S5, length: 128, bos: true}
  eval: [val, {split: test, length: 512, examples: 300}]
model:
  d_model: 96
  n_layers: 3
  n_heads: 4
  head_dim: 16
  mlp: gelu
  mlp_ratio: 2.5
  attention: rope
  layers: [path, rope, path_fox]
  norm: layernorm
  tied_embeddings: yes
  init: {scheme: normal, std: 0.05, gate_bias: 2.5}
  rope_theta: 500000
  path: {rank: 16, beta_clamp: 1.99, block: 64, conv_bias: true}
optim:
  lr: 1e-3
  betas: [0.8, 0.95]
  eps: 1e-6
  weight_decay: 0
  warmup_steps: 1e2
  schedule: linear
  min_lr_ratio: 0.1
  grad_clip: 0
train:
  steps: 500
  batch_size: 8
  seed: 12345678901
  device: cuda
  precision: bf16
  threads: 3
  target_accuracy: 0.9
out_dir: "my runs/x"
)");
  EXPECT_EQ(c.task.name, "word_problem");
  EXPECT_EQ(c.task.params.at("group"), "S5");
  EXPECT_EQ(c.task.params.at("length"), "128");
  EXPECT_EQ(c.task.params.at("bos"), "true");
  ASSERT_EQ(c.task.eval.size(), 2u);
  EXPECT_EQ(c.task.eval[0], (EvalSplitConfig{"val", 0, 0}));
  EXPECT_EQ(c.task.eval[1], (EvalSplitConfig{"test", 512, 300}));
  EXPECT_EQ(c.model.head_dim, 16);
  EXPECT_EQ(c.model.mlp, MlpKind::gelu);
  EXPECT_EQ(c.model.mlp_hidden(), 240);
  EXPECT_EQ(c.model.layer_attention(0), Attention::path);
  EXPECT_EQ(c.model.layer_attention(1), Attention::rope);
  EXPECT_EQ(c.model.layer_attention(2), Attention::path_fox);
  EXPECT_THROW(c.model.layer_attention(3), Error);
  EXPECT_EQ(c.model.norm, NormKind::layernorm);
  EXPECT_TRUE(c.model.tied_embeddings);
  EXPECT_EQ(c.model.init.scheme, InitScheme::normal);
  EXPECT_EQ(c.model.init.std, 0.05);
  EXPECT_EQ(c.model.init.gate_bias, 2.5);
  EXPECT_EQ(c.model.rope_theta, 500000.0);
  EXPECT_EQ(c.model.path, (PathConfig{16, 1.99, 64, true}));
  EXPECT_EQ(c.optim.lr, 1e-3);
  EXPECT_EQ(c.optim.betas[1], 0.95);
  EXPECT_EQ(c.optim.weight_decay, 0.0);
  EXPECT_EQ(c.optim.warmup_steps, 100);
  EXPECT_EQ(c.optim.grad_clip, 0.0);
  EXPECT_EQ(c.train.seed, 12345678901ull);
  EXPECT_EQ(c.train.device, Device::cuda);
  EXPECT_EQ(c.train.precision, Precision::bf16);
  EXPECT_EQ(c.out_dir, "my runs/x");
}

TEST(Config, RoundTripThroughToYaml) {
  TrainConfig c = parse_config(R"(
task:
  name: flipflop
  params: {length: 64, p_ignore: 0.1, note: "yes", weird: "a: b # c", empty: "", dash: "-x"}
  eval: [{split: sparse, examples: 7}, {split: val, length: 128}]
model: {d_model: 48, n_heads: 3, n_layers: 2, layers: [rope, fox], mlp: none}
optim: {lr: 0.00030000000000000003, betas: [0.1, 0.2], warmup_steps: 3}
train: {steps: 10, seed: 7, eval_every: 0}
out_dir: "null"
)");
  EXPECT_EQ(c.task.params.at("note"), "yes");
  EXPECT_EQ(c.out_dir, "null");
  const std::string yaml = to_yaml(c);
  const TrainConfig back = parse_config(yaml);
  EXPECT_EQ(back, c) << yaml;
  EXPECT_EQ(to_yaml(back), yaml);
  // Every key is written, including defaults.
  for (const char* key : {"d_model:", "head_dim:", "mlp_ratio:", "attention:", "layers:", "tied_embeddings:",
                          "scheme:", "rope_theta:", "beta_clamp:", "conv_bias:", "betas:", "min_lr_ratio:",
                          "grad_clip:", "log_every:", "checkpoint_every:", "target_accuracy:", "threads:",
                          "precision:", "out_dir:"})
    EXPECT_CONTAINS(yaml, key);
  // Defaults round-trip too.
  const TrainConfig d = parse_config("");
  EXPECT_EQ(parse_config(to_yaml(d)), d);
}

TEST(Config, UnknownKeysNamePathAndSuggest) {
  EXPECT_EQ(parse_error("model:\n  nlayers: 2\n"),
            "config 'test.yaml': unknown key 'model.nlayers' (did you mean 'model.n_layers'?)");
  EXPECT_CONTAINS(parse_error("model:\n  path:\n    rnak: 8\n"), "'model.path.rnak' (did you mean 'model.path.rank'?)");
  // Right name, wrong section.
  EXPECT_CONTAINS(parse_error("train:\n  lr: 0.1\n"), "unknown key 'train.lr' (did you mean 'optim.lr'?)");
  EXPECT_CONTAINS(parse_error("optimizer:\n  lr: 0.1\n"), "unknown key 'optimizer' (did you mean 'optim'?)");
  // No suggestion for something unrelated.
  EXPECT_EQ(parse_error("model:\n  zzzzzzzz: 1\n"), "config 'test.yaml': unknown key 'model.zzzzzzzz'");
  EXPECT_CONTAINS(parse_error("task:\n  eval:\n    - {split: val, exmples: 3}\n"),
                  "unknown key 'task.eval[0].exmples' (did you mean 'task.eval[0].examples'?)");
}

TEST(Config, WrongTypesAndRanges) {
  EXPECT_EQ(parse_error("model:\n  n_layers: x\n"), "config 'test.yaml': model.n_layers: expected an integer >= 1, got 'x'");
  EXPECT_CONTAINS(parse_error("model:\n  n_layers: 0\n"), "model.n_layers: expected an integer >= 1, got '0'");
  EXPECT_CONTAINS(parse_error("model:\n  n_layers: 1.5\n"), "model.n_layers: expected an integer >= 1, got '1.5'");
  EXPECT_CONTAINS(parse_error("model:\n  n_layers: [1]\n"), "model.n_layers: expected an integer >= 1, got a list");
  EXPECT_CONTAINS(parse_error("optim:\n  lr: -1\n"), "optim.lr: expected a number > 0, got '-1'");
  EXPECT_CONTAINS(parse_error("optim:\n  lr: .inf\n"), "optim.lr: expected a number > 0");
  EXPECT_CONTAINS(parse_error("model:\n  init: {gate_bias: 40}\n"), "model.init.gate_bias: expected a number in [-30, 30], got '40'");
  EXPECT_CONTAINS(parse_error("optim:\n  min_lr_ratio: 1.5\n"), "optim.min_lr_ratio: expected a number in [0, 1], got '1.5'");
  EXPECT_CONTAINS(parse_error("optim:\n  betas: [0.9]\n"), "optim.betas: expected a list of two numbers in [0, 1)");
  EXPECT_CONTAINS(parse_error("optim:\n  betas: [0.9, 1.0]\n"), "optim.betas:");
  EXPECT_CONTAINS(parse_error("optim:\n  schedule: exponential\n"),
                  "optim.schedule: expected one of cosine, linear, constant, got 'exponential'");
  EXPECT_CONTAINS(parse_error("model:\n  attention: alibi\n"),
                  "model.attention: expected one of path, rope, nope, fox, path_fox, sba, got 'alibi'");
  EXPECT_CONTAINS(parse_error("model:\n  position: sinusoidal\n"),
                  "model.position: expected one of none, learned, got 'sinusoidal'");
  EXPECT_CONTAINS(parse_error("model:\n  norm_position: sandwich\n"),
                  "model.norm_position: expected one of pre, post, got 'sandwich'");
  EXPECT_CONTAINS(parse_error("model:\n  max_len: -3\n"), "model.max_len: expected an integer >= 0, got '-3'");
  EXPECT_CONTAINS(parse_error("model:\n  sba: {remainder: bias}\n"),
                  "model.sba.remainder: expected one of current, none, got 'bias'");
  EXPECT_CONTAINS(parse_error("model:\n  sba: {attend_current: true}\n"), "unknown key 'model.sba.attend_current'");
  EXPECT_CONTAINS(parse_error("model:\n  n_layers: 2\n  layers: [path, xx]\n"), "model.layers[1]: expected one of path");
  EXPECT_CONTAINS(parse_error("model:\n  tied_embeddings: maybe\n"), "model.tied_embeddings: expected true or false, got 'maybe'");
  EXPECT_CONTAINS(parse_error("model:\n  path: {beta_clamp: 2.5}\n"), "model.path.beta_clamp: expected a number in [0, 2]");
  EXPECT_CONTAINS(parse_error("model: 3\n"), "model: expected a map of keys, got '3'");
  EXPECT_CONTAINS(parse_error("task:\n  params: [1, 2]\n"), "task.params: expected a map of task parameters, got a list");
  EXPECT_CONTAINS(parse_error("task:\n  params: {length: [1]}\n"), "task.params.length: expected a single value, got a list");
  EXPECT_CONTAINS(parse_error("task:\n  eval: val\n"), "task.eval: expected a list");
  EXPECT_CONTAINS(parse_error("train:\n  device: tpu\n"), "train.device: expected one of cpu, cuda, got 'tpu'");
  EXPECT_CONTAINS(parse_error("- a\n- b\n"), "expected a map of sections at the top level");
  EXPECT_CONTAINS(parse_error("model:\n  d_model: [1, 2\n"), "config 'test.yaml': YAML syntax error at line");
}

TEST(Config, CrossFieldConstraints) {
  EXPECT_CONTAINS(parse_error("model: {d_model: 64, n_heads: 3}\n"), "model.d_model: 64 is not divisible by model.n_heads = 3");
  EXPECT_EQ(parse_config("model: {d_model: 64, n_heads: 3, head_dim: 16}\n").model.head_dim, 16);
  EXPECT_CONTAINS(parse_error("model: {n_layers: 2, layers: [path]}\n"), "model.layers: has 1 entries but model.n_layers is 2");
  EXPECT_CONTAINS(parse_error("model: {n_heads: 2, head_dim: 15, attention: rope}\n"), "rope attention needs an even head dimension");
  EXPECT_CONTAINS(parse_error("model: {n_layers: 2, head_dim: 15, layers: [path, rope]}\n"), "even head dimension");
  EXPECT_EQ(parse_config("model: {n_heads: 2, head_dim: 15, attention: path}\n").model.head_dim, 15);
  EXPECT_CONTAINS(parse_error("optim: {warmup_steps: 11}\ntrain: {steps: 10}\n"),
                  "optim.warmup_steps: 11 must be in [0, train.steps = 10]");
  EXPECT_EQ(parse_config("optim: {warmup_steps: 10}\ntrain: {steps: 10}\n").optim.warmup_steps, 10);
  EXPECT_CONTAINS(parse_error("train: {precision: bf16}\n"), "train.precision: bf16 needs train.device: cuda");
  EXPECT_CONTAINS(parse_error("task:\n  eval: [val, {split: val}]\n"), "task.eval[1]: duplicates task.eval[0]");
  EXPECT_EQ(parse_config("task:\n  eval: [val, {split: val, length: 64}]\n").task.eval.size(), 2u);

  EXPECT_EQ(parse_error("model: {max_len: 64}\n"),
            "config 'test.yaml': model.max_len: 64 sizes learned position embeddings, but model.position is 'none' "
            "(set it to learned)");
  EXPECT_EQ(parse_config("model: {max_len: 64, position: learned}\n").model.max_len, 64);

  TrainConfig bad;
  bad.model.layers = {Attention::path, Attention::rope};
  EXPECT_CONTAINS(error_of([&] { resolve_and_validate(bad); }), "model.layers: has 2 entries");
}

TEST(Config, SetOverrides) {
  const TrainConfig c = parse_config("model:\n  n_layers: 1\n",
                                     {"model.n_layers=2", "model.layers=[path, rope]", "optim.betas=[0.8, 0.99]",
                                      "task.params.length=64", "train.seed=9", "model.path.rank=8",
                                      "task.eval=[{split: val}, {split: dense, examples: 5}]", "task.eval.1.examples=6"});
  EXPECT_EQ(c.model.n_layers, 2);
  EXPECT_EQ(c.model.layer_attention(1), Attention::rope);
  EXPECT_EQ(c.optim.betas[0], 0.8);
  EXPECT_EQ(c.task.params.at("length"), "64");
  EXPECT_EQ(c.train.seed, 9u);
  EXPECT_EQ(c.model.path.rank, 8);
  ASSERT_EQ(c.task.eval.size(), 2u);
  EXPECT_EQ(c.task.eval[1], (EvalSplitConfig{"dense", 0, 6}));
  // Later overrides win; an empty value restores the default.
  EXPECT_EQ(parse_config("", {"train.steps=5", "train.steps=7"}).train.steps, 7);
  EXPECT_EQ(parse_config("train: {steps: 5}\n", {"train.steps="}).train.steps, TrainSettings{}.steps);

  EXPECT_EQ(parse_error("", {"model.nlayers=3"}),
            "config 'test.yaml': --set 'model.nlayers=3': unknown key 'model.nlayers' (did you mean 'model.n_layers'?)");
  EXPECT_CONTAINS(parse_error("", {"modle.d_model=3"}), "--set 'modle.d_model=3': unknown key 'modle' (did you mean 'model'?)");
  EXPECT_CONTAINS(parse_error("", {"model.n_layers=x"}),
                  "model.n_layers: expected an integer >= 1, got 'x' (from --set 'model.n_layers=x')");
  EXPECT_CONTAINS(parse_error("", {"optim.lr.x=1"}), "optim.lr: expected a number > 0, got a map (from --set 'optim.lr.x=1')");
  EXPECT_CONTAINS(parse_error("optim: {lr: 0.1}\n", {"optim.lr.x=1"}), "--set 'optim.lr.x=1': 'optim.lr' is a single value");
  EXPECT_CONTAINS(parse_error("", {"no_equals_sign"}), "--set 'no_equals_sign': expected key.path=value");
  EXPECT_CONTAINS(parse_error("", {"=3"}), "expected key.path=value");
  EXPECT_CONTAINS(parse_error("", {"model..x=3"}), "empty component");
  EXPECT_CONTAINS(parse_error("", {"optim.betas=[0.9"}), "--set 'optim.betas=[0.9': value is not valid YAML");
  EXPECT_CONTAINS(parse_error("task:\n  eval: [val]\n", {"task.eval.3.examples=1"}), "is a list of 1 entries");
  EXPECT_CONTAINS(parse_error("", {"model.n_layers=2"}), "<no error>");
}

TEST(Config, LoadConfigNamesTheFile) {
  const std::string dir = std::string(SB_TEST_TMP) + "/config";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/bad.yaml";
  write_file_atomic(path, "model:\n  n_layers: x\n");
  EXPECT_EQ(error_of([&] { load_config(path); }),
            "config '" + path + "': model.n_layers: expected an integer >= 1, got 'x'");
  EXPECT_EQ(load_config(path, {"model.n_layers=4"}).model.n_layers, 4);
  EXPECT_CONTAINS(error_of([&] { load_config(dir + "/missing.yaml"); }), "missing.yaml");
}

// Keys added after the fingerprint's text was fixed: read, written back only away from their
// defaults, so the fingerprints of existing configs stay what they were (the default config's and
// a shipped study config's, pinned), and each changes it when set.
// train.target_eval (the eval keys the early stop reads) and task.eval[].scale (an entry at scale x
// the training length; resolved into a length with the task, test_train.cpp) round-trip, appear
// only when set, and are checked: a target key must be an entry's key, length and scale exclude each other.
TEST(Config, TargetEvalAndEvalScale) {
  const TrainConfig c = parse_config(
      "task: {params: {length: 16}, eval: [val, {split: val, length: 64}, {split: dense, scale: 2}]}\n"
      "train: {target_accuracy: 0.9, target_eval: [val, val@64]}\n");
  EXPECT_EQ(c.train.target_eval, (std::vector<std::string>{"val", "val@64"}));
  ASSERT_EQ(c.task.eval.size(), 3u);
  EXPECT_EQ(c.task.eval[2], (EvalSplitConfig{"dense", 0, 0, 2}));
  EXPECT_EQ(eval_key(c.task.eval[1]), "val@64");
  const std::string yaml = to_yaml(c);
  EXPECT_CONTAINS(yaml, "    - {split: dense, length: 0, examples: 0, scale: 2}\n");
  EXPECT_CONTAINS(yaml, "  target_eval: [val, \"val@64\"]\n");
  EXPECT_EQ(parse_config(yaml), c) << yaml;
  EXPECT_EQ(to_yaml(parse_config(yaml)), yaml);
  EXPECT_EQ(parse_config("", {"train.target_eval=val"}).train.target_eval, std::vector<std::string>{"val"});
  const std::string d = to_yaml(parse_config(""));
  EXPECT_EQ(d.find("target_eval"), std::string::npos);
  EXPECT_EQ(d.find(", scale:"), std::string::npos);

  EXPECT_EQ(parse_error("task: {eval: [val, {split: val, length: 64}]}\ntrain: {target_eval: [val@128]}\n"),
            "config 'test.yaml': train.target_eval: 'val@128' is not the key of any task.eval entry (keys: val, val@64)");
  EXPECT_EQ(parse_error("", {"train.target_eval=[dense]"}),
            "config 'test.yaml': train.target_eval: 'dense' is not the key of any task.eval entry (keys: val)");
  EXPECT_EQ(parse_error("task: {eval: [val, {split: val, length: 64, scale: 2}]}\n"),
            "config 'test.yaml': task.eval[1]: length 64 and scale 2 together; give one (scale sets the length to "
            "scale x the training length)");
  EXPECT_EQ(parse_error("task: {eval: [{split: val, scale: 2}, {split: val, scale: 2}]}\n"),
            "config 'test.yaml': task.eval[1]: duplicates task.eval[0] (split 'val', scale 2)");
  EXPECT_CONTAINS(parse_error("task: {eval: [{split: val, scale: -1}]}\n"),
                  "task.eval[0].scale: expected an integer >= 0, got '-1'");
  EXPECT_CONTAINS(parse_error("train: {target_eval: {a: 1}}\n"), "train.target_eval: expected a list of eval keys");
}

// train.shuffle (epoch: each pass over a fixed training set in its own order) round-trips, is
// written only when set, changes the fingerprint, and needs a fixed set.
TEST(Config, ShuffleByEpoch) {
  const TrainConfig c = parse_config("train: {train_examples: 100, shuffle: epoch}\n");
  EXPECT_EQ(c.train.shuffle, Shuffle::epoch);
  EXPECT_CONTAINS(to_yaml(c), "  shuffle: epoch\n");
  EXPECT_EQ(parse_config(to_yaml(c)), c);
  const TrainConfig fixed = parse_config("train: {train_examples: 100}\n");
  EXPECT_EQ(fixed.train.shuffle, Shuffle::none);
  EXPECT_EQ(to_yaml(fixed).find("shuffle"), std::string::npos);
  EXPECT_EQ(parse_config("train: {train_examples: 100, shuffle: none}\n"), fixed);
  EXPECT_NE(config_fingerprint(c), config_fingerprint(fixed));
  EXPECT_EQ(parse_error("train: {shuffle: epoch}\n"),
            "config 'test.yaml': train.shuffle: epoch needs a fixed training set (train.train_examples > 0); the "
            "stream of fresh examples has no epochs");
  EXPECT_CONTAINS(parse_error("train: {train_examples: 10, shuffle: yes}\n"), "train.shuffle");
  EXPECT_CONTAINS(parse_error("train: {train_examples: 10, shuffle: yes}\n"), "'yes'");
}

// train.path_rows (PaTH's last layer in sparse-label batches: auto, on, off) round-trips, is written
// only away from auto, and a bad value names the key and the choices.
TEST(Config, PathRows) {
  EXPECT_EQ(parse_config("").train.path_rows, PathRows::automatic);
  EXPECT_EQ(to_yaml(parse_config("")).find("path_rows"), std::string::npos);
  for (PathRows r : {PathRows::on, PathRows::off}) {
    const TrainConfig c = parse_config("", {std::string("train.path_rows=") + to_string(r)});
    EXPECT_EQ(c.train.path_rows, r);
    EXPECT_CONTAINS(to_yaml(c), std::string("  path_rows: ") + to_string(r) + "\n");
    EXPECT_EQ(parse_config(to_yaml(c)), c);
  }
  EXPECT_EQ(parse_config("train: {path_rows: auto}\n").train.path_rows, PathRows::automatic);
  const std::string e = parse_error("train: {path_rows: sometimes}\n");
  EXPECT_CONTAINS(e, "train.path_rows");
  EXPECT_CONTAINS(e, "sometimes");
}

TEST(Config, ModelOptionsAddedLaterKeepExistingFingerprints) {
  const TrainConfig c = parse_config(
      "model:\n  attention: sba\n  position: learned\n  max_len: 300\n  norm_position: post\n  sba: {remainder: none}\n");
  EXPECT_EQ(c.model.attention, Attention::sba);
  EXPECT_EQ(c.model.position, PositionKind::learned);
  EXPECT_EQ(c.model.max_len, 300);
  EXPECT_EQ(c.model.norm_position, NormPosition::post);
  EXPECT_EQ(c.model.sba.remainder, SbaRemainder::none);
  EXPECT_EQ(parse_config(to_yaml(c)), c);
  const TrainConfig d = parse_config("");
  EXPECT_EQ(d.model.position, PositionKind::none);
  EXPECT_EQ(d.model.norm_position, NormPosition::pre);
  EXPECT_EQ(d.model.max_len, 0);
  EXPECT_EQ(d.model.sba.remainder, SbaRemainder::current);
  const std::string y = to_yaml(d);
  for (const char* key : {"position", "max_len", "sba", "remainder"}) EXPECT_EQ(y.find(key), std::string::npos) << key;
  EXPECT_EQ(fmt::format("{:016x}", config_fingerprint(d)), "b57747b64f1c44e0");
  EXPECT_EQ(fmt::format("{:016x}", config_fingerprint(load_config(std::string(SB_SOURCE_DIR) +
                                                                   "/experiments/configs/flipflop_ref.yaml"))),
            "35b84cc22a395d72");
  EXPECT_EQ(y.find("scale_gate"), std::string::npos);
  EXPECT_TRUE(parse_config("model: {path: {scale_gate: true}}\n").model.path.scale_gate);
  EXPECT_NE(to_yaml(parse_config("", {"model.path.scale_gate=true"})).find("    scale_gate: true\n"), std::string::npos);
  for (const char* set : {"model.position=learned", "model.norm_position=post", "model.sba.remainder=none",
                          "model.attention=sba", "model.path.scale_gate=true"})
    EXPECT_NE(config_fingerprint(parse_config("", {set})), config_fingerprint(d)) << set;
  EXPECT_NE(config_fingerprint(parse_config("", {"model.position=learned", "model.max_len=64"})),
            config_fingerprint(parse_config("", {"model.position=learned"})));
}

TEST(Config, FingerprintIgnoresOnlyNonSemanticKeys) {
  const TrainConfig base = parse_config("");
  const uint64_t f = config_fingerprint(base);
  EXPECT_EQ(config_fingerprint(parse_config(to_yaml(base))), f);
  for (const char* set : {"out_dir=elsewhere", "train.log_every=1", "train.eval_every=3", "train.eval_examples=9",
                          "train.checkpoint_every=4", "train.target_accuracy=0.5", "train.threads=2",
                          "task.eval=[dense]", "train.device=cuda", "train.target_eval=[val]",
                          "task.eval=[val, {split: val, scale: 2}]", "train.path_rows=off"})
    EXPECT_EQ(config_fingerprint(parse_config("", {set})), f) << set;
  for (const char* set : {"model.d_model=32", "model.attention=rope", "optim.lr=0.1", "train.steps=2000",
                          "train.seed=1", "train.batch_size=3", "task.params.length=16", "task.name=parity",
                          "model.path.beta_clamp=1.5", "optim.betas=[0.9, 0.99]"})
    EXPECT_NE(config_fingerprint(parse_config("", {set})), f) << set;
}

TEST(Config, ShippedExperimentsLoad) {
  const std::string dir = std::string(SB_SOURCE_DIR) + "/experiments/configs";
  const TrainConfig ff = load_config(dir + "/flipflop_ref.yaml");
  EXPECT_EQ(ff.model.n_layers, 1);
  EXPECT_EQ(ff.model.n_heads, 2);
  EXPECT_EQ(ff.model.d_model, 64);
  EXPECT_EQ(ff.model.attention, Attention::path);
  EXPECT_EQ(ff.optim.lr, 3e-4);
  EXPECT_EQ(ff.optim.weight_decay, 0.1);
  EXPECT_EQ(ff.optim.warmup_steps, 50);
  EXPECT_EQ(ff.optim.schedule, LrSchedule::linear);
  EXPECT_EQ(ff.train.batch_size, 16);
  EXPECT_EQ(ff.train.steps, 10000);
  ASSERT_EQ(ff.task.eval.size(), 3u);
  EXPECT_EQ(ff.task.eval[1].split, "sparse");
  EXPECT_EQ(load_config(dir + "/s3_path_small.yaml").task.params.at("group"), "S3");
  EXPECT_EQ(load_config(dir + "/parity_path_small.yaml").task.name, "parity");
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".yaml") {
      const TrainConfig c = load_config(entry.path().string());
      EXPECT_EQ(parse_config(to_yaml(c)), c) << entry.path();
    }
}

}  // namespace
}  // namespace sb
