// path_backward.cpp: the Blockwise (UT form) backward of PaTH attention. Recomputes the per-block
// factors and, per query block, the transported queries and the [block, T] score strip from the
// saved row log-sum-exp (FlashAttention style); then backpropagates through the transports (left
// to right), the intra-block UT formula, the pushed keys and the UT factors. Derivation:
// docs/path-backward.md. Also the public path_attention_backward (either form): its double pass is
// built for the tests only (sb_grad_f64, src/CMakeLists.txt).
#include <cmath>

#include "core/aligned_vector.hpp"
#include "nn/path_attention.hpp"

#include "nn/instantiate.hpp"
#include "nn/path_internal.hpp"

namespace sb::nn::path_detail {
namespace {

template <class S>
struct BackwardLayout {
  BlockFactors<S> f;
  S* beta = nullptr;     // [T]
  S* rowbias = nullptr;  // [L] gate bias of the query rows (block_gate_bias)
  S* colbias = nullptr;  // [T] gate bias of the key columns
  S* delta = nullptr;    // [T] dout_t . out_t
  S* qs = nullptr;       // [L, Dh] scaled queries of the current block
  S* a = nullptr;        // [L, L] lower(Qs W^T)
  S* xs = nullptr;       // [nblocks, L, Dh] X_m: queries transported to the end of key block m
  S* xws = nullptr;      // [nblocks, L, L] X_m W_m^T (factored transport only)
  S* dpacc = nullptr;    // [nblocks, Dh, Dh] gradient w.r.t. the block products P_m (dense only)
  S* strip = nullptr;    // [L, T] probabilities of the current query block
  S* dstrip = nullptr;   // [L, T] dS of the current query block
  S* xi0 = nullptr;      // [L, Dh] gradient carried along the transports (two buffers)
  S* xi1 = nullptr;      // [L, Dh]
  S* xiy = nullptr;      // [L, L]
  S* da = nullptr;       // [L, L]
  S* dqs = nullptr;      // [T, Dh] local gradients of one head
  S* dk = nullptr;       // [T, Dh]
  S* dv = nullptr;       // [T, Dh]
  S* dw = nullptr;       // [T, Dh]
  S* dkt = nullptr;      // [T, Dh] gradient w.r.t. the pushed keys Kt
  S* dy = nullptr;       // [T, Dh] gradient w.r.t. Y = Tinv W
  S* dz = nullptr;       // [nblocks, L, L] gradient w.r.t. Z
  S* dbeta = nullptr;    // [T]
  S* dG = nullptr;       // [T]

  void layout(Arena<S>& ar, int64_t T, int64_t Dh, int64_t L) {
    L = std::min(L, T);
    f.layout(ar, T, Dh, L);
    const int64_t nb = f.nblocks;
    beta = ar.take(T), rowbias = ar.take(L), colbias = ar.take(T), delta = ar.take(T);
    qs = ar.take(L * Dh), a = ar.take(L * L), xs = ar.take(nb * L * Dh);
    if (f.dense)
      dpacc = ar.take(nb * Dh * Dh);
    else
      xws = ar.take(nb * L * L);
    strip = ar.take(L * T), dstrip = ar.take(L * T);
    xi0 = ar.take(L * Dh), xi1 = ar.take(L * Dh), xiy = ar.take(L * L), da = ar.take(L * L);
    dqs = ar.take(T * Dh), dk = ar.take(T * Dh), dv = ar.take(T * Dh), dw = ar.take(T * Dh);
    dkt = ar.take(T * Dh), dy = ar.take(T * Dh), dz = ar.take(nb * L * L);
    dbeta = ar.take(T), dG = ar.take(T);
  }
};

// Backward through the factors of block m (see compute_block_factors), given the gradients
// dKt, dY, dZ of that block; accumulates into dK, dW, dbeta (rows of block m).
template <class S, class WBlock, class KBlock, class GBlock>
void factors_backward(const WBlock& Wb, const KBlock& Kb, const S* beta, const MapM<S>& Tinv,
                      const MapM<S>& Z, MapM<S> dZ, const GBlock& dKt, const GBlock& dY, GBlock dK,
                      GBlock dW, S* dbeta) {
  const int64_t ln = Wb.rows();
  // Kt = K - Z^T W
  dK += dKt;
  dZ.noalias() -= Wb * dKt.transpose();
  dW.noalias() -= Z * dKt;
  // Z = Tinv C with C = strictLower(W K^T);  Y = Tinv W
  const Mat<S> C = (Wb * Kb.transpose()).template triangularView<Eigen::StrictlyLower>();
  Mat<S> dTinv = dZ * C.transpose();
  dTinv.noalias() += dY * Wb.transpose();
  const Mat<S> dC = (Tinv.transpose() * dZ).template triangularView<Eigen::StrictlyLower>();
  dW.noalias() += dC * Kb;
  dK.noalias() += dC.transpose() * Wb;
  dW.noalias() += Tinv.transpose() * dY;
  // Tinv = M^{-1} D, M = I + N, N = D strictLower(W W^T):
  //   R = M^{-T} dTinv;  dD = diag(R);  dN = strictLower(-R Tinv^T)
  const Mat<S> M = ut_matrix<S>(Wb, beta);
  M.template triangularView<Eigen::UnitLower>().transpose().solveInPlace(dTinv);
  const Mat<S>& R = dTinv;
  Mat<S> E = -(R * Tinv.transpose());
  E.template triangularView<Eigen::Upper>().setZero();
  const Mat<S> gram = Wb * Wb.transpose();
  for (int64_t r = 0; r < ln; ++r) {
    S acc = R(r, r);
    for (int64_t p = 0; p < r; ++p) acc += E(r, p) * gram(r, p);
    dbeta[r] += acc;
    E.row(r) *= beta[r];  // now dGram (strictly lower part)
  }
  dW.noalias() += (E + E.transpose()) * Wb;
}

}  // namespace

#if SB_NN_FLOAT_PASS  // scalar-independent: defined once (nn/instantiate.hpp)
int64_t blockwise_backward_ws(int64_t T, int64_t Dh, int64_t L) {
  Arena<double> a;
  BackwardLayout<double>().layout(a, T, Dh, L);
  return a.used;
}
#endif

template <class S>
void blockwise_backward(S* dq, S* dk, S* dv, S* dw, S* dbeta, S* dlog_f, const S* dout, const S* q,
                        const S* k, const S* v, const S* w, const S* beta, const S* log_f,
                        const S* out, const S* lse, int64_t B, int64_t T, int64_t H, int64_t Dh,
                        S scale, int64_t L, S* ws) {
  Arena<S> arena{ws};
  BackwardLayout<S> lay;
  lay.layout(arena, T, Dh, L);
  const BlockFactors<S>& f = lay.f;
  const int64_t Lc = f.L;
  MapM<S> dQs(lay.dqs, T, Dh), dK(lay.dk, T, Dh), dV(lay.dv, T, Dh), dW(lay.dw, T, Dh);
  MapM<S> dKt(lay.dkt, T, Dh), dY(lay.dy, T, Dh);
  std::vector<double> G(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const auto Q = head_view(q, b, h, T, H, Dh), K = head_view(k, b, h, T, H, Dh);
      const auto V = head_view(v, b, h, T, H, Dh), W = head_view(w, b, h, T, H, Dh);
      const auto O = head_view(out, b, h, T, H, Dh), dO = head_view(dout, b, h, T, H, Dh);
      const S* lse_row = lse + (b * H + h) * T;
      gather_beta_gate(lay.beta, G.data(), beta, log_f, b, h, T, H);
      compute_block_factors(f, W, K, lay.beta);
      for (int64_t t = 0; t < T; ++t) lay.delta[t] = dO.row(t).dot(O.row(t));
      dQs.setZero(), dK.setZero(), dV.setZero(), dW.setZero(), dKt.setZero(), dY.setZero();
      std::fill(lay.dz, lay.dz + f.nblocks * Lc * Lc, S(0));
      if (f.dense) std::fill(lay.dpacc, lay.dpacc + f.nblocks * Dh * Dh, S(0));
      std::fill(lay.dbeta, lay.dbeta + T, S(0));
      std::fill(lay.dG, lay.dG + T, S(0));
      for (int64_t n = 0; n < f.nblocks; ++n) {
        const int64_t s = f.start(n), lq = f.size(n), e = s + lq;
        const auto Wb = W.middleRows(s, lq);
        const auto Kb = K.middleRows(s, lq);
        MapM<S> Qs(lay.qs, lq, Dh), A(lay.a, lq, lq);
        MapM<S> P(lay.strip, lq, e), dS(lay.dstrip, lq, e);
        auto Xm = [&](int64_t m) { return MapM<S>(lay.xs + m * Lc * Dh, lq, Dh); };
        auto XWm = [&](int64_t m) { return MapM<S>(lay.xws + m * Lc * Lc, lq, f.size(m)); };
        Qs = scale * Q.middleRows(s, lq);
        A.noalias() = Qs * Wb.transpose();
        A.template triangularView<Eigen::StrictlyUpper>().setZero();
        // Recompute the transported queries X_m (m = n-1 .. 0) and the logits.
        if (n > 0) {
          Xm(n - 1) = Qs;
          Xm(n - 1).noalias() -= A * f.Y(n);
        }
        for (int64_t m = n - 1; m >= 0; --m) {
          P.middleCols(f.start(m), f.size(m)).noalias() = Xm(m) * f.Kt(m).transpose();
          if (m == 0) break;
          if (f.dense) {
            Xm(m - 1).noalias() = Xm(m) * f.P(m);
          } else {
            XWm(m).noalias() = Xm(m) * W.middleRows(f.start(m), f.size(m)).transpose();
            Xm(m - 1) = Xm(m);
            Xm(m - 1).noalias() -= XWm(m) * f.Y(m);
          }
        }
        auto Pd = P.middleCols(s, lq);
        Pd.noalias() = Qs * Kb.transpose();
        Pd.noalias() -= A * f.Z(n);
        // Probabilities from the saved lse; dS = P (dout . v - delta).
        dS.noalias() = dO.middleRows(s, lq) * V.topRows(e).transpose();
        if (log_f) block_gate_bias(lay.rowbias, lay.colbias, G.data(), s, lq);
        for (int64_t r = 0; r < lq; ++r) {
          const int64_t len = s + r + 1;
          auto prow = P.row(r).head(len);
          if (log_f) prow.array() += lay.rowbias[r] - row_array(lay.colbias, len);
          prow.array() -= lse_row[s + r];
          shifted_exp_in_place<S>(prow);
          P.row(r).tail(e - len).setZero();
          dS.row(r).array() = P.row(r).array() * (dS.row(r).array() - lay.delta[s + r]);
        }
        dV.topRows(e).noalias() += P.transpose() * dO.middleRows(s, lq);
        if (log_f) {
          for (int64_t r = 0; r < lq; ++r) lay.dG[s + r] += dS.row(r).sum();
          Eigen::Map<Eigen::Matrix<S, 1, Eigen::Dynamic>>(lay.dG, e) -= dS.colwise().sum();
        }
        // Cross blocks, left to right: S_m = X_m Kt_m^T and X_{m-1} = X_m P_m (dense or factored).
        S* xi = lay.xi0;  // gradient w.r.t. X_{m-1} (unused for m = 0)
        S* nx = lay.xi1;
        for (int64_t m = 0; m < n; ++m) {
          const int64_t ks = f.start(m), kl = f.size(m);
          const auto dSm = dS.middleCols(ks, kl);
          MapM<S> dX(nx, lq, Dh);
          dX.noalias() = dSm * f.Kt(m);
          if (m > 0 && f.dense) {
            MapM<S> Xi(xi, lq, Dh), dPm(lay.dpacc + m * Dh * Dh, Dh, Dh);
            dX.noalias() += Xi * f.P(m).transpose();
            dPm.noalias() += Xm(m).transpose() * Xi;
          } else if (m > 0) {
            MapM<S> Xi(xi, lq, Dh), XiY(lay.xiy, lq, kl);
            XiY.noalias() = Xi * f.Y(m).transpose();
            dX += Xi;
            dX.noalias() -= XiY * W.middleRows(ks, kl);
            dW.middleRows(ks, kl).noalias() -= XiY.transpose() * Xm(m);
            dY.middleRows(ks, kl).noalias() -= XWm(m).transpose() * Xi;
          }
          dKt.middleRows(ks, kl).noalias() += dSm.transpose() * Xm(m);
          std::swap(xi, nx);
        }
        // Own block and the block-transformed queries Qt = Qs - A Y (gradient dQt = xi).
        const auto dSd = dS.middleCols(s, lq);
        auto dQb = dQs.middleRows(s, lq);
        MapM<S> dA(lay.da, lq, lq), dZ(lay.dz + n * Lc * Lc, lq, lq);
        dQb.noalias() += dSd * Kb;
        dK.middleRows(s, lq).noalias() += dSd.transpose() * Qs;
        dA.noalias() = -(dSd * f.Z(n).transpose());
        dZ.noalias() -= A.transpose() * dSd;
        if (n > 0) {
          MapM<S> dQt(xi, lq, Dh);
          dQb += dQt;
          dA.noalias() -= dQt * f.Y(n).transpose();
          dY.middleRows(s, lq).noalias() -= A.transpose() * dQt;
        }
        dA.template triangularView<Eigen::StrictlyUpper>().setZero();
        dQb.noalias() += dA * Wb;
        dW.middleRows(s, lq).noalias() += dA.transpose() * Qs;
      }
      for (int64_t m = 0; m < f.nblocks; ++m) {
        const int64_t ks = f.start(m), kl = f.size(m);
        if (f.dense) {  // P = I - W^T Y:  dW = -Y dP^T,  dY = -W dP
          const MapM<S> dPm(lay.dpacc + m * Dh * Dh, Dh, Dh);
          dW.middleRows(ks, kl).noalias() -= f.Y(m) * dPm.transpose();
          dY.middleRows(ks, kl).noalias() -= W.middleRows(ks, kl) * dPm;
        }
        factors_backward<S>(W.middleRows(ks, kl), K.middleRows(ks, kl), lay.beta + ks, f.Tinv(m),
                            f.Z(m), MapM<S>(lay.dz + m * Lc * Lc, kl, kl), dKt.middleRows(ks, kl),
                            dY.middleRows(ks, kl), dK.middleRows(ks, kl), dW.middleRows(ks, kl),
                            lay.dbeta + ks);
      }
      dQs *= scale;
      add_head(dq, lay.dqs, b, h, T, H, Dh), add_head(dk, lay.dk, b, h, T, H, Dh);
      add_head(dv, lay.dv, b, h, T, H, Dh), add_head(dw, lay.dw, b, h, T, H, Dh);
      add_scalar_head(dbeta, lay.dbeta, b, h, T, H);
      if (log_f && dlog_f) scatter_gate_grad(dlog_f, lay.dG, b, h, T, H);
    }
}

#define SB_PATH_BACKWARD_INSTANTIATE(S)                                                           \
  template void blockwise_backward<S>(S*, S*, S*, S*, S*, S*, const S*, const S*, const S*,       \
                                      const S*, const S*, const S*, const S*, const S*, const S*, \
                                      int64_t, int64_t, int64_t, int64_t, S, int64_t, S*);
SB_PATH_BACKWARD_INSTANTIATE(SB_NN_SCALAR)
#undef SB_PATH_BACKWARD_INSTANTIATE

}  // namespace sb::nn::path_detail

namespace sb::nn {

using namespace path_detail;

template <class S>
void path_attention_backward(S* dq, S* dk, S* dv, S* dw, S* dbeta, S* dlog_f, const S* dout,
                             const S* q, const S* k, const S* v, const S* w, const S* beta,
                             const S* log_f, const S* out, const S* lse, int64_t B, int64_t T,
                             int64_t H, int64_t Dh, S scale, PathForm form, int64_t block,
                             S* workspace) {
  check_shapes(B, T, H, Dh, form, block);
  AlignedVector<S> owned;
  workspace = workspace_or_owned(workspace, owned, path_backward_workspace_elems(T, Dh, form, block));
  if (form == PathForm::Direct)
    direct_backward(dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, out, lse, B, T, H,
                    Dh, scale, workspace);
  else
    blockwise_backward(dq, dk, dv, dw, dbeta, dlog_f, dout, q, k, v, w, beta, log_f, out, lse, B, T,
                       H, Dh, scale, block, workspace);
}

#define SB_PATH_ATTENTION_BACKWARD_INSTANTIATE(S)                                                 \
  template void path_attention_backward<S>(                                                       \
      S*, S*, S*, S*, S*, S*, const S*, const S*, const S*, const S*, const S*, const S*,         \
      const S*, const S*, const S*, int64_t, int64_t, int64_t, int64_t, S, PathForm, int64_t, S*);
SB_PATH_ATTENTION_BACKWARD_INSTANTIATE(SB_NN_SCALAR)
#undef SB_PATH_ATTENTION_BACKWARD_INSTANTIATE

}  // namespace sb::nn
