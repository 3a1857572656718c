// ops_sba.cpp: causal stick-breaking attention forward + backward (ops_sba.hpp). Per (b, h), query
// blocks of kQueryBlock rows: the scores against the causal key prefix by one Eigen GEMM, then per
// row the stick-breaking weights in log space (vectorised softplus, a scalar suffix sum in double),
// and the products with V (forward) or dO, K, Q (backward) as GEMMs. No T x T tensor.
#include "nn/ops_sba.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "nn/eigen_views.hpp"
#include "nn/instantiate.hpp"

namespace sb::nn {
namespace {

constexpr int64_t kQueryBlock = 64;

template <class S>
using RowS = Eigen::Array<S, 1, Eigen::Dynamic>;

// One query row's weights over its n keys from its scores z (in place): z <- A_j, and with beta
// non-null beta <- sigmoid(z_j). Returns log r (the log of the stick left after key 0).
//   softplus(z) = max(z, 0) + log1p(exp(-|z|)),  logsigmoid(z) = z - softplus(z),
//   logsigmoid(-z) = -softplus(z);  log A_j = logsigmoid(z_j) - sum_{l > j} softplus(z_l).
template <class S, class Row>
double stick_row(Row&& z, S* beta, RowS<S>& sp, int64_t n) {
  if (n == 0) return 0.0;
  auto za = z.head(n).array();
  sp.head(n) = za.max(S(0)) + (-za.abs()).exp().log1p();
  double acc = 0;  // sum over the keys after j of logsigmoid(-z) = -softplus, from the query backwards
  for (int64_t j = n - 1; j >= 0; --j) {
    const S lsp = za(j) - sp(j);
    if (beta) beta[j] = std::exp(lsp);
    za(j) = lsp + static_cast<S>(acc);
    acc -= static_cast<double>(sp(j));
  }
  za = za.exp();
  return acc;
}

}  // namespace

template <class S>
void sba_attention_forward(S* out, const S* q, const S* k, const S* v, int64_t B, int64_t T, int64_t H, int64_t Dh,
                           double scale, bool remainder) {
  if (T <= 0) return;
  const int64_t stride = H * Dh;
  MatR<S> weights(std::min(kQueryBlock, T), T);
  RowS<S> sp(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t off = b * T * stride + h * Dh;
      const Eigen::OuterStride<> os(stride);
      HeadCMap<S> Q(q + off, T, Dh, os), K(k + off, T, Dh, os), V(v + off, T, Dh, os);
      HeadMap<S> O(out + off, T, Dh, os);
      for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int64_t bq = std::min(kQueryBlock, T - i0), i1 = i0 + bq;
        auto A = weights.topLeftCorner(bq, i1);
        A.noalias() = static_cast<S>(scale) * Q.middleRows(i0, bq) * K.topRows(i1).transpose();
        S rem[kQueryBlock];
        for (int64_t r = 0; r < bq; ++r) {
          const int64_t n = i0 + r;  // keys 0 .. i - 1
          rem[r] = static_cast<S>(std::exp(stick_row<S>(A.row(r), nullptr, sp, n)));
          A.row(r).tail(i1 - n).setZero();
        }
        O.middleRows(i0, bq).noalias() = A * V.topRows(i1);
        if (remainder)
          for (int64_t r = 0; r < bq; ++r) O.row(i0 + r) += rem[r] * V.row(i0 + r);
      }
    }
}

template <class S>
void sba_attention_backward(S* dq, S* dk, S* dv, const S* dout, const S* q, const S* k, const S* v, int64_t B,
                            int64_t T, int64_t H, int64_t Dh, double scale, bool remainder) {
  if (T <= 0) return;
  const int64_t stride = H * Dh, rows = std::min(kQueryBlock, T);
  const S s_scale = static_cast<S>(scale);
  MatR<S> weights(rows, T), betas(rows, T), dscores(rows, T);
  RowS<S> sp(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t off = b * T * stride + h * Dh;
      const Eigen::OuterStride<> os(stride);
      HeadCMap<S> Q(q + off, T, Dh, os), K(k + off, T, Dh, os), V(v + off, T, Dh, os), dO(dout + off, T, Dh, os);
      for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int64_t bq = std::min(kQueryBlock, T - i0), i1 = i0 + bq;
        auto A = weights.topLeftCorner(bq, i1);
        auto Bt = betas.topLeftCorner(bq, i1);
        auto dZ = dscores.topLeftCorner(bq, i1);
        const auto dOb = dO.middleRows(i0, bq);
        A.noalias() = s_scale * Q.middleRows(i0, bq) * K.topRows(i1).transpose();
        dZ.noalias() = dOb * V.topRows(i1).transpose();  // dP_ij = dout_i . v_j
        S rem[kQueryBlock];
        for (int64_t r = 0; r < bq; ++r) {
          const int64_t n = i0 + r, i = i0 + r;
          rem[r] = static_cast<S>(std::exp(stick_row<S>(A.row(r), Bt.row(r).data(), sp, n)));
          A.row(r).tail(i1 - n).setZero();
          // p_j = r g + sum_{l <= j} a_l in double, then dz_j = a_j - beta_j p_j.
          double p = remainder ? static_cast<double>(rem[r]) * static_cast<double>(dOb.row(r).dot(V.row(i))) : 0.0;
          for (int64_t j = 0; j < n; ++j) {
            const S a = A(r, j) * dZ(r, j);
            p += static_cast<double>(a);
            dZ(r, j) = a - Bt(r, j) * static_cast<S>(p);
          }
          dZ.row(r).tail(i1 - n).setZero();
        }
        if (dq) HeadMap<S>(dq + off, T, Dh, os).middleRows(i0, bq).noalias() += s_scale * dZ * K.topRows(i1);
        if (dk) HeadMap<S>(dk + off, T, Dh, os).topRows(i1).noalias() += s_scale * dZ.transpose() * Q.middleRows(i0, bq);
        if (dv) {
          HeadMap<S> dV(dv + off, T, Dh, os);
          dV.topRows(i1).noalias() += A.transpose() * dOb;
          if (remainder)
            for (int64_t r = 0; r < bq; ++r) dV.row(i0 + r) += rem[r] * dOb.row(r);
        }
      }
    }
}

#define SB_INSTANTIATE_OPS_SBA(S)                                                                               \
  template void sba_attention_forward<S>(S*, const S*, const S*, const S*, int64_t, int64_t, int64_t, int64_t,  \
                                         double, bool);                                                         \
  template void sba_attention_backward<S>(S*, S*, S*, const S*, const S*, const S*, const S*, int64_t, int64_t, \
                                          int64_t, int64_t, double, bool);

SB_INSTANTIATE_OPS_SBA(SB_NN_SCALAR)
#undef SB_INSTANTIATE_OPS_SBA

}  // namespace sb::nn
