// stats.hpp: evaluation statistics. Exact (Clopper-Pearson) binomial confidence intervals via a
// regularized incomplete beta function and its inverse (double precision, no dependencies), and
// accumulators for token accuracy, sequence accuracy, error counts and mean loss.
#pragma once
#include <cstdint>

namespace sb {

// Regularized incomplete beta I_x(a, b) for a, b > 0, x in [0, 1] (continued fraction, Lentz).
double incomplete_beta(double a, double b, double x);
// The x in [0, 1] with I_x(a, b) = p, for p in [0, 1] (safeguarded Newton on a bisection bracket;
// absolute accuracy ~1e-14).
double inverse_incomplete_beta(double a, double b, double p);

struct Interval {
  double lo = 0, hi = 1;
};

// Exact two-sided interval for the success probability after k successes in n trials (use the
// error count as k for an error-rate interval): lo = B^-1(alpha/2; k, n-k+1) (0 if k = 0),
// hi = B^-1(1-alpha/2; k+1, n-k) (1 if k = n), alpha = 1 - confidence. k = 0 gives
// hi = 1 - (alpha/2)^(1/n). n = 0 gives [0, 1]. Throws sb::Error unless 0 <= k <= n and
// 0 < confidence < 1.
Interval clopper_pearson(int64_t k, int64_t n, double confidence = 0.95);

// Counts over one evaluation split (or a training window). Merge partial counts from threads with
// merge(). Sequences with no scored position count as correct sequences (vacuously).
struct EvalCounts {
  int64_t scored = 0;             // scored positions (score mask = 1)
  int64_t correct = 0;            // scored positions predicted right
  int64_t sequences = 0;
  int64_t sequences_correct = 0;  // sequences whose scored positions are all right
  double loss_sum = 0;            // summed per-token loss (nats)
  int64_t loss_tokens = 0;        // number of tokens in loss_sum

  // One sequence of T positions.
  void add_sequence(const int32_t* predictions,  // [T] argmax token ids
                    const int32_t* labels,       // [T] target ids (or kIgnoreLabel)
                    const uint8_t* score_mask,   // [T] 1 where scored
                    int64_t T);
  // B sequences, row-major [B, T] buffers.
  void add_batch(const int32_t* predictions,  // [B, T]
                 const int32_t* labels,       // [B, T]
                 const uint8_t* score_mask,   // [B, T]
                 int64_t B, int64_t T);
  void add_loss(double sum, int64_t tokens) { loss_sum += sum, loss_tokens += tokens; }
  void merge(const EvalCounts& other);

  int64_t errors() const { return scored - correct; }
  double token_accuracy() const;     // correct / scored (NaN when nothing was scored)
  double sequence_accuracy() const;  // sequences_correct / sequences (NaN when empty)
  double error_rate() const;         // errors / scored (NaN when nothing was scored)
  double mean_loss() const;          // loss_sum / loss_tokens (NaN when empty)
  Interval error_interval(double confidence = 0.95) const;           // over scored positions
  Interval sequence_error_interval(double confidence = 0.95) const;  // over sequences
};

}  // namespace sb
