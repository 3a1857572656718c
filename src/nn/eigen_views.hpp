// eigen_views.hpp: the Eigen types the CPU ops share: row-major matrices, and views of one head's
// [T, Dh] slice inside a [B, T, H, Dh] tensor (rows H * Dh apart).
#pragma once
#include <Eigen/Core>

namespace sb::nn {

template <class S>
using MatR = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using HeadMap = Eigen::Map<MatR<S>, 0, Eigen::OuterStride<>>;
template <class S>
using HeadCMap = Eigen::Map<const MatR<S>, 0, Eigen::OuterStride<>>;

}  // namespace sb::nn
