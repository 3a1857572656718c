// cpu_engine.cpp: data-parallel forward/backward over threads, gradient reduction, AdamW step.
#include "core/aligned_vector.hpp"
#include "train/cpu_engine.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/denormals.hpp"

namespace sb {

struct CpuEngine::Shard {
  int64_t begin = 0, count = 0;  // rows [begin, begin + count) of the batch
  std::unique_ptr<TransformerRunner<float>> runner;
  AlignedVector<float> grads;    // private gradient buffer (unused by shard 0)
  nn::LossSum loss;
  std::vector<int32_t> predictions;
};

CpuEngine::CpuEngine(const ModelConfig& model, const OptimConfig& optim, int64_t vocab_size, int64_t threads)
    : model_(model, vocab_size), optimizer_(optim, model_.params()),
      threads_(std::max<int64_t>(1, threads > 0 ? threads : std::thread::hardware_concurrency())) {}

CpuEngine::~CpuEngine() = default;

void CpuEngine::ensure_shards(int64_t B, int64_t T) {
  if (B == shard_B_ && T == shard_T_) return;
  shards_.clear();
  const int64_t n = std::min(threads_, B);
  for (int64_t s = 0, begin = 0; s < n; ++s) {
    auto shard = std::make_unique<Shard>();
    shard->begin = begin;
    shard->count = B / n + (s < B % n ? 1 : 0);
    begin += shard->count;
    shard->runner = std::make_unique<TransformerRunner<float>>(model_, shard->count, T);
    if (s > 0) shard->grads.resize(static_cast<size_t>(model_.params().size()));
    shard->predictions.resize(static_cast<size_t>(shard->count * T));
    shards_.push_back(std::move(shard));
  }
  shard_B_ = B, shard_T_ = T;
}

namespace {
// Runs fn(shard index) on every shard, shard 0 on the calling thread.
template <class Fn>
void parallel_shards(size_t n, Fn&& fn) {
  std::vector<std::thread> pool;
  for (size_t s = 1; s < n; ++s)
    pool.emplace_back([&fn, s] {
      flush_denormals_in_this_thread();
      fn(s);
    });
  flush_denormals_in_this_thread();
  fn(0);
  for (auto& t : pool) t.join();
}
}  // namespace

StepResult CpuEngine::train_step(const int32_t* ids, const int32_t* labels, int64_t B, int64_t T, double lr,
                                 double max_norm) {
  ensure_shards(B, T);
  ParamStore<float>& store = model_.params();
  store.zero_grad();
  // Each shard backpropagates its summed loss (scale 1); the sum is divided by the labelled count.
  parallel_shards(shards_.size(), [&](size_t s) {
    Shard& sh = *shards_[s];
    sh.loss = sh.runner->forward(ids + sh.begin * T, labels + sh.begin * T);
    float* grads = s == 0 ? store.grads() : sh.grads.data();
    if (s > 0) std::fill(sh.grads.begin(), sh.grads.end(), 0.0f);
    sh.runner->backward(1.0f, grads);
  });
  StepResult r;
  double loss_sum = 0;
  for (const auto& sh : shards_) loss_sum += sh->loss.loss_sum, r.labelled += sh->loss.count;
  float* g = store.grads();
  const int64_t size = store.size();
  for (size_t s = 1; s < shards_.size(); ++s) {
    const float* gs = shards_[s]->grads.data();
    for (int64_t i = 0; i < size; ++i) g[i] += gs[i];
  }
  if (r.labelled == 0) return r;  // nothing to learn from (no labels): no update
  const float inv = 1.0f / static_cast<float>(r.labelled);
  for (int64_t i = 0; i < size; ++i) g[i] *= inv;
  r.loss = loss_sum / static_cast<double>(r.labelled);
  r.grad_norm = max_norm > 0 ? clip_grad_norm(store, max_norm) : grad_norm(store);
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) return r;
  optimizer_.step(store, lr);
  return r;
}

void CpuEngine::evaluate(const int32_t* ids, const int32_t* labels, const uint8_t* score_mask, int64_t B, int64_t T,
                         EvalCounts& counts) {
  ensure_shards(B, T);
  parallel_shards(shards_.size(), [&](size_t s) {
    Shard& sh = *shards_[s];
    sh.loss = sh.runner->forward(ids + sh.begin * T, labels + sh.begin * T);
    sh.runner->argmax(sh.predictions.data());
  });
  for (const auto& sh : shards_) {
    counts.add_batch(sh->predictions.data(), labels + sh->begin * T, score_mask + sh->begin * T, sh->count, T);
    counts.add_loss(sh->loss.loss_sum, sh->loss.count);
  }
}

}  // namespace sb
