// gpu_engine.cpp: the CUDA training engine (see gpu_engine.hpp): device parameters / gradients /
// AdamW moments in the ParamStore's flat layout, GpuRunner forward/backward, device grad norm,
// clipping and AdamW with a per-element decay mask, lazy host <-> device mirroring.
#ifdef STATEBENCH_HAVE_CUDA
#include "train/gpu_engine.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/ops/ops.hpp"
#include "model/cuda/gpu_runner.hpp"
#include "model/cuda/step_profiler.hpp"

namespace sb {

struct GpuEngine::DeviceState {
  cuda::DeviceBuffer<float> params, grads, m, v;
  cuda::DeviceBuffer<uint8_t> decay_mask;
  cuda::DeviceBuffer<double> norm, partials;
  double* host_scalars = nullptr;  // pinned [2]: loss sum, grad norm
  ~DeviceState() {
    if (host_scalars) cudaFreeHost(host_scalars);
  }
};

namespace {
cuda::MatmulPrecision matmul_precision(Precision p) {
  return p == Precision::tf32   ? cuda::MatmulPrecision::tf32
         : p == Precision::bf16 ? cuda::MatmulPrecision::bf16
                                : cuda::MatmulPrecision::fp32;
}

}  // namespace

GpuEngine::GpuEngine(const ModelConfig& model, const OptimConfig& optim, int64_t vocab_size, Precision precision,
                     bool cuda_graphs, PathRows path_rows)
    : model_(model, vocab_size), optimizer_(optim, model_.params()), optim_(optim), precision_(precision),
      cuda_graphs_(cuda_graphs), path_rows_(path_rows), dev_(std::make_unique<DeviceState>()) {
  if (!cuda::cuda_device_available()) fail("train.device: 'cuda' requested but no CUDA device is available");
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  const ParamStore<float>& store = model_.params();
  const int64_t n = store.size();
  dev_->params.resize(n), dev_->grads.resize(n), dev_->m.resize(n), dev_->v.resize(n);
  std::vector<uint8_t> mask(static_cast<size_t>(n), 2);
  for (const ParamView& view : store.views())
    std::fill_n(mask.begin() + view.offset, view.numel, static_cast<uint8_t>(view.decay ? 1 : 0));
  dev_->decay_mask.resize(n);
  // On the engine's stream (non-blocking: a legacy-stream copy from pageable memory could still be in
  // flight when the first optimizer step reads the mask).
  CUDA_CHECK(cudaMemcpyAsync(dev_->decay_mask.data(), mask.data(), mask.size(), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  dev_->norm.resize(1), dev_->partials.resize(cuda::grad_norm_partials(n));
  CUDA_CHECK(cudaMallocHost(&dev_->host_scalars, 2 * sizeof(double)));
}

GpuEngine::~GpuEngine() {
  runner_.reset();
  eval_runner_.reset();
  dev_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

Transformer<float>& GpuEngine::model() {
  download_if_device_newer();
  host_dirty_ = true;
  return model_;
}

AdamW<float>& GpuEngine::optimizer() {
  download_if_device_newer();
  host_dirty_ = true;
  return optimizer_;
}

std::string GpuEngine::device_name() const {
  int dev = 0;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return fmt::format("{} ({})", prop.name, to_string(precision_));
}

void GpuEngine::upload_if_host_dirty() {
  if (!host_dirty_) return;
  const size_t bytes = static_cast<size_t>(model_.params().size()) * sizeof(float);
  CUDA_CHECK(cudaMemcpyAsync(dev_->params.data(), model_.params().params(), bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev_->m.data(), optimizer_.m(), bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev_->v.data(), optimizer_.v(), bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  host_dirty_ = false;
}

void GpuEngine::download_if_device_newer() {
  if (!device_newer_) return;
  const size_t bytes = static_cast<size_t>(model_.params().size()) * sizeof(float);
  CUDA_CHECK(cudaMemcpyAsync(model_.params().params(), dev_->params.data(), bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaMemcpyAsync(optimizer_.m(), dev_->m.data(), bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaMemcpyAsync(optimizer_.v(), dev_->v.data(), bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  device_newer_ = false;
}

void GpuEngine::ensure_runner(std::unique_ptr<cuda::GpuRunner>& runner, int64_t B, int64_t T, bool train) {
  if (runner && runner->batch() == B && runner->seq_len() == T) return;
  runner.reset();
  runner = std::make_unique<cuda::GpuRunner>(model_, B, T, matmul_precision(precision_), stream_, cuda_graphs_, train,
                                             path_rows_);
}

StepResult GpuEngine::train_step(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, double lr,
                                 double max_norm, bool read_result) {
  upload_if_host_dirty();
  ensure_runner(runner_, B, T, true);
  StepResult r;
  for (int64_t i = 0; i < B * T; ++i) r.labelled += labels[i] != -100 ? 1 : 0;
  if (r.labelled == 0) return r;  // nothing to learn from: no update (as CpuEngine)
  const int64_t n = model_.params().size();
  float* grads = dev_->grads.data();
  {
    cuda::ProfileScope op(profiler_, "zero_grads");
    CUDA_CHECK(cudaMemsetAsync(grads, 0, static_cast<size_t>(n) * sizeof(float), stream_));
  }
  runner_->forward(dev_->params.data(), ids, labels);
  runner_->backward(dev_->params.data(), grads, 1.0f / static_cast<float>(r.labelled));
  {
    cuda::ProfileScope op(profiler_, "grad_norm");
    cuda::grad_norm_cuda(dev_->norm.data(), dev_->partials.data(), grads, n, stream_);
  }
  const int64_t t = optimizer_.steps_taken() + 1;
  const cuda::AdamWArgs args{lr, optim_.betas[0], optim_.betas[1], optim_.eps, optim_.weight_decay,
                             1.0 - std::pow(optim_.betas[0], static_cast<double>(t)),
                             std::sqrt(1.0 - std::pow(optim_.betas[1], static_cast<double>(t)))};
  {
    cuda::ProfileScope op(profiler_, "clip_adamw");  // clipped by the norm on the way in
    cuda::adamw_step_cuda(dev_->params.data(), dev_->m.data(), dev_->v.data(), grads, dev_->decay_mask.data(),
                          dev_->norm.data(), runner_->loss_sum_device(), dev_->norm.data(), max_norm, n, args, stream_);
  }
  device_newer_ = true;
  if (!read_result) {
    optimizer_.set_steps_taken(t);
    return r;
  }
  CUDA_CHECK(cudaMemcpyAsync(dev_->host_scalars, runner_->loss_sum_device(), sizeof(double),
                                    cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaMemcpyAsync(dev_->host_scalars + 1, dev_->norm.data(), sizeof(double), cudaMemcpyDeviceToHost,
                                    stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  r.loss = dev_->host_scalars[0] / static_cast<double>(r.labelled);
  r.grad_norm = dev_->host_scalars[1];
  // The device skipped the update when either is non-finite; the step count follows (as CpuEngine).
  if (std::isfinite(r.loss) && std::isfinite(r.grad_norm)) optimizer_.set_steps_taken(t);
  return r;
}

StepProfile GpuEngine::profile_train_steps(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T,
                                           int64_t steps) {
  upload_if_host_dirty();
  ensure_runner(runner_, B, T, true);
  cuda::StepProfiler profiler(stream_);
  profiler_ = &profiler;
  runner_->set_profiler(&profiler);
  try {
    for (int64_t s = 0; s < steps; ++s) {
      profiler.begin_step();
      train_step(ids, labels, B, T, 1e-4, 1.0, false);
      profiler.end_step();
    }
  } catch (...) {
    profiler_ = nullptr;
    runner_->set_profiler(nullptr);
    throw;
  }
  profiler_ = nullptr;
  runner_->set_profiler(nullptr);
  return profiler.collect();
}

void GpuEngine::evaluate(const int32_t* ids, const int32_t* labels, const uint8_t* score_mask, int64_t B, int64_t T,
                         EvalCounts& counts) {
  upload_if_host_dirty();
  // The training runner when its length matches and it holds the batch; else a forward-only
  // evaluation runner kept across calls. A smaller batch (the last chunk of an eval set) is padded
  // with unlabelled rows rather than allocating a second runner for it (that runner cost MQRAR
  // cells a third of their device memory).
  cuda::GpuRunner* runner = nullptr;
  if (runner_ && runner_->seq_len() == T && runner_->batch() >= B) {
    runner = runner_.get();
  } else {
    if (!(eval_runner_ && eval_runner_->seq_len() == T && eval_runner_->batch() >= B))
      ensure_runner(eval_runner_, B, T, false);
    runner = eval_runner_.get();
  }
  const int64_t Bp = runner->batch();
  const int32_t* run_ids = ids;
  const int32_t* run_labels = labels;
  if (Bp > B) {
    pad_ids_.assign(ids, ids + B * T), pad_ids_.resize(Bp * T, 0);
    pad_labels_.assign(labels, labels + B * T), pad_labels_.resize(Bp * T, -100);
    run_ids = pad_ids_.data(), run_labels = pad_labels_.data();
  }
  const int64_t M = runner->forward(dev_->params.data(), run_ids, run_labels);
  std::vector<int32_t> predictions(static_cast<size_t>(Bp * T));
  runner->argmax(predictions.data());  // synchronises the stream
  CUDA_CHECK(cudaMemcpy(dev_->host_scalars, runner->loss_sum_device(), sizeof(double), cudaMemcpyDeviceToHost));
  counts.add_batch(predictions.data(), labels, score_mask, B, T);
  counts.add_loss(M > 0 ? dev_->host_scalars[0] : 0.0, M);
}

}  // namespace sb
#endif  // STATEBENCH_HAVE_CUDA
