// config.hpp: the typed training configuration (task, model, optimiser, training loop, output)
// read from YAML. Every key has a default; unknown keys, wrong types, out-of-range values and
// inconsistent combinations are sb::Error naming the file and the full key path. docs/config.md
// documents every key. to_yaml() writes the effective config, which loads back to an equal one.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/path_rows.hpp"

namespace sb {

enum class LrSchedule { cosine, linear, constant };
enum class Device { cpu, cuda };
enum class Precision { fp32, tf32, bf16 };
// What train.target_accuracy is compared with on every eval entry (the early-stop rule).
enum class TargetMetric { token_accuracy, sequence_accuracy };
// How a fixed training set (train_examples > 0) is read: in index order, or each epoch in its own
// random order (epoch_order.hpp).
enum class Shuffle { none, epoch };

// Names as written in YAML ("cosine", "cuda", "bf16", ...).
const char* to_string(LrSchedule s);
const char* to_string(Device d);
const char* to_string(Precision p);
const char* to_string(TargetMetric m);
const char* to_string(Shuffle s);
const char* to_string(PathRows r);

struct EvalSplitConfig {
  std::string split = "val";  // a split name of the task (checked when the task is built)
  int64_t length = 0;         // 0 = the training length; else passed to the task as `length`
  int64_t examples = 0;       // 0 = train.eval_examples
  int64_t scale = 0;          // > 0: length = scale x the task's length parameter (resolve_eval_lengths)
  bool operator==(const EvalSplitConfig&) const = default;
};

struct TaskConfig {
  std::string name = "flipflop";
  std::map<std::string, std::string> params;  // the task's own k=v parameters, as strings
  std::vector<EvalSplitConfig> eval;          // never empty after loading (default: [val])
  bool operator==(const TaskConfig&) const = default;
};

struct OptimConfig {
  double lr = 3e-4;                        // peak learning rate
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.1;               // decoupled (AdamW), only on views flagged decay
  int64_t warmup_steps = 0;                // linear warm-up: step s < W uses lr * (s+1)/W
  LrSchedule schedule = LrSchedule::cosine;  // after warm-up, down to min_lr_ratio*lr at the last step
  double min_lr_ratio = 0.0;
  double grad_clip = 1.0;                  // max global gradient L2 norm; 0 = off
  bool operator==(const OptimConfig&) const = default;
};

struct TrainSettings {
  int64_t steps = 1000;
  int64_t batch_size = 16;
  int64_t train_examples = 0;    // 0 = a fresh example every time; N = cycle over examples 0..N-1
  Shuffle shuffle = Shuffle::none;  // with train_examples: each epoch in index or in random order
  uint64_t seed = 0;             // model init and training data stream
  int64_t log_every = 50;        // metrics.jsonl train line every N steps (0 = never)
  int64_t eval_every = 500;      // evaluate every N steps (0 = only at the end)
  int64_t eval_examples = 1000;  // default examples per eval split
  int64_t checkpoint_every = 0;  // checkpoint every N steps (0 = only at the end)
  double target_accuracy = 0.0;  // early stop when every eval split reaches it (0 = off)
  TargetMetric target_metric = TargetMetric::token_accuracy;  // ... in this accuracy
  std::vector<std::string> target_eval;  // the eval keys the early stop reads (empty = every entry)
  Device device = Device::cpu;
  int64_t threads = 0;           // CPU threads, 0 = all cores
  Precision precision = Precision::fp32;  // tf32/bf16 only with device cuda
  bool cuda_graphs = true;       // device cuda: replay each step's fixed-shape launches as CUDA graphs
  PathRows path_rows = PathRows::automatic;  // device cuda: PaTH's last layer of sparse-label batches (path_rows.hpp)
  bool operator==(const TrainSettings&) const = default;
};

struct TrainConfig {
  TaskConfig task;
  ModelConfig model;
  OptimConfig optim;
  TrainSettings train;
  std::string out_dir;  // resolved to "runs/<task.name>" when omitted
  bool operator==(const TrainConfig&) const = default;
};

// Reads a YAML file, applies `overrides` ("a.b=c", the --set flag; c is a YAML scalar, flow
// sequence or flow map) to the YAML tree, maps it onto TrainConfig, resolves defaults and
// validates. Errors are sb::Error: "config 'FILE': model.n_layers: expected an integer >= 1, got 'x'".
// One adjustment instead of an error: when an override shortens train.steps below the file's
// optim.warmup_steps (and does not set the warm-up too), the warm-up becomes steps / 10 and a
// note saying so is appended to `notes` (when given) for the caller to print.
TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                        std::vector<std::string>* notes = nullptr);
// The same from YAML text; `origin` names the source in errors. Empty text = all defaults.
TrainConfig parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                         const std::string& origin = "<string>", std::vector<std::string>* notes = nullptr);
// Cross-field checks (load/parse call it; for configs built in code). Also resolves head_dim,
// the default eval list and out_dir in place. Entries with task.eval[].scale keep it: their length
// needs the task's (resolve_eval_lengths, train/evaluation.hpp), and so does checking
// train.target_eval, which names such an entry by its final key (check_target_eval).
void resolve_and_validate(TrainConfig& config);

// The key an evaluation entry is stored under: "SPLIT" at the training length, "SPLIT@LENGTH"
// otherwise (an entry with an unresolved scale has none yet: "SPLIT@?").
std::string eval_key(const EvalSplitConfig& e);

// train.target_eval names only keys of task.eval entries (lengths resolved): sb::Error
// "train.target_eval: 'K' is not an eval key of task.eval (keys: val, val@64)" otherwise.
void check_target_eval(const TrainConfig& config);

// The effective configuration, every key, in docs/config.md order; parse_config(to_yaml(c)) == c.
std::string to_yaml(const TrainConfig& config);

// Hash of the semantic part of the config: everything except out_dir, task.eval, train.log_every,
// eval_every, eval_examples, checkpoint_every, target_accuracy, target_metric, target_eval, device,
// threads, precision, cuda_graphs (settings that do not change the training trajectory's definition).
// Checkpoints store it.
uint64_t config_fingerprint(const TrainConfig& config);

}  // namespace sb
