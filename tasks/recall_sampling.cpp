// recall_sampling.cpp: distinct-token samples, power-law gaps, shuffles and the query-region writer
// shared by mqar and mqrar (see recall_sampling.hpp). Scratch buffers are thread_local and left
// clean after every call, so results depend only on the Rng stream, never on the thread.
#include "tasks/recall_sampling.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.hpp"

namespace sb::recall {

void sample_distinct(Rng& rng, int32_t lo, int32_t n, int32_t k, int32_t* out) {
  if (k < 0 || k > n) fail("sample_distinct: cannot draw {} distinct values from {}", k, n);
  if (static_cast<int64_t>(k) * 2 <= n) {
    // Sparse: draw uniformly and reject repeats (each accepted draw is uniform over the values not
    // yet taken, so the ordered sample is uniform). Expected draws < 2k.
    thread_local std::vector<uint64_t> taken;  // bitset over [0, n), all zero between calls
    const size_t words = (static_cast<size_t>(n) + 63) / 64;
    if (taken.size() < words) taken.resize(words, 0);
    for (int32_t i = 0; i < k; ++i) {
      uint32_t v;
      do {
        v = rng.below(static_cast<uint32_t>(n));
      } while (taken[v >> 6] >> (v & 63) & 1u);
      taken[v >> 6] |= uint64_t{1} << (v & 63);
      out[i] = lo + static_cast<int32_t>(v);
    }
    for (int32_t i = 0; i < k; ++i) {
      const uint32_t v = static_cast<uint32_t>(out[i] - lo);
      taken[v >> 6] = 0;
    }
    return;
  }
  // Dense: the first k steps of a Fisher-Yates shuffle of [0, n).
  thread_local std::vector<int32_t> pool;
  pool.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) pool[static_cast<size_t>(i)] = i;
  for (int32_t i = 0; i < k; ++i) {
    const int32_t j = i + static_cast<int32_t>(rng.below(static_cast<uint32_t>(n - i)));
    std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(j)]);
    out[i] = lo + pool[static_cast<size_t>(i)];
  }
}

void shuffle(Rng& rng, int32_t* items, int32_t n) {
  for (int32_t i = n - 1; i > 0; --i) {
    const int32_t j = static_cast<int32_t>(rng.below(static_cast<uint32_t>(i + 1)));
    std::swap(items[i], items[j]);
  }
}

PowerLawGaps::PowerLawGaps(int64_t space, double power_a) : power_a_(power_a) {
  if (space < 0) fail("power-law gaps: negative space {}", space);
  if (!(power_a > 0)) fail("power-law gaps: power_a={} must be > 0", power_a);
  inverse_weight_.resize(static_cast<size_t>(space));
  probability_.resize(static_cast<size_t>(space));
  double total = 0;
  for (int64_t g = 0; g < space; ++g) {
    const double w = std::pow(static_cast<double>(g + 1), power_a - 1.0);
    inverse_weight_[static_cast<size_t>(g)] = 1.0 / w;
    probability_[static_cast<size_t>(g)] = w;
    total += w;
  }
  for (double& p : probability_) p /= total;
}

void PowerLawGaps::draw(Rng& rng, int32_t k, int32_t* gaps, int64_t slots) const {
  if (slots < 0 || slots > space()) fail("power-law gaps: {} slots outside the table of {}", slots, space());
  const int64_t S = slots;
  if (k < 0 || k > S) fail("power-law gaps: cannot draw {} distinct gaps from {} slots", k, S);
  if (k == 0) return;
  // Efraimidis-Spirakis as an exponential race: slot g "arrives" at E_g / w_g with E_g ~ Exp(1)
  // i.i.d.; arrival order is successive sampling proportional to w without replacement, so the k
  // earliest arrivals, earliest first, are exactly the first k sequential weighted draws.
  thread_local std::vector<std::pair<double, int32_t>> arrivals;
  arrivals.resize(static_cast<size_t>(S));
  for (int64_t g = 0; g < S; ++g)
    arrivals[static_cast<size_t>(g)] = {-std::log(uniform_open(rng)) * inverse_weight_[static_cast<size_t>(g)],
                                        static_cast<int32_t>(g)};
  // Pairs compare by (time, slot): a total order, so the result is deterministic.
  const auto kth = arrivals.begin() + k;
  if (k < S) std::nth_element(arrivals.begin(), kth - 1, arrivals.end());
  std::sort(arrivals.begin(), kth);
  for (int32_t i = 0; i < k; ++i) gaps[i] = arrivals[static_cast<size_t>(i)].second;
}

QueryOrder parse_query_order(const std::string& name) {
  if (name == "zoology") return QueryOrder::kZoology;
  if (name == "shuffled") return QueryOrder::kShuffled;
  fail("unknown query order '{}' (known: zoology, shuffled)", name);
}

void write_queries(Rng& rng, const PowerLawGaps& gaps, QueryOrder order, const int32_t* query_keys,
                   const int32_t* answers, int32_t K, int64_t context_len, int64_t T, ExampleView out) {
  const int64_t slots = (T - context_len) / 2;
  if (context_len < 0 || slots < 0 || slots > gaps.space())
    fail("write_queries: {} query slots after {} context tokens in {} exceed the gap table's {}", slots, context_len,
         T, gaps.space());
  std::fill(out.input_ids + context_len, out.input_ids + T, 0);
  std::fill(out.labels, out.labels + T, kIgnoreLabel);
  std::fill(out.score_mask, out.score_mask + T, uint8_t{0});
  thread_local std::vector<int32_t> drawn, slot_of_query;
  drawn.resize(static_cast<size_t>(K));
  slot_of_query.resize(static_cast<size_t>(K));
  gaps.draw(rng, K, drawn.data(), slots);
  for (int32_t i = 0; i < K; ++i) slot_of_query[static_cast<size_t>(i)] = i;
  if (order == QueryOrder::kShuffled) shuffle(rng, slot_of_query.data(), K);
  for (int32_t i = 0; i < K; ++i) {
    const int64_t t = context_len + 2 * static_cast<int64_t>(drawn[static_cast<size_t>(slot_of_query[static_cast<size_t>(i)])]);
    out.input_ids[t] = query_keys[i];
    out.labels[t] = answers[i];
    out.score_mask[t] = 1;
  }
}

void fill_zeros_with_random_tokens(Rng& rng, int32_t vocab, int32_t* input_ids, int64_t T) {
  for (int64_t t = 0; t < T; ++t)
    if (input_ids[t] == 0) input_ids[t] = static_cast<int32_t>(rng.below(static_cast<uint32_t>(vocab)));
}

std::vector<std::string> recall_vocab(int32_t vocab) {
  std::vector<std::string> names(static_cast<size_t>(vocab));
  const int32_t half = vocab / 2;
  for (int32_t t = 0; t < vocab; ++t)
    names[static_cast<size_t>(t)] = t == 0 ? std::string("_") : fmt::format("{}{}", t < half ? 'k' : 'v', t);
  return names;
}

}  // namespace sb::recall
