// config.cpp: enum names, cross-field validation and defaults resolution, to_yaml() and the
// config fingerprint. The YAML reader and --set overrides live in config_yaml.cpp.
#include "train/config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "statebench/rng.hpp"

namespace sb {

const char* to_string(LrSchedule s) {
  switch (s) {
    case LrSchedule::cosine: return "cosine";
    case LrSchedule::linear: return "linear";
    case LrSchedule::constant: return "constant";
  }
  return "?";
}
const char* to_string(TargetMetric m) {
  return m == TargetMetric::token_accuracy ? "token_accuracy" : "sequence_accuracy";
}
const char* to_string(Shuffle s) { return s == Shuffle::none ? "none" : "epoch"; }
const char* to_string(PathRows r) {
  switch (r) {
    case PathRows::automatic: return "auto";
    case PathRows::on: return "on";
    case PathRows::off: return "off";
  }
  return "?";
}
const char* to_string(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }
const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

void resolve_and_validate(TrainConfig& c) {
  ModelConfig& m = c.model;
  if (c.task.name.empty()) fail("task.name: must not be empty");
  if (m.d_model < 1 || m.n_layers < 1 || m.n_heads < 1 || m.head_dim < 0)
    fail("model: d_model, n_layers and n_heads must be >= 1 and head_dim >= 0");
  if (m.head_dim == 0) {
    if (m.d_model % m.n_heads != 0)
      fail("model.d_model: {} is not divisible by model.n_heads = {} (set model.head_dim explicitly)", m.d_model,
           m.n_heads);
    m.head_dim = m.d_model / m.n_heads;
  }
  if (!m.layers.empty() && static_cast<int64_t>(m.layers.size()) != m.n_layers)
    fail("model.layers: has {} entries but model.n_layers is {}", m.layers.size(), m.n_layers);
  for (int64_t l = 0; l < m.n_layers; ++l)
    if (m.layer_attention(l) == Attention::rope && m.head_dim % 2 != 0)
      fail("model.head_dim: rope attention needs an even head dimension, got {}", m.head_dim);
  if (m.mlp != MlpKind::none && !(m.mlp_ratio > 0)) fail("model.mlp_ratio: expected a number > 0, got {}", m.mlp_ratio);
  if (!(m.init.std > 0)) fail("model.init.std: expected a number > 0, got {}", m.init.std);
  if (!(m.rope_theta > 0)) fail("model.rope_theta: expected a number > 0, got {}", m.rope_theta);
  if (m.path.rank < 1) fail("model.path.rank: expected an integer >= 1, got {}", m.path.rank);
  if (m.path.block < 1) fail("model.path.block: expected an integer >= 1, got {}", m.path.block);
  if (!(m.path.beta_clamp >= 0 && m.path.beta_clamp <= 2))
    fail("model.path.beta_clamp: expected a number in [0, 2] (0 = off), got {}", m.path.beta_clamp);
  if (m.max_len < 0) fail("model.max_len: expected an integer >= 0, got {}", m.max_len);
  if (m.max_len > 0 && m.position != PositionKind::learned)
    fail("model.max_len: {} sizes learned position embeddings, but model.position is '{}' (set it to learned)",
         m.max_len, to_string(m.position));

  const OptimConfig& o = c.optim;
  if (!(o.lr > 0) || !std::isfinite(o.lr)) fail("optim.lr: expected a number > 0, got {}", o.lr);
  for (double b : o.betas)
    if (!(b >= 0 && b < 1)) fail("optim.betas: expected two numbers in [0, 1), got [{}, {}]", o.betas[0], o.betas[1]);
  if (!(o.eps > 0)) fail("optim.eps: expected a number > 0, got {}", o.eps);
  if (!(o.weight_decay >= 0)) fail("optim.weight_decay: expected a number >= 0, got {}", o.weight_decay);
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1)) fail("optim.min_lr_ratio: expected a number in [0, 1], got {}", o.min_lr_ratio);
  if (!(o.grad_clip >= 0)) fail("optim.grad_clip: expected a number >= 0, got {}", o.grad_clip);

  const TrainSettings& t = c.train;
  if (t.steps < 1) fail("train.steps: expected an integer >= 1, got {}", t.steps);
  if (t.batch_size < 1) fail("train.batch_size: expected an integer >= 1, got {}", t.batch_size);
  if (o.warmup_steps < 0 || o.warmup_steps > t.steps)
    fail("optim.warmup_steps: {} must be in [0, train.steps = {}] (e.g. --set optim.warmup_steps={})", o.warmup_steps,
         t.steps, t.steps / 10);
  if (t.eval_examples < 1) fail("train.eval_examples: expected an integer >= 1, got {}", t.eval_examples);
  if (t.log_every < 0 || t.eval_every < 0 || t.checkpoint_every < 0 || t.threads < 0)
    fail("train: log_every, eval_every, checkpoint_every and threads must be >= 0");
  if (!(t.target_accuracy >= 0 && t.target_accuracy <= 1))
    fail("train.target_accuracy: expected a number in [0, 1] (0 = off), got {}", t.target_accuracy);
  if (t.shuffle == Shuffle::epoch && t.train_examples == 0)
    fail("train.shuffle: epoch needs a fixed training set (train.train_examples > 0); the stream of fresh "
         "examples has no epochs");
  if (t.device == Device::cpu && t.precision != Precision::fp32)
    fail("train.precision: {} needs train.device: cuda (the CPU backend computes in fp32)", to_string(t.precision));

  if (c.task.eval.empty()) c.task.eval.push_back(EvalSplitConfig{});
  bool scaled = false;
  for (size_t i = 0; i < c.task.eval.size(); ++i) {
    const EvalSplitConfig& e = c.task.eval[i];
    if (e.split.empty()) fail("task.eval[{}].split: must not be empty", i);
    if (e.length < 0 || e.examples < 0 || e.scale < 0) fail("task.eval[{}]: length, scale and examples must be >= 0", i);
    if (e.length > 0 && e.scale > 0)
      fail("task.eval[{}]: length {} and scale {} together; give one (scale sets the length to scale x the training "
           "length)", i, e.length, e.scale);
    scaled |= e.scale > 0;
    // Scaled entries against fixed lengths: resolve_eval_lengths, once the training length is known.
    for (size_t j = 0; j < i; ++j)
      if (c.task.eval[j].split == e.split && c.task.eval[j].length == e.length && c.task.eval[j].scale == e.scale)
        fail("task.eval[{}]: duplicates task.eval[{}] (split '{}', {} {})", i, j, e.split, e.scale > 0 ? "scale" : "length",
             e.scale > 0 ? e.scale : e.length);
  }
  if (!scaled) check_target_eval(c);  // else once the scales are resolved
  if (c.out_dir.empty()) c.out_dir = "runs/" + c.task.name;
}

std::string eval_key(const EvalSplitConfig& e) {
  if (e.scale > 0) return e.split + "@?";
  return e.length > 0 ? fmt::format("{}@{}", e.split, e.length) : e.split;
}

void check_target_eval(const TrainConfig& c) {
  std::vector<std::string> keys;
  for (const auto& e : c.task.eval) keys.push_back(eval_key(e));
  for (const auto& k : c.train.target_eval)
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      std::string list;
      for (const auto& key : keys) list += (list.empty() ? "" : ", ") + key;
      fail("train.target_eval: '{}' is not the key of any task.eval entry (keys: {})", k, list);
    }
}

namespace {

// A YAML scalar that reads back as the same string: plain when safe, else double-quoted.
std::string yaml_str(const std::string& s) {
  static const std::set<std::string> reserved = {"null", "Null", "NULL", "~", "true", "false", "yes", "no", "on", "off",
                                                 "True", "False", "Yes", "No", "On", "Off", "TRUE", "FALSE"};
  bool plain = !s.empty() && !reserved.count(s) && s.front() != '-' && s.front() != '.';
  for (unsigned char ch : s)
    if (!(std::isalnum(ch) || ch == '_' || ch == '-' || ch == '.' || ch == '/' || ch == '+')) plain = false;
  if (plain) return s;
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      out += fmt::format("\\x{:02x}", ch);
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

std::string num(double v) { return fmt::format("{}", v); }  // shortest form that round-trips

std::string emit(const TrainConfig& c) {
  std::string y = "# statebench training configuration (effective values; keys in docs/config.md)\n";
  y += "task:\n";
  y += fmt::format("  name: {}\n", yaml_str(c.task.name));
  if (c.task.params.empty()) {
    y += "  params: {}\n";
  } else {
    y += "  params:\n";
    for (const auto& [k, v] : c.task.params) y += fmt::format("    {}: {}\n", yaml_str(k), yaml_str(v));
  }
  if (c.task.eval.empty()) {
    y += "  eval: []\n";
  } else {
    y += "  eval:\n";
    for (const auto& e : c.task.eval)
      y += fmt::format("    - {{split: {}, length: {}, examples: {}{}}}\n", yaml_str(e.split), e.length, e.examples,
                       e.scale > 0 ? fmt::format(", scale: {}", e.scale) : "");
  }
  const ModelConfig& m = c.model;
  y += "model:\n";
  y += fmt::format("  d_model: {}\n  n_layers: {}\n  n_heads: {}\n  head_dim: {}\n", m.d_model, m.n_layers, m.n_heads, m.head_dim);
  y += fmt::format("  mlp: {}\n  mlp_ratio: {}\n  attention: {}\n", to_string(m.mlp), num(m.mlp_ratio), to_string(m.attention));
  std::string layers;
  for (const Attention a : m.layers) layers += std::string(layers.empty() ? "" : ", ") + to_string(a);
  y += fmt::format("  layers: [{}]\n", layers);
  y += fmt::format("  norm: {}\n  tied_embeddings: {}\n", to_string(m.norm), m.tied_embeddings);
  y += fmt::format("  init:\n    scheme: {}\n    std: {}\n    gate_bias: {}\n", to_string(m.init.scheme), num(m.init.std),
                   num(m.init.gate_bias));
  y += fmt::format("  rope_theta: {}\n", num(m.rope_theta));
  y += fmt::format("  path:\n    rank: {}\n    beta_clamp: {}\n    block: {}\n    conv_bias: {}\n", m.path.rank,
                   num(m.path.beta_clamp), m.path.block, m.path.conv_bias);
  // Keys added after the fingerprint's text was fixed appear only away from their defaults, so that
  // the configs of earlier runs keep their fingerprints (and their checkpoints resume).
  if (m.path.scale_gate) y += "    scale_gate: true\n";  // inside the path: block above
  if (m.norm_position != NormPosition::pre) y += fmt::format("  norm_position: {}\n", to_string(m.norm_position));
  if (m.position != PositionKind::none) y += fmt::format("  position: {}\n", to_string(m.position));
  if (m.max_len != 0) y += fmt::format("  max_len: {}\n", m.max_len);
  if (m.sba != SbaConfig{}) y += fmt::format("  sba:\n    remainder: {}\n", to_string(m.sba.remainder));
  const OptimConfig& o = c.optim;
  y += "optim:\n";
  y += fmt::format("  lr: {}\n  betas: [{}, {}]\n  eps: {}\n  weight_decay: {}\n", num(o.lr), num(o.betas[0]),
                   num(o.betas[1]), num(o.eps), num(o.weight_decay));
  y += fmt::format("  warmup_steps: {}\n  schedule: {}\n  min_lr_ratio: {}\n  grad_clip: {}\n", o.warmup_steps,
                   to_string(o.schedule), num(o.min_lr_ratio), num(o.grad_clip));
  const TrainSettings& t = c.train;
  y += "train:\n";
  y += fmt::format("  steps: {}\n  batch_size: {}\n  train_examples: {}\n  seed: {}\n  log_every: {}\n  eval_every: {}\n",
                   t.steps, t.batch_size, t.train_examples, t.seed, t.log_every, t.eval_every);
  y += fmt::format("  eval_examples: {}\n  checkpoint_every: {}\n  target_accuracy: {}\n", t.eval_examples,
                   t.checkpoint_every, num(t.target_accuracy));
  y += fmt::format("  device: {}\n  threads: {}\n  precision: {}\n", to_string(t.device), t.threads, to_string(t.precision));
  // Keys added after the fingerprint's text was fixed appear only away from their defaults, so that
  // the configs of earlier runs keep their fingerprints (and their checkpoints resume).
  if (!t.cuda_graphs) y += "  cuda_graphs: false\n";
  if (t.path_rows != PathRows::automatic) y += fmt::format("  path_rows: {}\n", to_string(t.path_rows));
  if (t.shuffle != Shuffle::none) y += fmt::format("  shuffle: {}\n", to_string(t.shuffle));
  if (t.target_metric != TargetMetric::token_accuracy) y += fmt::format("  target_metric: {}\n", to_string(t.target_metric));
  if (!t.target_eval.empty()) {
    std::string keys;
    for (const auto& k : t.target_eval) keys += (keys.empty() ? "" : ", ") + yaml_str(k);
    y += fmt::format("  target_eval: [{}]\n", keys);
  }
  y += fmt::format("out_dir: {}\n", yaml_str(c.out_dir));
  return y;
}

}  // namespace

std::string to_yaml(const TrainConfig& config) { return emit(config); }

uint64_t config_fingerprint(const TrainConfig& config) {
  TrainConfig c = config;
  const TrainConfig defaults;
  c.out_dir.clear();
  c.task.eval.clear();
  c.train.log_every = defaults.train.log_every;
  c.train.eval_every = defaults.train.eval_every;
  c.train.eval_examples = defaults.train.eval_examples;
  c.train.checkpoint_every = defaults.train.checkpoint_every;
  c.train.target_accuracy = defaults.train.target_accuracy;
  c.train.device = defaults.train.device;
  c.train.threads = defaults.train.threads;
  c.train.precision = defaults.train.precision;
  c.train.cuda_graphs = defaults.train.cuda_graphs;
  c.train.path_rows = defaults.train.path_rows;
  c.train.target_metric = defaults.train.target_metric;
  c.train.target_eval = defaults.train.target_eval;
  return mix64(hash_str(emit(c)));
}

}  // namespace sb
