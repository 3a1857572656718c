// ops_loss.hpp: the training loss and the evaluation metric over a label mask: softmax
// cross-entropy (forward + accumulating backward) and argmax accuracy on scored positions.
// Labels use sb::kIgnoreLabel (-100, tasks/task.hpp) for "no loss here". Conventions as in
// ops_basic.hpp.
#pragma once
#include <cstdint>

namespace sb::nn {

struct LossSum {
  double loss_sum = 0;  // sum of per-position losses over labelled positions
  int64_t count = 0;    // number of labelled positions (labels != kIgnoreLabel)
};

// Per-position softmax cross-entropy, numerically stable (log-sum-exp with the row max):
//   losses[n] = lse[n] - logits[n, labels[n]],  lse[n] = log sum_v exp(logits[n, v])
// for labelled rows; ignored rows (labels[n] == -100) get losses[n] = 0 and lse[n] = 0 (not computed).
// lse is an optional diagnostic output (backward does not need it; pass nullptr to skip).
// Returns the sum (accumulated in double) and the count of labelled positions; the mean loss is
// loss_sum / count. Throws sb::Error for a label outside [0, V) other than -100.
template <class S>
LossSum crossentropy_forward(S* losses,             // [N] per-position loss
                             S* lse,                // [N] row log-sum-exp of the logits, or nullptr
                             const S* logits,       // [N, V]
                             const int32_t* labels, // [N] in [0, V) or -100
                             int64_t N, int64_t V);
// For labelled rows only: dlogits[n, :] += w_n * (softmax(logits[n, :]) - onehot(labels[n])),
//   w_n = dloss_scale * (dlosses ? dlosses[n] : 1).
// Pass dloss_scale = 1 / count and dlosses = nullptr for the mean loss. The softmax is recomputed
// from the logits with the row max subtracted (more accurate in float than exp(logit - lse) when
// logits are large).
template <class S>
void crossentropy_backward(S* dlogits,            // [N, V]
                           const S* dlosses,      // [N] upstream gradient per position, or nullptr (all 1)
                           const S* logits,       // [N, V] forward input
                           const int32_t* labels, // [N]
                           int64_t N, int64_t V, double dloss_scale);

struct AccuracyCount {
  int64_t correct = 0;  // scored positions whose argmax equals the label
  int64_t count = 0;    // scored positions
};

// Argmax accuracy on scored positions: position n is scored when score_mask[n] != 0 (or, with
// score_mask == nullptr, when labels[n] != -100). The argmax takes the FIRST index on ties.
// correct (nullable) receives 1/0 per position (0 on unscored ones), e.g. for whole-sequence
// accuracy. Throws sb::Error if a scored position has label -100 or a label outside [0, V).
template <class S>
AccuracyCount argmax_accuracy(uint8_t* correct,          // [N] or nullptr
                              const S* logits,           // [N, V]
                              const int32_t* labels,     // [N]
                              const uint8_t* score_mask, // [N] or nullptr
                              int64_t N, int64_t V);

}  // namespace sb::nn
