// ops_act.cpp: elementwise activations and SwiGLU, forward + backward, vectorised through Eigen
// arrays (exp / log1p) where Eigen has a packet version; explicit float / double instantiations
// (one per compilation, nn/instantiate.hpp).
#include "nn/ops_act.hpp"

#include <Eigen/Core>
#include <cmath>

#include "nn/instantiate.hpp"

namespace sb::nn {
namespace {

template <class S>
using Arr = Eigen::Array<S, Eigen::Dynamic, 1>;
template <class S>
using MapA = Eigen::Map<Arr<S>>;
template <class S>
using MapCA = Eigen::Map<const Arr<S>>;

// sigmoid(x) = 1 / (1 + exp(-x)): exp(-x) overflows to +inf for very negative x, giving exactly 0,
// never NaN, so this single form is safe over the whole real line.
template <class Expr>
auto sigmoid_expr(const Expr& x) {
  using S = typename Expr::Scalar;
  return (S(1) + (-x).exp()).inverse();
}

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

}  // namespace

// ---- SiLU --------------------------------------------------------------------------------------
template <class S>
void silu_forward(S* out, const S* inp, int64_t n) {
  MapCA<S> x(inp, n);
  MapA<S>(out, n) = x * sigmoid_expr(x);
}

template <class S>
void silu_backward(S* dinp, const S* dout, const S* inp, int64_t n) {
  MapCA<S> x(inp, n), dy(dout, n);
  const Arr<S> s = sigmoid_expr(x);
  MapA<S>(dinp, n) += dy * s * (S(1) + x * (S(1) - s));
}

// ---- GELU (exact) ------------------------------------------------------------------------------
template <class S>
void gelu_forward(S* out, const S* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const S x = inp[i];
    out[i] = S(0.5) * x * (S(1) + std::erf(x * S(kInvSqrt2)));
  }
}

template <class S>
void gelu_backward(S* dinp, const S* dout, const S* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const S x = inp[i];
    const S cdf = S(0.5) * (S(1) + std::erf(x * S(kInvSqrt2)));
    const S pdf = S(kInvSqrt2Pi) * std::exp(S(-0.5) * x * x);
    dinp[i] += dout[i] * (cdf + x * pdf);
  }
}

// ---- sigmoid -----------------------------------------------------------------------------------
template <class S>
void sigmoid_forward(S* out, const S* inp, int64_t n) {
  MapA<S>(out, n) = sigmoid_expr(MapCA<S>(inp, n));
}

template <class S>
void sigmoid_backward(S* dinp, const S* dout, const S* inp, int64_t n) {
  const Arr<S> s = sigmoid_expr(MapCA<S>(inp, n));
  MapA<S>(dinp, n) += MapCA<S>(dout, n) * s * (S(1) - s);
}

// ---- log-sigmoid -------------------------------------------------------------------------------
template <class S>
void logsigmoid_forward(S* out, const S* inp, int64_t n) {
  MapCA<S> x(inp, n);
  MapA<S>(out, n) = x.min(S(0)) - (-x.abs()).exp().log1p();
}

template <class S>
void logsigmoid_backward(S* dinp, const S* dout, const S* inp, int64_t n) {
  MapCA<S> x(inp, n);
  MapA<S>(dinp, n) += MapCA<S>(dout, n) * sigmoid_expr(-x);
}

// ---- SwiGLU ------------------------------------------------------------------------------------
template <class S>
void swiglu_forward(S* out, const S* inp, int64_t N, int64_t F) {
  for (int64_t r = 0; r < N; ++r) {
    MapCA<S> g(inp + r * 2 * F, F), u(inp + r * 2 * F + F, F);
    MapA<S>(out + r * F, F) = g * sigmoid_expr(g) * u;
  }
}

template <class S>
void swiglu_backward(S* dinp, const S* dout, const S* inp, int64_t N, int64_t F) {
  Arr<S> s(F);
  for (int64_t r = 0; r < N; ++r) {
    MapCA<S> g(inp + r * 2 * F, F), u(inp + r * 2 * F + F, F), dy(dout + r * F, F);
    s = sigmoid_expr(g);
    MapA<S>(dinp + r * 2 * F, F) += dy * u * s * (S(1) + g * (S(1) - s));
    MapA<S>(dinp + r * 2 * F + F, F) += dy * g * s;
  }
}

// ---- explicit instantiations -------------------------------------------------------------------
#define SB_INSTANTIATE_OPS_ACT(S)                                                 \
  template void silu_forward<S>(S*, const S*, int64_t);                           \
  template void silu_backward<S>(S*, const S*, const S*, int64_t);                \
  template void gelu_forward<S>(S*, const S*, int64_t);                           \
  template void gelu_backward<S>(S*, const S*, const S*, int64_t);                \
  template void sigmoid_forward<S>(S*, const S*, int64_t);                        \
  template void sigmoid_backward<S>(S*, const S*, const S*, int64_t);             \
  template void logsigmoid_forward<S>(S*, const S*, int64_t);                     \
  template void logsigmoid_backward<S>(S*, const S*, const S*, int64_t);          \
  template void swiglu_forward<S>(S*, const S*, int64_t, int64_t);                \
  template void swiglu_backward<S>(S*, const S*, const S*, int64_t, int64_t);

SB_INSTANTIATE_OPS_ACT(SB_NN_SCALAR)
#undef SB_INSTANTIATE_OPS_ACT

}  // namespace sb::nn
