// gpu_runner.hpp: the device TransformerRunner: forward and backward of the model of
// src/model/transformer.hpp on the GPU, over activations preallocated for one (B, T), calling the
// ops of kernels/ops/ops.hpp / model/cuda/blas.hpp and the attention kernels of kernels/attention/attention.hpp. Parameters
// and gradients are device flat buffers with the host ParamStore's layout (same view offsets).
// Same sequence as src/model/runner.cpp; the head only touches labelled rows.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/common/device_buffer.hpp"
#include "model/cuda/blas.hpp"
#include "model/path_rows.hpp"
#include "model/transformer.hpp"

namespace sb::cuda {

class StepProfiler;

class GpuRunner {
 public:
  // Preallocates every activation for batches of B sequences of length T on `stream` (the head's
  // logits grow with the most labelled rows a batch has had, up to B * T). The model
  // provides the configuration and the parameter layout (its host values are not read). precision
  // bf16 keeps the products' activations in bf16 (norm outputs, q, k, v, attention out, the MLP's
  // hidden layers and their gradients; the weights from a bf16 mirror of params made by each
  // forward), fp32 accumulation; the residual stream, norm statistics, the PaTH w path, gate and
  // beta pre-activations, the head and every parameter gradient stay fp32.
  // cuda_graphs: the layer stacks of forward and backward (fixed shapes) are recorded into CUDA
  // graphs on their second call and replayed after (model/cuda/stream_graph.hpp; never on the legacy
  // default stream nullptr), the head and the loss forward with them (over Mt rows) except for a
  // batch with between half and all of its rows labelled, whose head runs eagerly.
  // train = false builds an evaluation runner: the forward's buffers and workspace only, no
  // gradient buffers or backward workspace (for evaluations at another length than training's,
  // which need their own runner); backward() throws. path_rows: whether a sparse-label batch's last
  // PaTH layer attends at its labelled rows only (model/path_rows.hpp).
  GpuRunner(const Transformer<float>& model, int64_t B, int64_t T, MatmulPrecision precision, cudaStream_t stream,
            bool cuda_graphs = true, bool train = true, PathRows path_rows = PathRows::automatic);
  ~GpuRunner();
  int64_t batch() const;
  int64_t seq_len() const;

  // ids / labels: HOST [B, T] (labels -100 = no loss; ids in [0, V), checked). params: device
  // [model.params().size()]. Stages the batch in pinned memory and uploads it asynchronously, runs
  // the forward and the loss of the labelled rows; returns the labelled count M. No host
  // synchronisation, except that the host waits for the upload of two calls ago. The loss sum
  // (double) stays on the device: loss_sum_device().
  int64_t forward(const float* params, const int32_t* ids, const int32_t* labels);
  const double* loss_sum_device() const;
  // Backward of scale * (loss sum of the last forward) into device grads (ACCUMULATING, same layout).
  // Throws sb::Error on an evaluation runner (train = false).
  void backward(const float* params, float* grads, float scale);
  // HOST predictions [B, T]: argmax over V on labelled rows, -1 elsewhere (synchronises).
  void argmax(int32_t* predictions);
  // Device logits [M, V] of the last forward, rows in logit_rows() order.
  const float* logits_device() const;
  const std::vector<int32_t>& logit_rows() const;
  // Times the following forwards / backwards op by op into `profiler` (model/cuda/step_profiler.hpp),
  // launching eagerly (no CUDA graphs) while one is set; nullptr (the default) detaches it.
  void set_profiler(StepProfiler* profiler);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sb::cuda
