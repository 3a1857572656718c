// test_epoch_order.cpp: train.shuffle: epoch's order of a fixed training set (src/train/epoch_order):
// every epoch a permutation of the set, a different one per epoch and per seed, a pure function of
// the position; and its use by training (a batch's examples, resume).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "train/epoch_order.hpp"

namespace sb {
namespace {

std::vector<uint64_t> epoch_of(uint64_t seed, uint64_t n, uint64_t epoch) {
  std::vector<uint64_t> order(n);
  for (uint64_t p = 0; p < n; ++p) order[p] = epoch_shuffled_index(seed, n, epoch * n + p);
  return order;
}

bool is_permutation_of_range(const std::vector<uint64_t>& order) {
  std::vector<bool> seen(order.size(), false);
  for (uint64_t x : order) {
    if (x >= order.size() || seen[x]) return false;
    seen[x] = true;
  }
  return true;
}

TEST(EpochOrder, EveryEpochIsAPermutationOfTheSet) {
  // Sizes around the Feistel domain's powers of 4 (cycle walking), and Merrill's A5 set.
  for (uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 7ull, 16ull, 17ull, 1000ull, 4097ull, 803600ull})
    for (uint64_t epoch : {0ull, 1ull, 7ull})
      for (uint64_t seed : {0ull, 3ull}) EXPECT_TRUE(is_permutation_of_range(epoch_of(seed, n, epoch))) << n;
}

TEST(EpochOrder, DiffersByEpochAndSeedAndIsNotTheIndexOrder) {
  const uint64_t n = 1000;
  const std::vector<uint64_t> e0 = epoch_of(0, n, 0), e1 = epoch_of(0, n, 1), s1 = epoch_of(1, n, 0);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, s1);
  size_t fixed = 0;  // a random permutation fixes ~1 point; index order would fix all 1000
  for (uint64_t p = 0; p < n; ++p) fixed += e0[p] == p;
  EXPECT_LT(fixed, 10u);
  // Mixed, not a rotation: the first 100 positions draw from all over the set.
  std::set<uint64_t> tenths;
  for (uint64_t p = 0; p < 100; ++p) tenths.insert(e0[p] / 100);
  EXPECT_GE(tenths.size(), 8u);
  EXPECT_EQ(epoch_of(0, n, 1), e1);  // a pure function: the same again
  EXPECT_EQ(epoch_shuffled_index(5, 1, 12345), 0u);
}

}  // namespace
}  // namespace sb
