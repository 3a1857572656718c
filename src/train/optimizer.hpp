// optimizer.hpp: AdamW with PyTorch torch.optim.AdamW semantics, the learning-rate schedule
// (linear warm-up, then cosine / linear decay or constant) and global gradient-norm clipping
// (torch.nn.utils.clip_grad_norm_). Optimiser state (m, v, step) lives in flat buffers laid out
// like the ParamStore, so checkpoints are plain loops.
#pragma once
#include "core/aligned_vector.hpp"
#include <cstdint>
#include <vector>

#include "model/param_store.hpp"
#include "train/config.hpp"

namespace sb {

// Learning rate for 0-based optimiser step `step` of `total_steps` (LambdaLR-style: the factor
// for step s is evaluated before update s). W = warmup_steps, N = total_steps:
//   s < W:             lr * (s + 1) / W                       (reaches lr at s = W-1)
//   s >= W, constant:  lr
//   s >= W, otherwise: progress p = (s - W) / (N - 1 - W), clamped to [0, 1] (p = 1 if N-1-W <= 0),
//                      factor f = 1 - p (linear) or (1 + cos(pi p)) / 2 (cosine),
//                      lr * (min_lr_ratio + (1 - min_lr_ratio) * f)  -> min_lr_ratio * lr at s = N-1.
// Steps past the end keep the final value.
double scheduled_lr(const OptimConfig& optim, int64_t total_steps, int64_t step);

// Global L2 norm over the whole gradient buffer (accumulated in double).
template <class S>
double grad_norm(const ParamStore<S>& store);

// torch.nn.utils.clip_grad_norm_: n = grad_norm; if max_norm > 0, scale every gradient by
// min(1, max_norm / (n + 1e-6)). Returns the pre-clip norm n. A non-finite n leaves the
// gradients untouched (the caller should stop: the step would corrupt the parameters).
template <class S>
double clip_grad_norm(ParamStore<S>& store, double max_norm);

template <class S>  // S = float or double (state kept in S, like PyTorch keeps it in the param dtype)
class AdamW {
 public:
  // Reads lr-independent settings from `optim` (betas, eps, weight_decay). The store must be
  // finalized; m and v are zero-initialised with store.size() elements.
  AdamW(const OptimConfig& optim, const ParamStore<S>& store);

  // One AdamW update with learning rate `lr` (from scheduled_lr), per element of each view:
  //   t += 1 (once per call)
  //   if view.decay: p *= 1 - lr * weight_decay
  //   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
  //   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  // Padding between views is never touched. Throws if `store` has a different layout.
  void step(ParamStore<S>& store, double lr);

  int64_t steps_taken() const { return t_; }  // t, the bias-correction step count
  void set_steps_taken(int64_t t) { t_ = t; }  // for checkpoint loading
  S* m() { return m_.data(); }                 // [size()] first moments
  S* v() { return v_.data(); }                 // [size()] second moments
  const S* m() const { return m_.data(); }
  const S* v() const { return v_.data(); }
  int64_t size() const { return static_cast<int64_t>(m_.size()); }
  uint64_t layout_hash() const { return layout_hash_; }

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  uint64_t layout_hash_;
  int64_t t_ = 0;
  AlignedVector<S> m_, v_;
};

extern template class AdamW<float>;
extern template class AdamW<double>;

}  // namespace sb
