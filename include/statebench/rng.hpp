// rng.hpp: the counter-based random number generator behind every task.
// Philox4x32-10 (Salmon et al., SC'11): example i of a split is a pure function of
// (key, index, attempt), so any example can be regenerated alone, on any thread or machine.
// Header-only and dependency-free: plugins include it too.
#pragma once
#include <cstdint>
#include <string_view>

namespace sb {

// splitmix64 finaliser: mixes a 64-bit value into a well-spread 64-bit value.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a over bytes: stable across runs and machines (std::hash is not).
constexpr uint64_t hash_str(std::string_view s, uint64_t h = 0xCBF29CE484222325ull) {
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

// The stream key of (seed, task, split): what makes splits and seeds independent streams.
constexpr uint64_t stream_key(uint64_t seed, std::string_view task, std::string_view split) {
  return mix64(mix64(seed) ^ hash_str(split, hash_str(task)));
}

class Rng {
 public:
  // key: the stream (seed, task, split); index: the example; attempt: re-draw counter used
  // when an example is rejected (e.g. by the split partition) so redraws stay reproducible.
  Rng(uint64_t key, uint64_t index, uint32_t attempt = 0)
      : k0_(static_cast<uint32_t>(key)), k1_(static_cast<uint32_t>(key >> 32)),
        c0_(static_cast<uint32_t>(index)), c1_(static_cast<uint32_t>(index >> 32)), c2_(attempt) {}

  uint32_t u32() {
    if (pos_ == 4) refill();
    return out_[pos_++];
  }
  uint64_t u64() {
    uint64_t hi = u32();
    return (hi << 32) | u32();
  }
  // Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(u64() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). n >= 1.
  uint32_t below(uint32_t n) {
    uint64_t m = static_cast<uint64_t>(u32()) * n;
    uint32_t low = static_cast<uint32_t>(m);
    if (low < n) {
      const uint32_t threshold = static_cast<uint32_t>(-n) % n;
      while (low < threshold) {
        m = static_cast<uint64_t>(u32()) * n;
        low = static_cast<uint32_t>(m);
      }
    }
    return static_cast<uint32_t>(m >> 32);
  }
  bool bernoulli(double p) { return uniform() < p; }

 private:
  void refill() {
    uint32_t c[4] = {c0_, c1_, c2_, block_++};
    uint32_t k0 = k0_, k1 = k1_;
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
      const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
      const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
      c[0] = hi1 ^ c[1] ^ k0;
      c[1] = lo1;
      c[2] = hi0 ^ c[3] ^ k1;
      c[3] = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int i = 0; i < 4; ++i) out_[i] = c[i];
    pos_ = 0;
  }

  uint32_t k0_, k1_, c0_, c1_, c2_;
  uint32_t block_ = 0;
  uint32_t out_[4] = {0, 0, 0, 0};
  int pos_ = 4;
};

}  // namespace sb
