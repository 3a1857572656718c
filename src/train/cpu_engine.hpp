// cpu_engine.hpp: one training or evaluation step of the CPU model, data-parallel over threads.
// The batch is split into one shard per thread, each with its own TransformerRunner and (past the
// first) a private gradient buffer; gradients are summed in shard order, so results are
// bit-identical for a given thread count. The trainer owns the loop; this owns the arithmetic.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/transformer.hpp"
#include "train/optimizer.hpp"
#include "train/stats.hpp"

namespace sb {

struct StepResult {
  double loss = 0;       // mean cross-entropy over labelled positions
  int64_t labelled = 0;  // labelled positions in the batch
  double grad_norm = 0;  // global gradient norm before clipping
};

class CpuEngine {
 public:
  CpuEngine(const ModelConfig& model, const OptimConfig& optim, int64_t vocab_size, int64_t threads);
  ~CpuEngine();

  Transformer<float>& model() { return model_; }
  AdamW<float>& optimizer() { return optimizer_; }
  int64_t threads() const { return threads_; }

  // Forward + backward on ids/labels [B, T], gradient clipping (max_norm 0 = off), one AdamW step
  // at learning rate lr. A non-finite loss or gradient norm skips the update (the caller stops).
  StepResult train_step(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, double lr, double max_norm);
  // Forward only; adds predictions (argmax on labelled rows) and losses to counts.
  void evaluate(const int32_t* ids, const int32_t* labels, const uint8_t* score_mask, int64_t B, int64_t T,
                EvalCounts& counts);

 private:
  struct Shard;
  void ensure_shards(int64_t B, int64_t T);

  Transformer<float> model_;
  AdamW<float> optimizer_;
  int64_t threads_;
  int64_t shard_B_ = 0, shard_T_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace sb
