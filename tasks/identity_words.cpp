// identity_words.cpp: exact conditional sampling of words by their product (identity_words.hpp).
// inputs=all: letters 1..k-1 uniform, the last one completes the inverse of the prefix (identity)
// or is uniform among the others (not). Generators: letter by letter, letter s after prefix p is
// chosen with weight P(a uniform completion of the remaining r letters evaluates to (p*s)^-1)
// (identity) or 1 minus it (not): the random-walk distributions walk_[r], computed once.
#include "tasks/identity_words.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"

namespace sb {
namespace {

// Rows kept at most: 2^24 doubles (128 MiB) in all.
constexpr int64_t kMaxWalkEntries = int64_t{1} << 24;
// Two rows one period apart closer than this (max norm) mean the walk has settled.
constexpr double kSettled = 1e-16;

// The period of the walk h -> h*s over the Cayley graph from e: gcd over its edges of
// dist(h) + 1 - dist(h*s), dist the BFS distance from e (the graph is strongly connected).
int64_t walk_period(const PermGroup& g, const std::vector<int32_t>& alphabet) {
  const int32_t G = g.order();
  std::vector<int64_t> dist(static_cast<size_t>(G), -1);
  std::vector<int32_t> queue{0};
  dist[0] = 0;
  for (size_t head = 0; head < queue.size(); ++head)
    for (const int32_t s : alphabet) {
      const int32_t next = g.mul(queue[head], s);
      if (dist[static_cast<size_t>(next)] < 0) {
        dist[static_cast<size_t>(next)] = dist[static_cast<size_t>(queue[head])] + 1;
        queue.push_back(next);
      }
    }
  int64_t d = 0;
  for (int32_t h = 0; h < G; ++h)
    for (const int32_t s : alphabet)
      d = std::gcd(d, std::abs(dist[static_cast<size_t>(h)] + 1 - dist[static_cast<size_t>(g.mul(h, s))]));
  return std::max<int64_t>(d, 1);
}

}  // namespace

ConditionedWords::ConditionedWords(const PermGroup& group, std::vector<int32_t> alphabet, bool whole_group,
                                   int64_t max_length)
    : group_(&group), alphabet_(std::move(alphabet)), whole_group_(whole_group) {
  const auto G = static_cast<size_t>(group.order());
  if (alphabet_.empty()) fail("conditioned words: empty alphabet");
  walk_.emplace_back(G, 0.0);
  walk_[0][0] = 1.0;
  if (whole_group_) {  // one uniform letter already gives the uniform distribution
    walk_.emplace_back(G, 1.0 / static_cast<double>(G));
    return;
  }
  period_ = walk_period(group, alphabet_);
  const double share = 1.0 / static_cast<double>(alphabet_.size());
  const int64_t max_rows = std::max<int64_t>(2, kMaxWalkEntries / static_cast<int64_t>(G));
  for (int64_t r = 1; r <= max_length; ++r) {
    if (r >= max_rows)
      fail("the identity-word table over {} letters of group '{}' has not settled after {} letters; use a length "
           "below {}", alphabet_.size(), group.spec(), r - 1, r);
    std::vector<double> next(G, 0.0);
    const std::vector<double>& prev = walk_.back();
    for (size_t h = 0; h < G; ++h)
      if (prev[h] != 0.0)
        for (const int32_t s : alphabet_) next[static_cast<size_t>(group.mul(static_cast<int32_t>(h), s))] += prev[h] * share;
    walk_.push_back(std::move(next));
    if (r >= period_) {
      const std::vector<double>& a = walk_[static_cast<size_t>(r)];
      const std::vector<double>& b = walk_[static_cast<size_t>(r - period_)];
      double diff = 0;
      for (size_t h = 0; h < G; ++h) diff = std::max(diff, std::fabs(a[h] - b[h]));
      if (diff <= kSettled) break;
    }
  }
}

const double* ConditionedWords::row(int64_t r) const {
  const int64_t last = static_cast<int64_t>(walk_.size()) - 1;
  if (r <= last) return walk_[static_cast<size_t>(r)].data();
  if (whole_group_) return walk_[1].data();
  // The walk settled by row `last`: the stored row of r's phase, last - ((last - r) mod period).
  const int64_t behind = (period_ - (r - last) % period_) % period_;
  return walk_[static_cast<size_t>(last - behind)].data();
}

void ConditionedWords::draw(Rng& rng, int64_t length, bool identity, int32_t* word) const {
  const PermGroup& g = *group_;
  const int32_t G = g.order();
  if (whole_group_) {
    int32_t p = 0;
    for (int64_t t = 0; t + 1 < length; ++t) {
      word[t] = static_cast<int32_t>(rng.below(static_cast<uint32_t>(G)));
      p = g.mul(p, word[t]);
    }
    const int32_t completion = g.inverse(p);  // the one last letter that makes the product e
    if (identity) {
      word[length - 1] = completion;
    } else {
      if (G < 2) fail("conditioned words: group '{}' has no element but the identity", g.spec());
      const auto x = static_cast<int32_t>(rng.below(static_cast<uint32_t>(G - 1)));
      word[length - 1] = x >= completion ? x + 1 : x;
    }
    return;
  }
  thread_local std::vector<double> cumulative;
  cumulative.resize(alphabet_.size());
  const uint16_t* table = g.table();
  int32_t p = 0;
  for (int64_t t = 0; t < length; ++t) {
    const double* rest = row(length - 1 - t);  // the letters after this one
    double total = 0;
    for (size_t i = 0; i < alphabet_.size(); ++i) {
      const int32_t q = table[static_cast<size_t>(p) * G + static_cast<size_t>(alphabet_[i])];
      const double reach = rest[static_cast<size_t>(g.inverse(q))];  // P(the rest evaluates to q^-1)
      total += identity ? reach : 1.0 - reach;
      cumulative[i] = total;
    }
    if (!(total > 0))
      fail("conditioned words: no {} word of length {} over the alphabet of group '{}'",
           identity ? "identity" : "non-identity", length, g.spec());
    // First letter whose cumulative weight exceeds u: never a zero-weight letter.
    const double u = rng.uniform() * total;
    size_t i = 0;
    while (i + 1 < alphabet_.size() && !(cumulative[i] > u)) ++i;
    word[t] = alphabet_[i];
    p = table[static_cast<size_t>(p) * G + static_cast<size_t>(alphabet_[i])];
  }
}

}  // namespace sb
