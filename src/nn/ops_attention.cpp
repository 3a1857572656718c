// ops_attention.cpp: RoPE and causal softmax attention (optional FoX gate bias), forward + backward.
// Attention works per (b, h) on strided Eigen maps of the [B, T, H, Dh] tensors, in query blocks
// of kQueryBlock rows against the causal key prefix; backward recomputes probabilities from lse.
#include "nn/ops_attention.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "nn/eigen_views.hpp"
#include "nn/instantiate.hpp"

namespace sb::nn {
namespace {

constexpr int64_t kQueryBlock = 64;

using RowD = Eigen::Array<double, 1, Eigen::Dynamic>;
template <class S>
using RowS = Eigen::Array<S, 1, Eigen::Dynamic>;

// cos / sin of angle(t, m) = t * theta^(-2m/Dh), [T, Dh/2] each, computed in double.
template <class S>
void rope_tables(std::vector<S>& cosv, std::vector<S>& sinv, int64_t T, int64_t Dh, double theta) {
  if (Dh % 2 != 0) fail("rope: head dim Dh = {} must be even", Dh);
  if (!(theta > 0)) fail("rope: theta = {} must be positive", theta);
  const int64_t half = Dh / 2;
  cosv.resize(static_cast<size_t>(T * half));
  sinv.resize(static_cast<size_t>(T * half));
  for (int64_t m = 0; m < half; ++m) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(m) / static_cast<double>(Dh));
    for (int64_t t = 0; t < T; ++t) {
      const double a = static_cast<double>(t) * inv_freq;
      cosv[static_cast<size_t>(t * half + m)] = static_cast<S>(std::cos(a));
      sinv[static_cast<size_t>(t * half + m)] = static_cast<S>(std::sin(a));
    }
  }
}

// Rotates every head vector by +angle (out = R x) or, for the backward, accumulates the inverse
// rotation (out += R^T x).
template <class S, bool kInverseAccumulate>
void rope_apply(S* out, const S* inp, int64_t B, int64_t T, int64_t H, int64_t Dh, double theta) {
  std::vector<S> cosv, sinv;
  rope_tables(cosv, sinv, T, Dh, theta);
  const int64_t half = Dh / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const S* c = cosv.data() + t * half;
      const S* s = sinv.data() + t * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = ((b * T + t) * H + h) * Dh;
        const S* x = inp + base;
        S* y = out + base;
        for (int64_t m = 0; m < half; ++m) {
          const S x1 = x[m], x2 = x[m + half];
          if constexpr (kInverseAccumulate) {
            y[m] += x1 * c[m] + x2 * s[m];
            y[m + half] += x2 * c[m] - x1 * s[m];
          } else {
            y[m] = x1 * c[m] - x2 * s[m];
            y[m + half] = x2 * c[m] + x1 * s[m];
          }
        }
      }
    }
  }
}

// c_t = sum_{s <= t} log_f[b, s, h] in double.
template <class S>
void gate_prefix(RowD& c, const S* log_f, int64_t b, int64_t h, int64_t T, int64_t H) {
  double acc = 0;
  for (int64_t t = 0; t < T; ++t) {
    acc += static_cast<double>(log_f[(b * T + t) * H + h]);
    c[t] = acc;
  }
}

// row <- exp(max(row - shift, kExpFloor<S>)). The floor keeps every result a normal number
// (exp(-87) ~ 1.6e-38 is about float's smallest normal, exp(-708) double's): strongly negative
// FoX gates otherwise produce subnormals in bulk, which make every later multiply ~100x slower.
// A term 1e-38 below the row max is invisible in the softmax. Vectorised (Eigen pexp).
template <class S>
constexpr S kExpFloor = sizeof(S) == 4 ? S(-87) : S(-708);

template <class Row>
void exp_shifted(Row&& row, typename std::decay_t<Row>::Scalar shift) {
  using S = typename std::decay_t<Row>::Scalar;
  row = (row - shift).max(kExpFloor<S>).exp();
}

// Scores of query rows [i0, i0 + bq) against keys [0, i1 = i0 + bq) into sc (bq x i1): the scaled
// dot products plus the gate bias c_i - c_j on the causal part; entries j > i are left unspecified.
// The bias is formed from crel_j = c_j - c_{i1-1} (double prefix sums, rounded once to S per block),
// so its float error scales with the bias and the block's own gate spread, never with the sequence
// length; entries where |c_i - c_j| is large are exponentially small anyway.
template <class S, class SB>
void block_scores(SB& sc, RowS<S>& crel, const HeadCMap<S>& Q, const HeadCMap<S>& K, const RowD* c,
                  int64_t i0, int64_t bq, double scale) {
  const int64_t i1 = i0 + bq;
  sc.noalias() = static_cast<S>(scale) * Q.middleRows(i0, bq) * K.topRows(i1).transpose();
  if (!c) return;
  crel.head(i1) = (c->head(i1) - (*c)[i1 - 1]).template cast<S>();
  for (int64_t r = 0; r < bq; ++r) {
    const int64_t n = i0 + r + 1;
    sc.row(r).head(n).array() += crel[n - 1] - crel.head(n);
  }
}

}  // namespace

// ---- RoPE --------------------------------------------------------------------------------------
template <class S>
void rope_forward(S* out, const S* inp, int64_t B, int64_t T, int64_t H, int64_t Dh, double theta) {
  rope_apply<S, false>(out, inp, B, T, H, Dh, theta);
}

template <class S>
void rope_backward(S* dinp, const S* dout, int64_t B, int64_t T, int64_t H, int64_t Dh, double theta) {
  rope_apply<S, true>(dinp, dout, B, T, H, Dh, theta);
}

// ---- softmax attention -------------------------------------------------------------------------
template <class S>
void softmax_attention_forward(S* out, S* lse, const S* q, const S* k, const S* v, const S* log_f,
                               int64_t B, int64_t T, int64_t H, int64_t Dh, double scale) {
  if (T <= 0) return;
  const int64_t stride = H * Dh;
  MatR<S> scores(std::min(kQueryBlock, T), T);
  RowD c(T);
  RowS<S> crel(T);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t off = b * T * stride + h * Dh;
      HeadCMap<S> Q(q + off, T, Dh, Eigen::OuterStride<>(stride));
      HeadCMap<S> K(k + off, T, Dh, Eigen::OuterStride<>(stride));
      HeadCMap<S> V(v + off, T, Dh, Eigen::OuterStride<>(stride));
      HeadMap<S> O(out + off, T, Dh, Eigen::OuterStride<>(stride));
      S* lse_bh = lse + (b * H + h) * T;
      if (log_f) gate_prefix(c, log_f, b, h, T, H);
      for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int64_t bq = std::min(kQueryBlock, T - i0), i1 = i0 + bq;
        auto sc = scores.topLeftCorner(bq, i1);
        block_scores<S>(sc, crel, Q, K, log_f ? &c : nullptr, i0, bq, scale);
        for (int64_t r = 0; r < bq; ++r) {
          const int64_t n = i0 + r + 1;  // keys 0 .. i
          auto row = sc.row(r).head(n).array();
          const S m = row.maxCoeff();
          exp_shifted(row, m);
          const S sum = row.sum();
          row /= sum;
          sc.row(r).tail(i1 - n).setZero();
          lse_bh[n - 1] = m + std::log(sum);
        }
        O.middleRows(i0, bq).noalias() = sc * V.topRows(i1);
      }
    }
  }
}

// With P the probabilities, dP = dO V^T and dS = P * (dP - D) (D_i = dO_i . O_i):
//   dV += P^T dO,  dQ += scale dS K,  dK += scale dS^T Q,
//   dc_i += sum_j dS_ij,  dc_j -= sum_i dS_ij,  dlog_f_s += sum_{t >= s} dc_t (s >= 1).
template <class S>
void softmax_attention_backward(S* dq, S* dk, S* dv, S* dlog_f, const S* dout, const S* q, const S* k,
                                const S* v, const S* log_f, const S* out, const S* lse, int64_t B,
                                int64_t T, int64_t H, int64_t Dh, double scale) {
  if (T <= 0) return;
  if (!log_f) dlog_f = nullptr;
  const bool need_ds = dq || dk || dlog_f;
  const int64_t stride = H * Dh;
  const int64_t rows = std::min(kQueryBlock, T);
  MatR<S> probs(rows, T), dscores(rows, T);
  RowD c(T), dc(T);
  RowS<S> crel(T);
  Eigen::Matrix<S, 1, Eigen::Dynamic> colsum(T);
  const Eigen::Matrix<S, 1, Eigen::Dynamic> ones = Eigen::Matrix<S, 1, Eigen::Dynamic>::Ones(rows);
  const S s_scale = static_cast<S>(scale);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t off = b * T * stride + h * Dh;
      const Eigen::OuterStride<> os(stride);
      HeadCMap<S> Q(q + off, T, Dh, os), K(k + off, T, Dh, os), V(v + off, T, Dh, os);
      HeadCMap<S> O(out + off, T, Dh, os), dO(dout + off, T, Dh, os);
      const S* lse_bh = lse + (b * H + h) * T;
      if (log_f) gate_prefix(c, log_f, b, h, T, H);
      if (dlog_f) dc.setZero();
      for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int64_t bq = std::min(kQueryBlock, T - i0), i1 = i0 + bq;
        auto P = probs.topLeftCorner(bq, i1);
        block_scores<S>(P, crel, Q, K, log_f ? &c : nullptr, i0, bq, scale);
        for (int64_t r = 0; r < bq; ++r) {
          const int64_t n = i0 + r + 1;
          exp_shifted(P.row(r).head(n).array(), lse_bh[n - 1]);
          P.row(r).tail(i1 - n).setZero();
        }
        const auto dOb = dO.middleRows(i0, bq);
        if (dv) HeadMap<S>(dv + off, T, Dh, os).topRows(i1).noalias() += P.transpose() * dOb;
        if (!need_ds) continue;
        auto dS = dscores.topLeftCorner(bq, i1);
        dS.noalias() = dOb * V.topRows(i1).transpose();  // dP
        for (int64_t r = 0; r < bq; ++r) {
          const S D = dOb.row(r).dot(O.row(i0 + r));
          dS.row(r).array() = P.row(r).array() * (dS.row(r).array() - D);
        }
        if (dq) HeadMap<S>(dq + off, T, Dh, os).middleRows(i0, bq).noalias() += s_scale * dS * K.topRows(i1);
        if (dk) HeadMap<S>(dk + off, T, Dh, os).topRows(i1).noalias() += s_scale * dS.transpose() * Q.middleRows(i0, bq);
        if (dlog_f) {
          for (int64_t r = 0; r < bq; ++r) dc[i0 + r] += static_cast<double>(dS.row(r).sum());
          colsum.head(i1).noalias() = ones.head(bq) * dS;  // column sums as one GEMV
          dc.head(i1) -= colsum.head(i1).array().template cast<double>();
        }
      }
      if (dlog_f) {
        double running = 0;
        for (int64_t s = T - 1; s >= 1; --s) {
          running += dc[s];
          dlog_f[(b * T + s) * H + h] += static_cast<S>(running);
        }
      }
    }
  }
}

// ---- explicit instantiations -------------------------------------------------------------------
#define SB_INSTANTIATE_OPS_ATTENTION(S)                                                             \
  template void rope_forward<S>(S*, const S*, int64_t, int64_t, int64_t, int64_t, double);          \
  template void rope_backward<S>(S*, const S*, int64_t, int64_t, int64_t, int64_t, double);         \
  template void softmax_attention_forward<S>(S*, S*, const S*, const S*, const S*, const S*,        \
                                             int64_t, int64_t, int64_t, int64_t, double);           \
  template void softmax_attention_backward<S>(S*, S*, S*, S*, const S*, const S*, const S*,         \
                                              const S*, const S*, const S*, const S*, int64_t,      \
                                              int64_t, int64_t, int64_t, double);

SB_INSTANTIATE_OPS_ATTENTION(SB_NN_SCALAR)
#undef SB_INSTANTIATE_OPS_ATTENTION

}  // namespace sb::nn
