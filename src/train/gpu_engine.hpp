// gpu_engine.hpp: one training or evaluation step of the model on a CUDA device, the GPU twin of
// CpuEngine (same train_step / evaluate contract). Parameters, gradients and AdamW state live on
// the device; the host Transformer / AdamW objects are mirrors, synchronised lazily: model() and
// optimizer() first copy the device state back (if newer) and mark the host copy as possibly
// edited, so the next step uploads it. Only built with CUDA (STATEBENCH_HAVE_CUDA).
#pragma once
#ifdef STATEBENCH_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/path_rows.hpp"
#include "model/step_profile.hpp"
#include "model/transformer.hpp"
#include "train/cpu_engine.hpp"  // StepResult
#include "train/optimizer.hpp"
#include "train/stats.hpp"

namespace sb {

namespace cuda {
class GpuRunner;
class StepProfiler;
}

class GpuEngine {
 public:
  // precision: fp32, tf32 or bf16 (bf16 activations, products and attention: GpuRunner); fp32 master weights
  // and optimizer state in every case. Throws if no device. cuda_graphs: the layer stacks replay as
  // CUDA graphs; path_rows: PaTH's last layer in sparse-label batches (both GpuRunner's).
  GpuEngine(const ModelConfig& model, const OptimConfig& optim, int64_t vocab_size, Precision precision,
            bool cuda_graphs = true, PathRows path_rows = PathRows::automatic);
  ~GpuEngine();

  // Host mirrors (see the header comment): valid after the call, edits are uploaded before the next step.
  Transformer<float>& model();
  AdamW<float>& optimizer();
  std::string device_name() const;  // e.g. "NVIDIA H100 80GB HBM3 (tf32)"

  // As CpuEngine::train_step, entirely on the device: forward + backward, grad norm, clipping
  // (max_norm 0 = off), AdamW at lr; a non-finite loss or norm skips the update (device-side check).
  // read_result = false skips the one host synchronisation (loss and norm are then returned as 0).
  StepResult train_step(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, double lr, double max_norm,
                        bool read_result = true);
  // `steps` training steps (lr 1e-4, clipping at 1) timed op by op (cuda::StepProfiler): the layer
  // stacks launch eagerly while profiled; the unprofiled steps before and after are unchanged.
  StepProfile profile_train_steps(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, int64_t steps);
  // As CpuEngine::evaluate (synchronises).
  void evaluate(const int32_t* ids, const int32_t* labels, const uint8_t* score_mask, int64_t B, int64_t T,
                EvalCounts& counts);

 private:
  // train = false: a forward-only evaluation runner (cuda::GpuRunner).
  void ensure_runner(std::unique_ptr<cuda::GpuRunner>& runner, int64_t B, int64_t T, bool train);
  void upload_if_host_dirty();
  void download_if_device_newer();

  Transformer<float> model_;
  AdamW<float> optimizer_;
  OptimConfig optim_;
  Precision precision_;
  bool cuda_graphs_;
  PathRows path_rows_;
  cudaStream_t stream_ = nullptr;
  struct DeviceState;
  std::unique_ptr<DeviceState> dev_;
  std::unique_ptr<cuda::GpuRunner> runner_;       // training batches
  std::unique_ptr<cuda::GpuRunner> eval_runner_;  // evaluation batches of another shape
  std::vector<int32_t> pad_ids_, pad_labels_;     // a short evaluation batch padded to eval_runner_'s
  bool host_dirty_ = true, device_newer_ = false;
  cuda::StepProfiler* profiler_ = nullptr;  // set during profile_train_steps only
};

}  // namespace sb
#endif  // STATEBENCH_HAVE_CUDA
