// memory_estimate.hpp: the host memory a training run needs, estimated from its config before
// anything is allocated (parameters with gradients, AdamW state and a checkpoint's copy; the CPU
// threads' activations; the evaluation data), and the check that refuses a run the machine cannot
// hold with a one-line error naming the key that dominates and the estimate.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/config.hpp"

namespace sb {

// One evaluation set as the trainer builds it.
struct EvalShape {
  std::string key;         // "val", "val@512"
  std::string config_key;  // what sets its size, for errors: "task.eval[1].length = 512"
  int64_t examples = 0, length = 0;
};

struct MemoryPart {
  std::string key;   // the config key(s) that set its size: "model.d_model = 64, model.n_layers = 2"
  std::string what;  // "parameters, gradients, AdamW state and a checkpoint copy (4.5e+04 parameters)"
  double bytes = 0;
};

struct MemoryEstimate {
  // model, then training, then one per evaluation set; activations are counted once, for the
  // largest shape (the CPU engine keeps one shape's buffers at a time).
  std::vector<MemoryPart> parts;
  double total = 0;      // bytes
  int64_t params = 0;    // trainable parameters (what Transformer's ParamStore::num_params() says)
  const MemoryPart& largest() const;
};

// Trainable parameters of the model for a vocabulary of `vocab` tokens, without building it.
int64_t count_params(const ModelConfig& model, int64_t vocab);

// `train_length` is the training task's sequence length (T); `cpu_threads` the CPU engine's
// threads (0 = all cores; ignored for train.device cuda, whose activations live on the GPU).
MemoryEstimate estimate_memory(const TrainConfig& config, int64_t vocab, int64_t train_length,
                               const std::vector<EvalShape>& evals);

// Bytes this process may still allocate: /proc/meminfo's MemAvailable, capped by the cgroup's
// memory limit; nullopt when neither can be read.
std::optional<double> available_memory();

// sb::Error "KEY: the run needs an estimated X of memory (WHAT: Y), more than the Z available"
// when the estimate exceeds `available`.
void check_memory(const MemoryEstimate& estimate, std::optional<double> available);

std::string format_bytes(double bytes);  // "1.5 GiB"

}  // namespace sb
