// ops_basic.cpp: embedding, linear, RMSNorm, LayerNorm and residual ops (forward + backward) over
// Eigen maps of caller buffers; explicitly instantiated for float and double at the end
// (one per compilation, nn/instantiate.hpp).
#include "nn/ops_basic.hpp"

#include <Eigen/Core>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "nn/eigen_views.hpp"
#include "nn/instantiate.hpp"

namespace sb::nn {
namespace {

template <class S>
using MapM = Eigen::Map<MatR<S>>;
template <class S>
using MapCM = Eigen::Map<const MatR<S>>;
template <class S>
using MapV = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>;
template <class S>
using MapCV = Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>;

void check_id(int32_t id, int64_t n, int64_t V) {
  if (id < 0 || id >= V) fail("embedding: token id {} at position {} is outside [0, {})", id, n, V);
}

}  // namespace

// ---- embedding ---------------------------------------------------------------------------------
template <class S>
void embedding_forward(S* out, const int32_t* ids, const S* wte, int64_t N, int64_t V, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    check_id(ids[n], n, V);
    std::memcpy(out + n * D, wte + static_cast<int64_t>(ids[n]) * D, sizeof(S) * static_cast<size_t>(D));
  }
}

template <class S>
void embedding_backward(S* dwte, const S* dout, const int32_t* ids, int64_t N, int64_t V, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    check_id(ids[n], n, V);
    MapV<S>(dwte + static_cast<int64_t>(ids[n]) * D, D) += MapCV<S>(dout + n * D, D);
  }
}

template <class S>
void position_forward(S* out, const S* wpe, int64_t B, int64_t T, int64_t D) {
  for (int64_t b = 0; b < B; ++b) MapV<S>(out + b * T * D, T * D) += MapCV<S>(wpe, T * D);
}

template <class S>
void position_backward(S* dwpe, const S* dout, int64_t B, int64_t T, int64_t D) {
  for (int64_t b = 0; b < B; ++b) MapV<S>(dwpe, T * D) += MapCV<S>(dout + b * T * D, T * D);
}

// ---- linear ------------------------------------------------------------------------------------
template <class S>
void linear_forward(S* out, const S* inp, const S* weight, const S* bias, int64_t N, int64_t I, int64_t O) {
  MapM<S> y(out, N, O);
  MapCM<S> x(inp, N, I), w(weight, O, I);
  y.noalias() = x * w.transpose();
  if (bias) y.rowwise() += Eigen::Map<const Eigen::Matrix<S, 1, Eigen::Dynamic>>(bias, O);
}

template <class S>
void linear_backward(S* dinp, S* dweight, S* dbias, const S* dout, const S* inp, const S* weight,
                     int64_t N, int64_t I, int64_t O) {
  MapCM<S> dy(dout, N, O), x(inp, N, I), w(weight, O, I);
  if (dinp) MapM<S>(dinp, N, I).noalias() += dy * w;
  if (dweight) MapM<S>(dweight, O, I).noalias() += dy.transpose() * x;
  if (dbias) Eigen::Map<Eigen::Matrix<S, 1, Eigen::Dynamic>>(dbias, O) += dy.colwise().sum();
}

// ---- RMSNorm -----------------------------------------------------------------------------------
template <class S>
void rmsnorm_forward(S* out, S* rstd, const S* inp, const S* weight, int64_t N, int64_t D, double eps) {
  for (int64_t n = 0; n < N; ++n) {
    MapCV<S> x(inp + n * D, D);
    const S r = static_cast<S>(1.0 / std::sqrt(static_cast<double>(x.square().sum()) / D + eps));
    rstd[n] = r;
    MapV<S> y(out + n * D, D);
    if (weight)
      y = x * r * MapCV<S>(weight, D);
    else
      y = x * r;
  }
}

// With g = dout * weight and xhat = x * rstd:  dx = rstd * (g - xhat * mean(g * xhat)).
template <class S>
void rmsnorm_backward(S* dinp, S* dweight, const S* dout, const S* inp, const S* weight, const S* rstd,
                      int64_t N, int64_t D) {
  Eigen::Array<S, Eigen::Dynamic, 1> g(D);
  for (int64_t n = 0; n < N; ++n) {
    MapCV<S> x(inp + n * D, D), dy(dout + n * D, D);
    const S r = rstd[n];
    if (weight && dweight) MapV<S>(dweight, D) += dy * x * r;
    if (!dinp) continue;
    if (weight)
      g = dy * MapCV<S>(weight, D);
    else
      g = dy;
    const S mean_gx = (g * x).sum() * r / static_cast<S>(D);  // mean(g * xhat)
    MapV<S>(dinp + n * D, D) += r * (g - x * (r * mean_gx));
  }
}

// ---- LayerNorm ---------------------------------------------------------------------------------
template <class S>
void layernorm_forward(S* out, S* mean, S* rstd, const S* inp, const S* weight, const S* bias, int64_t N,
                       int64_t D, double eps) {
  for (int64_t n = 0; n < N; ++n) {
    MapCV<S> x(inp + n * D, D);
    const S m = x.sum() / static_cast<S>(D);
    const double var = static_cast<double>((x - m).square().sum()) / D;
    const S r = static_cast<S>(1.0 / std::sqrt(var + eps));
    mean[n] = m;
    rstd[n] = r;
    MapV<S> y(out + n * D, D);
    y = (x - m) * r;
    if (weight) y *= MapCV<S>(weight, D);
    if (bias) y += MapCV<S>(bias, D);
  }
}

// With g = dout * weight and xhat = (x - mean) * rstd:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
template <class S>
void layernorm_backward(S* dinp, S* dweight, S* dbias, const S* dout, const S* inp, const S* weight,
                        const S* mean, const S* rstd, int64_t N, int64_t D) {
  Eigen::Array<S, Eigen::Dynamic, 1> g(D), xhat(D);
  for (int64_t n = 0; n < N; ++n) {
    MapCV<S> x(inp + n * D, D), dy(dout + n * D, D);
    xhat = (x - mean[n]) * rstd[n];
    if (dbias) MapV<S>(dbias, D) += dy;
    if (weight && dweight) MapV<S>(dweight, D) += dy * xhat;
    if (!dinp) continue;
    if (weight)
      g = dy * MapCV<S>(weight, D);
    else
      g = dy;
    const S mean_g = g.sum() / static_cast<S>(D);
    const S mean_gx = (g * xhat).sum() / static_cast<S>(D);
    MapV<S>(dinp + n * D, D) += rstd[n] * (g - mean_g - xhat * mean_gx);
  }
}

// ---- residual ----------------------------------------------------------------------------------
template <class S>
void residual_forward(S* out, const S* inp1, const S* inp2, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = inp1[i] + inp2[i];
}

template <class S>
void residual_backward(S* dinp1, S* dinp2, const S* dout, int64_t n) {
  if (dinp1) add_scaled(dinp1, dout, 1.0, n);
  if (dinp2) add_scaled(dinp2, dout, 1.0, n);
}

template <class S>
void add_scaled(S* dst, const S* src, double alpha, int64_t n) {
  const S a = static_cast<S>(alpha);
  if (a == S(1)) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] += a * src[i];
  }
}

// ---- explicit instantiations -------------------------------------------------------------------
#define SB_INSTANTIATE_OPS_BASIC(S)                                                                   \
  template void embedding_forward<S>(S*, const int32_t*, const S*, int64_t, int64_t, int64_t);       \
  template void embedding_backward<S>(S*, const S*, const int32_t*, int64_t, int64_t, int64_t);      \
  template void position_forward<S>(S*, const S*, int64_t, int64_t, int64_t);                        \
  template void position_backward<S>(S*, const S*, int64_t, int64_t, int64_t);                       \
  template void linear_forward<S>(S*, const S*, const S*, const S*, int64_t, int64_t, int64_t);      \
  template void linear_backward<S>(S*, S*, S*, const S*, const S*, const S*, int64_t, int64_t,       \
                                   int64_t);                                                          \
  template void rmsnorm_forward<S>(S*, S*, const S*, const S*, int64_t, int64_t, double);            \
  template void rmsnorm_backward<S>(S*, S*, const S*, const S*, const S*, const S*, int64_t, int64_t); \
  template void layernorm_forward<S>(S*, S*, S*, const S*, const S*, const S*, int64_t, int64_t,     \
                                     double);                                                         \
  template void layernorm_backward<S>(S*, S*, S*, const S*, const S*, const S*, const S*, const S*,  \
                                      int64_t, int64_t);                                              \
  template void residual_forward<S>(S*, const S*, const S*, int64_t);                                \
  template void residual_backward<S>(S*, S*, const S*, int64_t);                                     \
  template void add_scaled<S>(S*, const S*, double, int64_t);

SB_INSTANTIATE_OPS_BASIC(SB_NN_SCALAR)
#undef SB_INSTANTIATE_OPS_BASIC

}  // namespace sb::nn
