// path_blockwise.cpp: the Blockwise (UT form) forward of PaTH attention, the production CPU path.
// Per head: per-block factors (Tinv, Y = Tinv W, Z, pushed keys Kt; see path_internal.hpp), then
// each query block scores its own block through the intra-block UT formula and walks the earlier
// key blocks right to left, transporting the queries through each block product P = I - W^T Y.
// Scores live in one [block, T] strip per query block; no T x T matrix is ever formed.
#include <cmath>
#include <limits>

#include "nn/instantiate.hpp"
#include "nn/path_internal.hpp"

namespace sb::nn::path_detail {
namespace {

template <class S>
struct ForwardLayout {
  BlockFactors<S> f;
  S* beta = nullptr;     // [T]
  S* rowbias = nullptr;  // [L] gate bias of the query rows (block_gate_bias)
  S* colbias = nullptr;  // [T] gate bias of the key columns
  S* qs = nullptr;       // [L, Dh] scaled queries of the current block
  S* a = nullptr;        // [L, L]  lower(Qs W^T) of the current block
  S* x = nullptr;        // [L, Dh] queries transported to the end of the key block being scored
  S* xw = nullptr;       // [L, max(L, Dh)] X W^T (factored) or X P (dense transport)
  S* strip = nullptr;    // [L, T] logits, then probabilities, of the current query block
  S* rowsum = nullptr;   // [L]

  void layout(Arena<S>& ar, int64_t T, int64_t Dh, int64_t L) {
    L = std::min(L, T);
    f.layout(ar, T, Dh, L);
    beta = ar.take(T), rowbias = ar.take(L), colbias = ar.take(T), qs = ar.take(L * Dh),
    a = ar.take(L * L);
    x = ar.take(L * Dh), xw = ar.take(L * std::max(L, Dh)), strip = ar.take(L * T),
    rowsum = ar.take(L);
  }
};

}  // namespace

#if SB_NN_FLOAT_PASS  // scalar-independent: defined once (nn/instantiate.hpp)
int64_t blockwise_forward_ws(int64_t T, int64_t Dh, int64_t L) {
  Arena<double> a;
  ForwardLayout<double>().layout(a, T, Dh, L);
  return a.used;
}
#endif

template <class S>
void blockwise_forward(S* out, S* lse, const S* q, const S* k, const S* v, const S* w,
                       const S* beta, const S* log_f, int64_t B, int64_t T, int64_t H, int64_t Dh,
                       S scale, int64_t L, S* ws) {
  Arena<S> arena{ws};
  ForwardLayout<S> lay;
  lay.layout(arena, T, Dh, L);
  const BlockFactors<S>& f = lay.f;
  std::vector<double> G(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const auto Q = head_view(q, b, h, T, H, Dh), K = head_view(k, b, h, T, H, Dh);
      const auto V = head_view(v, b, h, T, H, Dh), W = head_view(w, b, h, T, H, Dh);
      auto O = head_view_mut(out, b, h, T, H, Dh);
      S* lse_row = lse + (b * H + h) * T;
      gather_beta_gate(lay.beta, G.data(), beta, log_f, b, h, T, H);
      compute_block_factors(f, W, K, lay.beta);
      for (int64_t n = 0; n < f.nblocks; ++n) {
        const int64_t s = f.start(n), lq = f.size(n), e = s + lq;
        const auto Wb = W.middleRows(s, lq);
        MapM<S> Qs(lay.qs, lq, Dh), A(lay.a, lq, lq), X(lay.x, lq, Dh);
        MapM<S> St(lay.strip, lq, e);
        Qs = scale * Q.middleRows(s, lq);
        A.noalias() = Qs * Wb.transpose();
        A.template triangularView<Eigen::StrictlyUpper>().setZero();
        // Own block: lower(Qs K^T) - lower(Qs W^T) Z.
        auto Sd = St.middleCols(s, lq);
        Sd.noalias() = Qs * K.middleRows(s, lq).transpose();
        Sd.noalias() -= A * f.Z(n);
        // Earlier blocks, right to left, starting from the block-transformed queries Qs - A Y.
        X = Qs;
        X.noalias() -= A * f.Y(n);
        for (int64_t m = n - 1; m >= 0; --m) {
          const int64_t ks = f.start(m), kl = f.size(m);
          St.middleCols(ks, kl).noalias() = X * f.Kt(m).transpose();
          if (m == 0) break;
          if (f.dense) {
            MapM<S> XP(lay.xw, lq, Dh);
            XP.noalias() = X * f.P(m);
            X = XP;
          } else {
            MapM<S> XW(lay.xw, lq, kl);
            XW.noalias() = X * W.middleRows(ks, kl).transpose();
            X.noalias() -= XW * f.Y(m);
          }
        }
        // Gate, causal mask, softmax.
        if (log_f) block_gate_bias(lay.rowbias, lay.colbias, G.data(), s, lq);
        for (int64_t r = 0; r < lq; ++r) {
          const int64_t len = s + r + 1;
          auto row = St.row(r).head(len);
          if (log_f) row.array() += lay.rowbias[r] - row_array(lay.colbias, len);
          const S mx = row.maxCoeff();
          row.array() -= mx;
          shifted_exp_in_place<S>(row);
          const S l = row.sum();
          lay.rowsum[r] = l;
          lse_row[s + r] = mx + std::log(l);
          St.row(r).tail(e - len).setZero();
        }
        auto Ob = O.middleRows(s, lq);
        Ob.noalias() = St * V.topRows(e);
        for (int64_t r = 0; r < lq; ++r) Ob.row(r) /= lay.rowsum[r];
      }
    }
}

#define SB_PATH_BLOCKWISE_INSTANTIATE(S)                                                       \
  template void blockwise_forward<S>(S*, S*, const S*, const S*, const S*, const S*, const S*, \
                                     const S*, int64_t, int64_t, int64_t, int64_t, S, int64_t, \
                                     S*);
SB_PATH_BLOCKWISE_INSTANTIATE(SB_NN_SCALAR)
#undef SB_PATH_BLOCKWISE_INSTANTIATE

}  // namespace sb::nn::path_detail
