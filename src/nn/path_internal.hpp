// path_internal.hpp: helpers shared by the PaTH attention sources (not a public interface):
// Eigen aliases, a bump allocator over the caller's workspace, per-(b, h) strided views of the
// [B, T, H, Dh] tensors, and the per-block UT factors of the Blockwise form.
#pragma once
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/aligned_vector.hpp"
#include "core/error.hpp"
#include "nn/path_attention.hpp"

namespace sb::nn::path_detail {

template <class S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using MapM = Eigen::Map<Mat<S>>;
template <class S>
using CMapM = Eigen::Map<const Mat<S>>;
// A (b, h) slice of a [B, T, H, Dh] tensor: T rows of Dh with row stride H * Dh.
template <class S>
using CStrided = Eigen::Map<const Mat<S>, 0, Eigen::OuterStride<>>;
template <class S>
using Strided = Eigen::Map<Mat<S>, 0, Eigen::OuterStride<>>;

// Carves consecutive pieces out of one buffer; with base == nullptr it only counts, so the same
// code computes workspace sizes and lays the workspace out.
template <class S>
struct Arena {
  S* base = nullptr;
  int64_t used = 0;
  S* take(int64_t n) {
    S* p = base ? base + used : nullptr;
    used += n;
    return p;
  }
};

inline void check_shapes(int64_t B, int64_t T, int64_t H, int64_t Dh, PathForm form,
                         int64_t block) {
  if (B < 1 || T < 1 || H < 1 || Dh < 1)
    fail("path attention: bad shape (B, T, H, Dh) = ({}, {}, {}, {})", B, T, H, Dh);
  if (form == PathForm::Blockwise && block < 1) fail("path attention: bad block size '{}'", block);
}

// The caller's workspace, or `owned` resized to `elems` when the caller passed none.
template <class S>
S* workspace_or_owned(S* workspace, AlignedVector<S>& owned, int64_t elems) {
  if (workspace) return workspace;
  owned.resize(static_cast<size_t>(elems));
  return owned.data();
}

// Offset of element (b, t=0, h, 0) in a [B, T, H, Dh] tensor, and of (b, t=0, h) in [B, T, H].
inline int64_t head_offset(int64_t b, int64_t h, int64_t T, int64_t H, int64_t Dh) {
  return (b * T * H + h) * Dh;
}
inline int64_t scalar_offset(int64_t b, int64_t h, int64_t T, int64_t H) { return b * T * H + h; }

template <class S>
CStrided<S> head_view(const S* x, int64_t b, int64_t h, int64_t T, int64_t H, int64_t Dh) {
  return CStrided<S>(x + head_offset(b, h, T, H, Dh), T, Dh, Eigen::OuterStride<>(H * Dh));
}
template <class S>
Strided<S> head_view_mut(S* x, int64_t b, int64_t h, int64_t T, int64_t H, int64_t Dh) {
  return Strided<S>(x + head_offset(b, h, T, H, Dh), T, Dh, Eigen::OuterStride<>(H * Dh));
}

// Copies beta (and, if present, the inclusive prefix sum G_t = sum_{s<=t} log_f_s, kept in
// double) of head (b, h) into contiguous [T] vectors. Without a gate G stays all zero.
template <class S>
void gather_beta_gate(S* beta_out, double* G_out, const S* beta, const S* log_f, int64_t b,
                      int64_t h, int64_t T, int64_t H) {
  const int64_t off = scalar_offset(b, h, T, H);
  double acc = 0;
  for (int64_t t = 0; t < T; ++t) {
    beta_out[t] = beta[off + t * H];
    if (log_f) acc += static_cast<double>(log_f[off + t * H]);
    G_out[t] = acc;
  }
}

// Gate bias of query block [s, s + lq) relative to its start, rounded to S only after the
// subtraction so float keeps the precision of nearby keys at any T:
//   G_{s+r} - G_j = rowbias[r] - colbias[j],  rowbias[r] = G_{s+r} - G_s,  colbias[j] = G_j - G_s.
template <class S>
void block_gate_bias(S* rowbias, S* colbias, const double* G, int64_t s, int64_t lq) {
  for (int64_t r = 0; r < lq; ++r) rowbias[r] = static_cast<S>(G[s + r] - G[s]);
  for (int64_t j = 0; j < s + lq; ++j) colbias[j] = static_cast<S>(G[j] - G[s]);
}

// A read-only [n] row array over contiguous memory.
template <class S>
Eigen::Map<const Eigen::Array<S, 1, Eigen::Dynamic>> row_array(const S* p, int64_t n) {
  return Eigen::Map<const Eigen::Array<S, 1, Eigen::Dynamic>>(p, n);
}

// exp(x) for logits already shifted to <= 0, with results below 3 x the smallest normal number
// set to exactly 0: no subnormal probabilities (slow in the GEMMs that follow) under strong gates.
// Clamp, Eigen's vectorised exp, then a blend loop the compiler vectorises. `row` is contiguous.
template <class S, class Row>
void shifted_exp_in_place(Row&& row) {
  static const S floor = std::log(std::numeric_limits<S>::min()) + S(1);  // exp(floor) = e min
  const S tiny = 3 * std::numeric_limits<S>::min();
  row = row.array().max(floor).exp();
  S* x = row.data();
  for (int64_t i = 0, n = row.size(); i < n; ++i) x[i] = x[i] < tiny ? S(0) : x[i];
}

// dlog_f_s += sum_{t >= s} dG_t (the gradient of the prefix sum), for head (b, h).
template <class S>
void scatter_gate_grad(S* dlog_f, const S* dG, int64_t b, int64_t h, int64_t T, int64_t H) {
  const int64_t off = scalar_offset(b, h, T, H);
  double acc = 0;
  for (int64_t t = T - 1; t >= 0; --t) {
    acc += static_cast<double>(dG[t]);
    dlog_f[off + t * H] += static_cast<S>(acc);
  }
}

// Per-block UT factors of one head in the Blockwise form. Block n covers the rows
// [n L, min(T, n L + L)). For block rows W (Ln x Dh), keys K, D = diag(beta):
//   Tinv = (I + strictLower(D W W^T))^{-1} D    (Ln x Ln, lower)   so H_{Ln-1}..H_0 = I - W^T Y
//   Y    = Tinv W                               (Ln x Dh)
//   Z    = Tinv strictLower(W K^T)              (Ln x Ln, strictly lower)
//   Kt   = K - Z^T W   (row m: k_m pushed through H_{m+1}..H_{Ln-1}, i.e. to the block end)
//   P    = I - W^T Y   (Dh x Dh block product, only when `dense`)
// Transporting Lq queries through a block costs 2 Lq Ln Dh multiply-adds factored (X - (X W^T) Y)
// and Lq Dh^2 with the dense product X P, so the dense form is used when Dh <= 2 L; its storage,
// nblocks Dh^2 <= 2 T Dh, stays O(T Dh).
inline bool use_dense_transport(int64_t Dh, int64_t L) { return Dh <= 2 * L; }

template <class S>
struct BlockFactors {
  int64_t T = 0, Dh = 0, L = 0, nblocks = 0;
  bool dense = false;
  S* tinv = nullptr;  // [nblocks, L, L]
  S* z = nullptr;     // [nblocks, L, L]
  S* y = nullptr;     // [T, Dh]
  S* kt = nullptr;    // [T, Dh]
  S* p = nullptr;     // [nblocks, Dh, Dh] if dense

  void layout(Arena<S>& a, int64_t T_, int64_t Dh_, int64_t L_) {
    T = T_, Dh = Dh_, L = L_, nblocks = (T + L - 1) / L;
    dense = use_dense_transport(Dh, L);
    tinv = a.take(nblocks * L * L);
    z = a.take(nblocks * L * L);
    y = a.take(T * Dh);
    kt = a.take(T * Dh);
    if (dense) p = a.take(nblocks * Dh * Dh);
  }
  int64_t start(int64_t n) const { return n * L; }
  int64_t size(int64_t n) const { return std::min(T, n * L + L) - n * L; }
  MapM<S> Tinv(int64_t n) const { return MapM<S>(tinv + n * L * L, size(n), size(n)); }
  MapM<S> Z(int64_t n) const { return MapM<S>(z + n * L * L, size(n), size(n)); }
  MapM<S> Y(int64_t n) const { return MapM<S>(y + start(n) * Dh, size(n), Dh); }
  MapM<S> Kt(int64_t n) const { return MapM<S>(kt + start(n) * Dh, size(n), Dh); }
  MapM<S> P(int64_t n) const { return MapM<S>(p + n * Dh * Dh, Dh, Dh); }
};

// M = I + strictLower(diag(beta) W W^T) for one block (Ln x Ln, unit lower triangular).
template <class S, class WBlock>
Mat<S> ut_matrix(const WBlock& W, const S* beta) {
  const int64_t n = W.rows();
  Mat<S> M = Mat<S>::Identity(n, n);
  Mat<S> gram = W * W.transpose();
  for (int64_t r = 1; r < n; ++r)
    for (int64_t p = 0; p < r; ++p) M(r, p) = beta[r] * gram(r, p);
  return M;
}

// Fills the factors of every block of one head (W, K: T x Dh views; beta: [T] contiguous).
template <class S>
void compute_block_factors(const BlockFactors<S>& f, const CStrided<S>& W, const CStrided<S>& K,
                           const S* beta) {
  for (int64_t n = 0; n < f.nblocks; ++n) {
    const int64_t s = f.start(n), ln = f.size(n);
    const auto Wb = W.middleRows(s, ln);
    const auto Kb = K.middleRows(s, ln);
    const Mat<S> M = ut_matrix<S>(Wb, beta + s);
    MapM<S> Tinv = f.Tinv(n);
    Tinv.setZero();
    for (int64_t r = 0; r < ln; ++r) Tinv(r, r) = beta[s + r];
    M.template triangularView<Eigen::UnitLower>().solveInPlace(Tinv);
    f.Y(n).noalias() = Tinv * Wb;
    Mat<S> C = (Wb * Kb.transpose()).template triangularView<Eigen::StrictlyLower>();
    f.Z(n).noalias() = Tinv.template triangularView<Eigen::Lower>() * C;
    f.Kt(n) = Kb;
    f.Kt(n).noalias() -= f.Z(n).transpose() * Wb;
    if (f.dense) {
      f.P(n).setIdentity();
      f.P(n).noalias() -= Wb.transpose() * f.Y(n);
    }
  }
}

}  // namespace sb::nn::path_detail

namespace sb::nn::path_detail {

// The per-form drivers behind the public entry points (arguments as there; workspace non-null).
int64_t direct_forward_ws(int64_t T, int64_t Dh);
int64_t direct_backward_ws(int64_t T, int64_t Dh);
int64_t blockwise_forward_ws(int64_t T, int64_t Dh, int64_t L);
int64_t blockwise_backward_ws(int64_t T, int64_t Dh, int64_t L);

template <class S>
void direct_forward(S* out, S* lse, const S* q, const S* k, const S* v, const S* w, const S* beta,
                    const S* log_f, int64_t B, int64_t T, int64_t H, int64_t Dh, S scale, S* ws);
template <class S>
void direct_backward(S* dq, S* dk, S* dv, S* dw, S* dbeta, S* dlog_f, const S* dout, const S* q,
                     const S* k, const S* v, const S* w, const S* beta, const S* log_f,
                     const S* out, const S* lse, int64_t B, int64_t T, int64_t H, int64_t Dh,
                     S scale, S* ws);
template <class S>
void blockwise_forward(S* out, S* lse, const S* q, const S* k, const S* v, const S* w,
                       const S* beta, const S* log_f, int64_t B, int64_t T, int64_t H, int64_t Dh,
                       S scale, int64_t L, S* ws);
template <class S>
void blockwise_backward(S* dq, S* dk, S* dv, S* dw, S* dbeta, S* dlog_f, const S* dout, const S* q,
                        const S* k, const S* v, const S* w, const S* beta, const S* log_f,
                        const S* out, const S* lse, int64_t B, int64_t T, int64_t H, int64_t Dh,
                        S scale, int64_t L, S* ws);

// Adds a contiguous T x Dh buffer into a (b, h) slice of a [B, T, H, Dh] tensor (skip if null).
template <class S>
void add_head(S* dst, const S* src, int64_t b, int64_t h, int64_t T, int64_t H, int64_t Dh) {
  if (!dst) return;
  head_view_mut(dst, b, h, T, H, Dh) += CMapM<S>(src, T, Dh);
}
// Adds a contiguous [T] buffer into a (b, h) slice of a [B, T, H] tensor (skip if null).
template <class S>
void add_scalar_head(S* dst, const S* src, int64_t b, int64_t h, int64_t T, int64_t H) {
  if (!dst) return;
  const int64_t off = scalar_offset(b, h, T, H);
  for (int64_t t = 0; t < T; ++t) dst[off + t * H] += src[t];
}

}  // namespace sb::nn::path_detail
