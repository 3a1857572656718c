// engine.cpp: make_engine(): adapts CpuEngine and (with CUDA) GpuEngine to TrainEngine.
#include "train/engine.hpp"

#include "core/error.hpp"
#include "train/trainer.hpp"
#ifdef STATEBENCH_HAVE_CUDA
#include <cuda_runtime.h>

#include "train/gpu_engine.hpp"
#endif

namespace sb {

namespace {

class CpuTrainEngine final : public TrainEngine {
 public:
  CpuTrainEngine(const TrainConfig& c, int64_t V) : engine_(c.model, c.optim, V, c.train.threads) {}
  Transformer<float>& model() override { return engine_.model(); }
  AdamW<float>& optimizer() override { return engine_.optimizer(); }
  std::string device_name() const override { return describe_cpu_device(engine_.threads()); }
  StepResult train_step(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, double lr, double max_norm,
                        bool) override {
    return engine_.train_step(ids, labels, B, T, lr, max_norm);
  }
  void evaluate(const int32_t* ids, const int32_t* labels, const uint8_t* mask, int64_t B, int64_t T,
                EvalCounts& counts) override {
    engine_.evaluate(ids, labels, mask, B, T, counts);
  }

 private:
  CpuEngine engine_;
};

#ifdef STATEBENCH_HAVE_CUDA
class GpuTrainEngine final : public TrainEngine {
 public:
  GpuTrainEngine(const TrainConfig& c, int64_t V)
      : engine_(c.model, c.optim, V, c.train.precision, c.train.cuda_graphs, c.train.path_rows) {}
  Transformer<float>& model() override { return engine_.model(); }
  AdamW<float>& optimizer() override { return engine_.optimizer(); }
  std::string device_name() const override { return engine_.device_name(); }
  StepResult train_step(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, double lr, double max_norm,
                        bool read_result) override {
    return engine_.train_step(ids, labels, B, T, lr, max_norm, read_result);
  }
  void evaluate(const int32_t* ids, const int32_t* labels, const uint8_t* mask, int64_t B, int64_t T,
                EvalCounts& counts) override {
    engine_.evaluate(ids, labels, mask, B, T, counts);
  }
  StepProfile profile_train_steps(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T,
                                  int64_t steps) override {
    return engine_.profile_train_steps(ids, labels, B, T, steps);
  }
  // Larger evaluation batches keep the device busy (one runner reallocation per evaluation).
  int64_t eval_batch_tokens() const override { return 32768; }

 private:
  GpuEngine engine_;
};
#endif

}  // namespace

StepProfile TrainEngine::profile_train_steps(const int32_t*, const int32_t*, int64_t, int64_t, int64_t) {
  fail("--profile: a per-op breakdown needs --device cuda (the GPU runner's profiler)");
}

bool cuda_available() {
#ifdef STATEBENCH_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

void select_cuda_device(int index) {
#ifdef STATEBENCH_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  if (index < 0 || index >= n) fail("--device cuda:{}: {} CUDA device(s) visible", index, n);
  if (cudaSetDevice(index) != cudaSuccess) fail("--device cuda:{}: cudaSetDevice failed", index);
#else
  fail("--device cuda:{}: this statebench was built without CUDA", index);
#endif
}

std::unique_ptr<TrainEngine> make_engine(const TrainConfig& config, int64_t vocab_size, int64_t train_length) {
  TrainConfig c = config;
  c.model = resolve_max_len(config.model, train_length);
  if (c.train.device == Device::cpu) {
    if (c.train.precision != Precision::fp32)
      fail("train.precision: '{}' needs train.device cuda (the CPU trains in fp32)", to_string(c.train.precision));
    return std::make_unique<CpuTrainEngine>(c, vocab_size);
  }
#ifdef STATEBENCH_HAVE_CUDA
  if (!cuda_available()) fail("train.device: cuda, but no CUDA device is visible");
  return std::make_unique<GpuTrainEngine>(c, vocab_size);
#else
  fail("train.device: cuda, but this statebench was built without CUDA (install nvcc and rebuild, or use cpu)");
#endif
}

}  // namespace sb
