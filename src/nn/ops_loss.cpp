// ops_loss.cpp: softmax cross-entropy over a label mask (forward + backward) and argmax accuracy;
// explicit float / double instantiations (one per compilation, nn/instantiate.hpp).
#include "nn/ops_loss.hpp"

#include <Eigen/Core>
#include <cmath>

#include "core/error.hpp"
#include "nn/instantiate.hpp"
#include "tasks/task.hpp"

namespace sb::nn {
namespace {

template <class S>
using MapCA = Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>;
template <class S>
using MapA = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>;

// True for a labelled row; throws for a label that is neither -100 nor in [0, V).
bool labelled(int32_t label, int64_t n, int64_t V, const char* op) {
  if (label == kIgnoreLabel) return false;
  if (label < 0 || label >= V) fail("{}: label {} at position {} is outside [0, {})", op, label, n, V);
  return true;
}

}  // namespace

template <class S>
LossSum crossentropy_forward(S* losses, S* lse, const S* logits, const int32_t* labels, int64_t N,
                             int64_t V) {
  LossSum total;
  for (int64_t n = 0; n < N; ++n) {
    if (!labelled(labels[n], n, V, "crossentropy")) {
      losses[n] = S(0);
      if (lse) lse[n] = S(0);
      continue;
    }
    MapCA<S> x(logits + n * V, V);
    const S m = x.maxCoeff();
    const S log_z = std::log((x - m).exp().sum());  // lse - m, kept small for float accuracy
    if (lse) lse[n] = m + log_z;
    losses[n] = log_z - (x[labels[n]] - m);
    total.loss_sum += static_cast<double>(losses[n]);
    ++total.count;
  }
  return total;
}

template <class S>
void crossentropy_backward(S* dlogits, const S* dlosses, const S* logits, const int32_t* labels,
                           int64_t N, int64_t V, double dloss_scale) {
  Eigen::Array<S, Eigen::Dynamic, 1> p(V);
  for (int64_t n = 0; n < N; ++n) {
    if (!labelled(labels[n], n, V, "crossentropy")) continue;
    const S w = static_cast<S>(dloss_scale) * (dlosses ? dlosses[n] : S(1));
    MapCA<S> x(logits + n * V, V);
    p = (x - x.maxCoeff()).exp();
    MapA<S> dx(dlogits + n * V, V);
    dx += (w / p.sum()) * p;
    dx[labels[n]] -= w;
  }
}

template <class S>
AccuracyCount argmax_accuracy(uint8_t* correct, const S* logits, const int32_t* labels,
                              const uint8_t* score_mask, int64_t N, int64_t V) {
  AccuracyCount acc;
  for (int64_t n = 0; n < N; ++n) {
    if (correct) correct[n] = 0;
    const bool scored = score_mask ? score_mask[n] != 0 : labels[n] != kIgnoreLabel;
    if (!scored) continue;
    if (!labelled(labels[n], n, V, "accuracy")) fail("accuracy: scored position {} has no label", n);
    const S* x = logits + n * V;
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (x[v] > x[best]) best = v;
    const bool hit = best == labels[n];
    if (correct) correct[n] = hit ? 1 : 0;
    acc.correct += hit ? 1 : 0;
    ++acc.count;
  }
  return acc;
}

#define SB_INSTANTIATE_OPS_LOSS(S)                                                                  \
  template LossSum crossentropy_forward<S>(S*, S*, const S*, const int32_t*, int64_t, int64_t);     \
  template void crossentropy_backward<S>(S*, const S*, const S*, const int32_t*, int64_t, int64_t,   \
                                         double);                                                   \
  template AccuracyCount argmax_accuracy<S>(uint8_t*, const S*, const int32_t*, const uint8_t*,     \
                                            int64_t, int64_t);

SB_INSTANTIATE_OPS_LOSS(SB_NN_SCALAR)
#undef SB_INSTANTIATE_OPS_LOSS

}  // namespace sb::nn
