// epoch_order.cpp: per-epoch permutations of a fixed training set (epoch_order.hpp): a 4-round
// Feistel network on 2k bits (4^k >= n), keyed by (seed, epoch), with cycle walking: applying it
// until the value falls below n restricts the bijection of 0..4^k-1 to one of 0..n-1, in under four
// applications on average (4^k < 4n).
#include "train/epoch_order.hpp"

#include "statebench/rng.hpp"

namespace sb {
namespace {

uint64_t feistel(uint64_t x, int half_bits, uint64_t key) {
  const uint64_t mask = (uint64_t{1} << half_bits) - 1;
  uint64_t left = x >> half_bits, right = x & mask;
  for (uint64_t round = 0; round < 4; ++round) {
    const uint64_t f = mix64(key ^ mix64(right + (round << 56))) & mask;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits) | right;
}

}  // namespace

uint64_t epoch_shuffled_index(uint64_t seed, uint64_t n, uint64_t g) {
  if (n <= 1) return 0;
  const uint64_t epoch = g / n, position = g % n;
  int half_bits = 1;
  while (half_bits < 32 && (uint64_t{1} << (2 * half_bits)) < n) ++half_bits;
  const uint64_t key = mix64(mix64(seed ^ 0x53485546464C45ull) ^ epoch);  // "SHUFFLE"
  uint64_t x = position;
  do x = feistel(x, half_bits, key);
  while (x >= n);
  return x;
}

}  // namespace sb
