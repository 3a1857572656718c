// path_direct.cpp: the Direct (reference) form of PaTH attention. Forward pushes every key
// forward token by token, k_j <- H_t k_j (O(T^2 Dh) per head, a T x T score matrix in the
// workspace); backward walks every (query, key) pair's Householder chain (O(T^3 Dh) per head).
// It exists to check the Blockwise form and is meant for small T only.
#include <cmath>
#include <limits>

#include "nn/instantiate.hpp"
#include "nn/path_internal.hpp"

namespace sb::nn::path_detail {
namespace {

template <class S>
struct DirectLayout {
  S* scores = nullptr;  // [T, T] logits s_ij (row i = query), then probabilities
  S* beta = nullptr;    // [T]
  S* kt = nullptr;      // [Dh] the key being pushed
  // backward only
  S* pulled = nullptr;  // [T, Dh] row t: H_{t+1}..H_i q_i for the current query i
  S* dq = nullptr;      // [T, Dh] local gradients, added to the outputs at the end of each head
  S* dk = nullptr;      // [T, Dh]
  S* dv = nullptr;      // [T, Dh]
  S* dw = nullptr;      // [T, Dh]
  S* dbeta = nullptr;   // [T]
  S* dG = nullptr;      // [T] gradient w.r.t. the gate prefix sums
  S* delta = nullptr;   // [T] dout_i . out_i

  void layout(Arena<S>& a, int64_t T, int64_t Dh, bool backward) {
    scores = a.take(T * T), beta = a.take(T), kt = a.take(Dh);
    if (!backward) return;
    pulled = a.take(T * Dh), dq = a.take(T * Dh), dk = a.take(T * Dh), dv = a.take(T * Dh);
    dw = a.take(T * Dh), dbeta = a.take(T), dG = a.take(T), delta = a.take(T);
  }
};

// Fills rows of `scores` with s_ij (j <= i) for one head, pushing each key forward.
template <class S>
void direct_scores(MapM<S>& Sc, Eigen::Map<Eigen::Matrix<S, 1, Eigen::Dynamic>>& kt,
                   const CStrided<S>& Q, const CStrided<S>& K, const CStrided<S>& W, const S* beta,
                   const double* G, S scale) {
  const int64_t T = Q.rows();
  for (int64_t j = 0; j < T; ++j) {
    kt = K.row(j);
    Sc(j, j) = scale * Q.row(j).dot(kt);
    for (int64_t i = j + 1; i < T; ++i) {
      kt -= (beta[i] * W.row(i).dot(kt)) * W.row(i);
      Sc(i, j) = scale * Q.row(i).dot(kt) + static_cast<S>(G[i] - G[j]);
    }
  }
}

}  // namespace

#if SB_NN_FLOAT_PASS  // scalar-independent: defined once (nn/instantiate.hpp)
int64_t direct_forward_ws(int64_t T, int64_t Dh) {
  Arena<double> a;
  DirectLayout<double>().layout(a, T, Dh, false);
  return a.used;
}
int64_t direct_backward_ws(int64_t T, int64_t Dh) {
  Arena<double> a;
  DirectLayout<double>().layout(a, T, Dh, true);
  return a.used;
}
#endif

template <class S>
void direct_forward(S* out, S* lse, const S* q, const S* k, const S* v, const S* w, const S* beta,
                    const S* log_f, int64_t B, int64_t T, int64_t H, int64_t Dh, S scale, S* ws) {
  Arena<S> arena{ws};
  DirectLayout<S> lay;
  lay.layout(arena, T, Dh, false);
  MapM<S> Sc(lay.scores, T, T);
  Eigen::Map<Eigen::Matrix<S, 1, Eigen::Dynamic>> kt(lay.kt, Dh);
  std::vector<double> G(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const auto Q = head_view(q, b, h, T, H, Dh), K = head_view(k, b, h, T, H, Dh);
      const auto V = head_view(v, b, h, T, H, Dh), W = head_view(w, b, h, T, H, Dh);
      auto O = head_view_mut(out, b, h, T, H, Dh);
      gather_beta_gate(lay.beta, G.data(), beta, log_f, b, h, T, H);
      direct_scores(Sc, kt, Q, K, W, lay.beta, G.data(), scale);
      S* lse_row = lse + (b * H + h) * T;
      for (int64_t i = 0; i < T; ++i) {
        auto row = Sc.row(i).head(i + 1);
        const S m = row.maxCoeff();
        row = (row.array() - m).exp();
        const S l = row.sum();
        lse_row[i] = m + std::log(l);
        O.row(i).noalias() = (row / l) * V.topRows(i + 1);
      }
    }
}

template <class S>
void direct_backward(S* dq, S* dk, S* dv, S* dw, S* dbeta, S* dlog_f, const S* dout, const S* q,
                     const S* k, const S* v, const S* w, const S* beta, const S* log_f,
                     const S* out, const S* lse, int64_t B, int64_t T, int64_t H, int64_t Dh,
                     S scale, S* ws) {
  Arena<S> arena{ws};
  DirectLayout<S> lay;
  lay.layout(arena, T, Dh, true);
  MapM<S> Sc(lay.scores, T, T), A(lay.pulled, T, Dh);
  MapM<S> dQ(lay.dq, T, Dh), dK(lay.dk, T, Dh), dV(lay.dv, T, Dh), dW(lay.dw, T, Dh);
  Eigen::Map<Eigen::Matrix<S, 1, Eigen::Dynamic>> kt(lay.kt, Dh);
  std::vector<double> G(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const auto Q = head_view(q, b, h, T, H, Dh), K = head_view(k, b, h, T, H, Dh);
      const auto V = head_view(v, b, h, T, H, Dh), W = head_view(w, b, h, T, H, Dh);
      const auto O = head_view(out, b, h, T, H, Dh), dO = head_view(dout, b, h, T, H, Dh);
      const S* lse_row = lse + (b * H + h) * T;
      const S* be = lay.beta;
      gather_beta_gate(lay.beta, G.data(), beta, log_f, b, h, T, H);
      direct_scores(Sc, kt, Q, K, W, lay.beta, G.data(), scale);
      dQ.setZero(), dK.setZero(), dV.setZero(), dW.setZero();
      std::fill(lay.dbeta, lay.dbeta + T, S(0));
      std::fill(lay.dG, lay.dG + T, S(0));
      // Softmax backward: dS_ij = P_ij (dout_i . v_j - dout_i . out_i); the row i of Sc becomes dS.
      for (int64_t i = 0; i < T; ++i) {
        const S delta = dO.row(i).dot(O.row(i));
        for (int64_t j = 0; j <= i; ++j) {
          const S p = std::exp(Sc(i, j) - lse_row[i]);
          dV.row(j) += p * dO.row(i);
          Sc(i, j) = p * (dO.row(i).dot(V.row(j)) - delta);
          lay.dG[i] += Sc(i, j);
          lay.dG[j] -= Sc(i, j);
        }
      }
      // Chain of every pair: s_ij = scale * a_t^T H_t b_t for each t in (j, i], with
      // a_t = H_{t+1}..H_i q_i (pulled query) and b_t = H_{t-1}..H_{j+1} k_j (pushed key).
      for (int64_t i = 0; i < T; ++i) {
        A.row(i) = Q.row(i);
        for (int64_t t = i; t >= 1; --t)
          A.row(t - 1) = A.row(t) - (be[t] * W.row(t).dot(A.row(t))) * W.row(t);
        for (int64_t j = 0; j <= i; ++j) {
          const S g = scale * Sc(i, j);
          dK.row(j) += g * A.row(j);
          kt = K.row(j);
          for (int64_t t = j + 1; t <= i; ++t) {
            const S aw = A.row(t).dot(W.row(t)), wb = W.row(t).dot(kt);
            dW.row(t) -= (g * be[t]) * (aw * kt + wb * A.row(t));
            lay.dbeta[t] -= g * aw * wb;
            kt -= (be[t] * wb) * W.row(t);
          }
          dQ.row(i) += g * kt;
        }
      }
      add_head(dq, lay.dq, b, h, T, H, Dh), add_head(dk, lay.dk, b, h, T, H, Dh);
      add_head(dv, lay.dv, b, h, T, H, Dh), add_head(dw, lay.dw, b, h, T, H, Dh);
      add_scalar_head(dbeta, lay.dbeta, b, h, T, H);
      if (log_f && dlog_f) scatter_gate_grad(dlog_f, lay.dG, b, h, T, H);
    }
}

#define SB_PATH_DIRECT_INSTANTIATE(S)                                                              \
  template void direct_forward<S>(S*, S*, const S*, const S*, const S*, const S*, const S*,        \
                                  const S*, int64_t, int64_t, int64_t, int64_t, S, S*);            \
  template void direct_backward<S>(S*, S*, S*, S*, S*, S*, const S*, const S*, const S*, const S*, \
                                   const S*, const S*, const S*, const S*, const S*, int64_t,      \
                                   int64_t, int64_t, int64_t, S, S*);
SB_PATH_DIRECT_INSTANTIATE(SB_NN_SCALAR)
#undef SB_PATH_DIRECT_INSTANTIATE

}  // namespace sb::nn::path_detail
