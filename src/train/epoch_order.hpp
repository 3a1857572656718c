// epoch_order.hpp: the order in which a fixed training set is read with train.shuffle: epoch. Each
// pass over the N examples (an epoch) is its own pseudo-random permutation, keyed by the seed and
// the epoch, as a PyTorch DataLoader with shuffle=True; computed per position (a keyed Feistel
// bijection, cycle-walked into 0..N-1), so a step's batch is a pure function of the step.
#pragma once

#include <cstdint>

namespace sb {

// The example index at position g of the training stream over a set of n >= 1 examples: epoch
// g / n reads a permutation of 0..n-1, a different one per (seed, epoch).
uint64_t epoch_shuffled_index(uint64_t seed, uint64_t n, uint64_t g);

}  // namespace sb
