// identity_words.hpp: words over a permutation group's input alphabet (every element, or a
// generating set) drawn uniformly at random CONDITIONED on whether they evaluate to the identity:
// the balanced sampler behind word_problem labels=identity. Uniform words are almost never the
// identity (about 1/|G|), so each class is drawn exactly from its own conditional distribution.
#pragma once
#include <cstdint>
#include <vector>

#include "statebench/rng.hpp"
#include "tasks/perm_group.hpp"

namespace sb {

class ConditionedWords {
 public:
  // Words of up to max_length letters, each letter uniform over `alphabet` (element ids of
  // `group`, which must outlive this object); whole_group: the alphabet is every element.
  // Throws sb::Error when the table it needs would not fit in memory (a slowly mixing walk at a
  // great length); the message names the length it reached.
  ConditionedWords(const PermGroup& group, std::vector<int32_t> alphabet, bool whole_group, int64_t max_length);

  // P(a uniform word of `length` letters evaluates to the identity e).
  double identity_probability(int64_t length) const { return row(length)[0]; }

  // A word of `length` letters, uniform among those with (product == e) == identity. Requires
  // 1 <= length <= max_length and 0 < identity_probability(length) < 1 as needed by `identity`.
  void draw(Rng& rng, int64_t length, bool identity,
            int32_t* word) const;  // [length]

 private:
  // walk_[r]: distribution of the product of r uniform letters ([G], e = element 0); beyond the
  // stored rows the walk is periodic with period_ to double precision.
  const double* row(int64_t r) const;

  const PermGroup* group_;
  std::vector<int32_t> alphabet_;
  bool whole_group_;
  int64_t period_ = 1;
  std::vector<std::vector<double>> walk_;  // [rows][G]
};

}  // namespace sb
