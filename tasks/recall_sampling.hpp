// recall_sampling.hpp: sampling shared by the associative-recall tasks (mqar, mqrar): ordered samples
// of distinct tokens, Zoology's power-law query gaps (sequential weighted sampling without
// replacement, drawn exactly with Efraimidis-Spirakis exponential keys), uniform shuffles, and the
// query region writer (query slots, labels, score mask, optional random filler).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "statebench/rng.hpp"
#include "tasks/task.hpp"

namespace sb::recall {

// Uniform double in the open interval (0, 1): never 0, so -log(u) is finite.
inline double uniform_open(Rng& rng) { return (static_cast<double>(rng.u64() >> 11) + 0.5) * 0x1.0p-53; }

// Writes k distinct integers from [lo, lo + n) to out in draw order: every ordered k-tuple of
// distinct values is equally likely (what numpy's choice(replace=False) without p gives).
// Requires 0 <= k <= n.
void sample_distinct(Rng& rng, int32_t lo, int32_t n, int32_t k,
                     int32_t* out);  // [k]

// Uniformly random permutation of items, in place (Fisher-Yates).
void shuffle(Rng& rng, int32_t* items,  // [n]
             int32_t n);

// Zoology's query-gap law over `space` two-token query slots: one draw picks slot g in [0, space)
// with P(g) proportional to (g+1)^(a-1) (numpy: p = a * arange(1, space+1)**(a-1), normalised).
// draw() returns k distinct gaps in the draw order of sequential weighted sampling without
// replacement, the distribution of numpy's choice(space, k, replace=False, p=p).
class PowerLawGaps {
 public:
  PowerLawGaps() = default;
  PowerLawGaps(int64_t space, double power_a);

  int64_t space() const { return static_cast<int64_t>(probability_.size()); }
  double power_a() const { return power_a_; }
  double probability(int64_t g) const { return probability_[static_cast<size_t>(g)]; }  // one draw
  double weight(int64_t g) const { return 1.0 / inverse_weight_[static_cast<size_t>(g)]; }

  // k distinct gaps in draw order. Requires 0 <= k <= space().
  void draw(Rng& rng, int32_t k,
            int32_t* gaps) const { draw(rng, k, gaps, space()); }  // [k]
  // The same law over the first `slots` slots only (P(g) proportional to (g+1)^(a-1) for g < slots):
  // for layouts whose query region varies per example. Requires 0 <= k <= slots <= space().
  void draw(Rng& rng, int32_t k,
            int32_t* gaps,  // [k]
            int64_t slots) const;

 private:
  double power_a_ = 1.0;
  std::vector<double> inverse_weight_;  // [space] (g+1)^(1-a)
  std::vector<double> probability_;     // [space] normalised single-draw probabilities
};

enum class QueryOrder { kZoology, kShuffled };
QueryOrder parse_query_order(const std::string& name);  // "zoology" | "shuffled"; throws otherwise

// Fills positions [context_len, T) of one example: two-token query slots s = 0 .. (T-context_len)/2-1
// at positions context_len + 2s (key) and context_len + 2s + 1 (filler), zeros everywhere (and a
// trailing zero when T - context_len is odd). The gaps are drawn over those (T-context_len)/2 slots,
// at most gaps.space() (fewer when the context is longer than the one `gaps` was built for). Query
// i goes to slot gaps[order[i]]: the key token
// query_keys[i] with label answers[i] at that position, score mask 1 there. Labels and score mask are
// also reset on [0, context_len) (-100 / 0); the caller writes the context tokens.
// zoology: the i-th drawn gap gets query i. shuffled: query i gets a uniformly random drawn gap.
void write_queries(Rng& rng, const PowerLawGaps& gaps, QueryOrder order,
                   const int32_t* query_keys,  // [K]
                   const int32_t* answers,     // [K]
                   int32_t K, int64_t context_len, int64_t T, ExampleView out);

// Zoology's random_non_queries: every input token equal to 0 becomes uniform in [0, vocab)
// (which may be 0 again, or equal a key or value token). Labels are untouched.
void fill_zeros_with_random_tokens(Rng& rng, int32_t vocab,
                                   int32_t* input_ids,  // [T]
                                   int64_t T);

// Token names shared by the recall tasks: "_" for the filler 0, "k<id>" for keys [1, V/2),
// "v<id>" for values [V/2, V).
std::vector<std::string> recall_vocab(int32_t vocab);

}  // namespace sb::recall
