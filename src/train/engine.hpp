// engine.hpp: the training loop's view of a backend. A TrainEngine runs one optimiser step or one
// evaluation batch of the model; make_engine() picks the CPU engine (data-parallel threads) or the
// CUDA engine (whole step on the device) from train.device. The loop itself (trainer.cpp) is the
// same for both.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/step_profile.hpp"
#include "model/transformer.hpp"
#include "train/config.hpp"
#include "train/cpu_engine.hpp"
#include "train/optimizer.hpp"
#include "train/stats.hpp"

namespace sb {

class TrainEngine {
 public:
  virtual ~TrainEngine() = default;
  // The parameters and optimiser state (for the GPU engine: host mirrors, synchronised on access).
  virtual Transformer<float>& model() = 0;
  virtual AdamW<float>& optimizer() = 0;
  virtual std::string device_name() const = 0;  // recorded in provenance
  // One step at learning rate lr with clipping at max_norm (0 = off). read_result = false lets a
  // device engine skip its host synchronisation (loss and norm then read 0); a non-finite loss or
  // norm never updates the parameters.
  virtual StepResult train_step(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, double lr,
                                double max_norm, bool read_result) = 0;
  virtual void evaluate(const int32_t* ids, const int32_t* labels, const uint8_t* score_mask, int64_t B, int64_t T,
                        EvalCounts& counts) = 0;
  // `steps` training steps timed op by op (bench train --profile); device engines only: the CPU
  // engine throws sb::Error.
  virtual StepProfile profile_train_steps(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T,
                                          int64_t steps);
  // Tokens per evaluation batch the engine handles well (the loop rounds to whole sequences).
  virtual int64_t eval_batch_tokens() const { return 8192; }
};

// The engine for config.train.device (cpu, or cuda when built with CUDA and a device exists);
// throws sb::Error naming the key otherwise. The model is config.model with max_len resolved for
// sequences of train_length tokens (resolve_max_len: learned positions default to that many rows).
std::unique_ptr<TrainEngine> make_engine(const TrainConfig& config, int64_t vocab_size, int64_t train_length);

// True when this build has the CUDA backend and a CUDA device is visible.
bool cuda_available();

// Makes CUDA device `index` (among the visible ones) current for this process: `--device cuda:N`.
// Throws sb::Error for an index out of range or a build without CUDA.
void select_cuda_device(int index);

}  // namespace sb
