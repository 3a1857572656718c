// optimizer.cpp: AdamW, the learning-rate schedule and gradient clipping (see optimizer.hpp).
#include "train/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace sb {

double scheduled_lr(const OptimConfig& o, int64_t total_steps, int64_t step) {
  const int64_t warmup = o.warmup_steps;
  if (step < 0) step = 0;
  if (step < warmup) return o.lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (o.schedule == LrSchedule::constant) return o.lr;
  const int64_t span = total_steps - 1 - warmup;
  const double p = span <= 0 ? 1.0 : std::clamp(static_cast<double>(step - warmup) / static_cast<double>(span), 0.0, 1.0);
  const double f = o.schedule == LrSchedule::linear ? 1.0 - p : 0.5 * (1.0 + std::cos(std::numbers::pi * p));
  return o.lr * (o.min_lr_ratio + (1.0 - o.min_lr_ratio) * f);
}

template <class S>
double grad_norm(const ParamStore<S>& store) {
  const S* g = store.grads();
  double sum = 0;
  for (int64_t i = 0; i < store.size(); ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return std::sqrt(sum);
}

template <class S>
double clip_grad_norm(ParamStore<S>& store, double max_norm) {
  const double norm = grad_norm(store);
  if (max_norm <= 0 || !std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    const S c = static_cast<S>(coef);
    S* g = store.grads();
    for (int64_t i = 0; i < store.size(); ++i) g[i] *= c;
  }
  return norm;
}

template <class S>
AdamW<S>::AdamW(const OptimConfig& o, const ParamStore<S>& store)
    : beta1_(o.betas[0]), beta2_(o.betas[1]), eps_(o.eps), weight_decay_(o.weight_decay),
      layout_hash_(store.layout_hash()) {
  if (!store.finalized()) fail("AdamW created on a parameter store that is not finalized");
  m_.assign(static_cast<size_t>(store.size()), S(0));
  v_.assign(static_cast<size_t>(store.size()), S(0));
}

template <class S>
void AdamW<S>::step(ParamStore<S>& store, double lr) {
  if (store.layout_hash() != layout_hash_ || store.size() != size())
    fail("AdamW step on a parameter store with a different layout");
  ++t_;
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(t_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(beta2_, static_cast<double>(t_)));
  const S step_size = static_cast<S>(lr / bc1);
  const S bc2s = static_cast<S>(bc2_sqrt);
  const S w1 = static_cast<S>(1.0 - beta1_);  // lerp weight, as torch's exp_avg.lerp_(grad, 1 - beta1)
  const S b2 = static_cast<S>(beta2_), one_minus_b2 = static_cast<S>(1.0 - beta2_);
  const S eps = static_cast<S>(eps_);
  S* p = store.params();
  const S* g = store.grads();
  for (const ParamView& view : store.views()) {
    const S decay = static_cast<S>(view.decay ? 1.0 - lr * weight_decay_ : 1.0);
    const int64_t end = view.offset + view.numel;
    for (int64_t i = view.offset; i < end; ++i) {
      p[i] *= decay;
      m_[i] += w1 * (g[i] - m_[i]);
      v_[i] = b2 * v_[i] + one_minus_b2 * g[i] * g[i];
      const S denom = std::sqrt(v_[i]) / bc2s + eps;
      p[i] -= step_size * m_[i] / denom;
    }
  }
}

template double grad_norm(const ParamStore<float>&);
template double grad_norm(const ParamStore<double>&);
template double clip_grad_norm(ParamStore<float>&, double);
template double clip_grad_norm(ParamStore<double>&, double);
template class AdamW<float>;
template class AdamW<double>;

}  // namespace sb
