// path_wpath.cpp: forward and backward of the PaTH w path (causal depthwise conv3, SiLU, per-head
// L2 normalisation) and of beta = min(2 sigmoid(z), beta_max). Conventions in path_wpath.hpp.
#include "core/aligned_vector.hpp"
#include "nn/path_wpath.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "nn/instantiate.hpp"

namespace sb::nn {
namespace {

template <class S>
S stable_sigmoid(S x) {
  if (x >= 0) return S(1) / (S(1) + std::exp(-x));
  const S e = std::exp(x);
  return e / (S(1) + e);
}

void check_wpath_shape(int64_t B, int64_t T, int64_t H, int64_t Dh) {
  if (B < 1 || T < 1 || H < 1 || Dh < 1)
    fail("path w path: bad shape (B, T, H, Dh) = ({}, {}, {}, {})", B, T, H, Dh);
}

constexpr int64_t kTaps = 3;

}  // namespace

template <class S>
void path_wpath_forward(S* w, S* conv_out, const S* u, const S* wconv, const S* bias, int64_t B,
                        int64_t T, int64_t H, int64_t Dh, S eps) {
  check_wpath_shape(B, T, H, Dh);
  const int64_t C = H * Dh;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t row = (b * T + t) * C;
      for (int64_t c = 0; c < C; ++c) {
        S a = bias ? bias[c] : S(0);
        for (int64_t k = 0; k < kTaps; ++k) {
          const int64_t src = t - (kTaps - 1) + k;
          if (src >= 0) a += wconv[c * kTaps + k] * u[(b * T + src) * C + c];
        }
        conv_out[row + c] = a;
        w[row + c] = a * stable_sigmoid(a);
      }
      for (int64_t h = 0; h < H; ++h) {
        S* wh = w + row + h * Dh;
        S sq = 0;
        for (int64_t i = 0; i < Dh; ++i) sq += wh[i] * wh[i];
        const S inv = S(1) / std::sqrt(sq + eps);
        for (int64_t i = 0; i < Dh; ++i) wh[i] *= inv;
      }
    }
}

template <class S>
void path_wpath_backward(S* du, S* dwconv, S* dbias, const S* dw, const S* conv_out, const S* u,
                         const S* wconv, int64_t B, int64_t T, int64_t H, int64_t Dh, S eps) {
  check_wpath_shape(B, T, H, Dh);
  const int64_t C = H * Dh;
  AlignedVector<S> hv(static_cast<size_t>(Dh)), da(static_cast<size_t>(C));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t row = (b * T + t) * C;
      // Through the normalisation: w = h / n, n = sqrt(|h|^2 + eps): dh = (dw - w (w . dw)) / n.
      for (int64_t h = 0; h < H; ++h) {
        const S* a = conv_out + row + h * Dh;
        const S* g = dw + row + h * Dh;
        S sq = 0;
        for (int64_t i = 0; i < Dh; ++i) {
          const S sg = stable_sigmoid(a[i]);
          hv[i] = a[i] * sg;
          sq += hv[i] * hv[i];
        }
        const S inv = S(1) / std::sqrt(sq + eps);
        S wdw = 0;
        for (int64_t i = 0; i < Dh; ++i) wdw += hv[i] * inv * g[i];
        for (int64_t i = 0; i < Dh; ++i) {
          const S dh = (g[i] - hv[i] * inv * wdw) * inv;
          // silu'(a) = s (1 + a (1 - s))
          const S sg = stable_sigmoid(a[i]);
          da[h * Dh + i] = dh * sg * (S(1) + a[i] * (S(1) - sg));
        }
      }
      // Through the convolution.
      for (int64_t c = 0; c < C; ++c) {
        const S d = da[c];
        if (dbias) dbias[c] += d;
        for (int64_t k = 0; k < kTaps; ++k) {
          const int64_t src = t - (kTaps - 1) + k;
          if (src < 0) continue;
          const int64_t at = (b * T + src) * C + c;
          if (du) du[at] += wconv[c * kTaps + k] * d;
          if (dwconv) dwconv[c * kTaps + k] += d * u[at];
        }
      }
    }
}

template <class S>
void path_beta_forward(S* beta, const S* z, int64_t n, S beta_max) {
  for (int64_t i = 0; i < n; ++i) beta[i] = std::min(S(2) * stable_sigmoid(z[i]), beta_max);
}

template <class S>
void path_beta_backward(S* dz, const S* dbeta, const S* z, int64_t n, S beta_max) {
  for (int64_t i = 0; i < n; ++i) {
    const S sg = stable_sigmoid(z[i]);
    if (S(2) * sg > beta_max) continue;  // clamped: zero gradient
    dz[i] += dbeta[i] * S(2) * sg * (S(1) - sg);
  }
}

#define SB_PATH_WPATH_INSTANTIATE(S)                                                          \
  template void path_wpath_forward<S>(S*, S*, const S*, const S*, const S*, int64_t, int64_t, \
                                      int64_t, int64_t, S);                                   \
  template void path_wpath_backward<S>(S*, S*, S*, const S*, const S*, const S*, const S*,    \
                                       int64_t, int64_t, int64_t, int64_t, S);                \
  template void path_beta_forward<S>(S*, const S*, int64_t, S);                               \
  template void path_beta_backward<S>(S*, const S*, const S*, int64_t, S);
SB_PATH_WPATH_INSTANTIATE(SB_NN_SCALAR)
#undef SB_PATH_WPATH_INSTANTIATE

}  // namespace sb::nn
