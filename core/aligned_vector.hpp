// aligned_vector.hpp: std::vector with Eigen's maximal alignment (64 bytes with AVX-512).
// Every buffer Eigen reduces over lives in one: Eigen peels unaligned heads off vectorised
// reductions, so a buffer's alignment would otherwise change the summation order, and malloc's
// alignment varies between runs: aligned storage keeps training bit-reproducible.
#pragma once
#include <Eigen/Core>
#include <vector>

namespace sb {

template <class T>
using AlignedVector = std::vector<T, Eigen::aligned_allocator<T>>;

}  // namespace sb
