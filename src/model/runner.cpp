// runner.cpp: TransformerRunner, the forward and backward passes of the model over activations
// preallocated for one (B, T) shape. Backward accumulates into a caller's flat gradient buffer
// with the ParamStore layout (data-parallel training gives each thread its own). The head and the
// loss only touch labelled rows when labels are given (MQAR labels a few positions of 8192-way
// logits), so memory and time scale with the labelled positions, not B*T*V. Post-norm blocks
// (model.norm_position) normalise after each residual add and leave out the final norm.
#include "core/aligned_vector.hpp"
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "model/transformer.hpp"
#include "nn/ops_act.hpp"
#include "nn/ops_attention.hpp"
#include "nn/ops_basic.hpp"
#include "nn/ops_sba.hpp"
#include "nn/path_attention.hpp"
#include "nn/path_wpath.hpp"

namespace sb {

namespace {
template <class S>
using Buf = AlignedVector<S>;

template <class S>
void zero(Buf<S>& b) {
  std::fill(b.begin(), b.end(), S(0));
}
}  // namespace

template <class S>
struct TransformerRunner<S>::Impl {
  struct Layer {
    Attention kind;
    Buf<S> x_in;                  // [N, D] residual stream entering the layer
    Buf<S> h1, mean1, rstd1;      // [N, D], [N], [N] pre-attention norm
    Buf<S> q, k, v;               // [N, HD] (q, k after RoPE for rope layers)
    Buf<S> zf, logf;              // [N, H] forget-gate pre-activation and log f
    Buf<S> a1, u, conv, w;        // [N, R], [N, HD] x3: the PaTH w path
    Buf<S> zb, beta;              // [N, H] beta pre-activation and beta
    Buf<S> att, lse;              // [N, HD], [B, H, T]
    Buf<S> x_mid;                 // [N, D] after the attention residual (post-norm: norm1's input)
    Buf<S> y1, r2;                // post-norm: [N, D] norm1's output, norm2's input
    Buf<S> h2, mean2, rstd2;      // pre-MLP norm (post-norm: h2 = y1, the stats are norm2's)
    Buf<S> g, s;                  // MLP: [N, 2F] (swiglu) or [N, F] (gelu) pre-activation; [N, F] hidden
  };

  const Transformer<S>& model;
  const ModelConfig& c;
  int64_t B, T, N, D, H, Dh, HD, F, V, R;
  S scale, beta_max;
  bool post;                    // post-norm blocks
  std::vector<Layer> layers;
  std::vector<int32_t> ids;     // [N]
  Buf<S> x_final, hf, meanf, rstdf;  // [N, D] final residual and its norm
  std::vector<int64_t> rows;    // rows of the head: labelled rows, or all
  std::vector<int32_t> row_labels;
  Buf<S> hf_rows, logits, losses;  // [M, D], [M, V], [M]
  bool have_labels = false, all_rows = true;
  Buf<S> tmp;                   // [N, D] a projection's output before the residual add
  Buf<S> ws_fwd, ws_bwd;        // PaTH workspaces
  // backward scratch
  Buf<S> dx, dh, datt, dq, dk, dv, dq_pre, dk_pre, dw, du, da1, dlogf, dzf, dbeta, dzb, dg, ds, dlogits, dhf_rows;

  Impl(const Transformer<S>& m, int64_t b, int64_t t)
      : model(m), c(m.config()), B(b), T(t), N(b * t), D(c.d_model), H(c.n_heads), Dh(c.head_dim),
        HD(c.n_heads * c.head_dim), F(c.mlp_hidden()), V(m.vocab_size()), R(c.path.rank),
        post(c.norm_position == NormPosition::post) {
    if (B < 1 || T < 1) fail("model runner: batch {} and length {} must be >= 1", B, T);
    if (c.position == PositionKind::learned && T > c.max_len)
      fail("model.max_len: sequences of {} tokens exceed the {} learned positions", T, c.max_len);
    scale = static_cast<S>(1.0 / std::sqrt(static_cast<double>(Dh)));
    beta_max = static_cast<S>(c.path.beta_clamp > 0 ? c.path.beta_clamp : 2.0);
    bool any_path = false, any_rope = false, any_gate = false;
    const int64_t f_in = c.mlp == MlpKind::swiglu ? 2 * F : F;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      Layer L;
      L.kind = c.layer_attention(l);
      L.x_in.resize(N * D);
      L.h1.resize(N * D), L.mean1.resize(N), L.rstd1.resize(N);
      L.q.resize(N * HD), L.k.resize(N * HD), L.v.resize(N * HD);
      if (uses_gate(L.kind)) L.zf.resize(N * H), L.logf.resize(N * H), any_gate = true;
      if (uses_path(L.kind)) {
        L.a1.resize(N * R), L.u.resize(N * HD), L.conv.resize(N * HD), L.w.resize(N * HD);
        L.zb.resize(N * H), L.beta.resize(N * H);
        any_path = true;
      }
      any_rope |= L.kind == Attention::rope;
      L.att.resize(N * HD), L.lse.resize(B * H * T), L.x_mid.resize(N * D);
      if (post) L.y1.resize(N * D);
      if (c.mlp != MlpKind::none) {
        L.h2.resize(N * D), L.mean2.resize(N), L.rstd2.resize(N);
        L.g.resize(N * f_in), L.s.resize(N * F);
        if (post) L.r2.resize(N * D);
      }
      layers.push_back(std::move(L));
    }
    ids.resize(N);
    x_final.resize(N * D), hf.resize(N * D), meanf.resize(N), rstdf.resize(N), tmp.resize(N * D);
    if (any_path) {
      ws_fwd.resize(nn::path_forward_workspace_elems(T, Dh, nn::PathForm::Blockwise, c.path.block));
      ws_bwd.resize(nn::path_backward_workspace_elems(T, Dh, nn::PathForm::Blockwise, c.path.block));
      dw.resize(N * HD), du.resize(N * HD), da1.resize(N * R), dbeta.resize(N * H), dzb.resize(N * H);
    }
    if (any_gate) dlogf.resize(N * H), dzf.resize(N * H);
    if (any_rope) dq_pre.resize(N * HD), dk_pre.resize(N * HD);
    dx.resize(N * D), dh.resize(N * D), datt.resize(N * HD), dq.resize(N * HD), dk.resize(N * HD), dv.resize(N * HD);
    if (c.mlp != MlpKind::none) dg.resize(N * f_in), ds.resize(N * F);
  }

  const S* P(const std::string& name) const { return model.params().param(name); }
  S* G(S* grads, const std::string& name) const { return grads + model.params().view(name).offset; }
  bool has(const std::string& name) const { return model.params().contains(name); }

  void norm_forward(Buf<S>& out, Buf<S>& mean, Buf<S>& rstd, const Buf<S>& x, const std::string& name) {
    if (c.norm == NormKind::rmsnorm)
      nn::rmsnorm_forward(out.data(), rstd.data(), x.data(), P(name + ".weight"), N, D);
    else
      nn::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), P(name + ".weight"), P(name + ".bias"), N, D);
  }
  void norm_backward(Buf<S>& dx_out, const Buf<S>& dout, const Buf<S>& x, const Buf<S>& mean, const Buf<S>& rstd,
                     const std::string& name, S* grads) {
    if (c.norm == NormKind::rmsnorm)
      nn::rmsnorm_backward(dx_out.data(), G(grads, name + ".weight"), dout.data(), x.data(), P(name + ".weight"),
                           rstd.data(), N, D);
    else
      nn::layernorm_backward(dx_out.data(), G(grads, name + ".weight"), G(grads, name + ".bias"), dout.data(), x.data(),
                             P(name + ".weight"), mean.data(), rstd.data(), N, D);
  }

  void attention_forward(Layer& L, const std::string& p) {
    nn::linear_forward(L.q.data(), L.h1.data(), P(p + "attn.wq"), static_cast<const S*>(nullptr), N, D, HD);
    nn::linear_forward(L.k.data(), L.h1.data(), P(p + "attn.wk"), static_cast<const S*>(nullptr), N, D, HD);
    nn::linear_forward(L.v.data(), L.h1.data(), P(p + "attn.wv"), static_cast<const S*>(nullptr), N, D, HD);
    if (L.kind == Attention::rope) {
      nn::rope_forward(L.q.data(), L.q.data(), B, T, H, Dh, c.rope_theta);
      nn::rope_forward(L.k.data(), L.k.data(), B, T, H, Dh, c.rope_theta);
    }
    const S* logf = nullptr;
    if (uses_gate(L.kind)) {
      nn::linear_forward(L.zf.data(), L.h1.data(), P(p + "attn.wf"), P(p + "attn.bf"), N, D, H);
      nn::logsigmoid_forward(L.logf.data(), L.zf.data(), N * H);
      if (c.scales_gate(L.kind))
        for (S& x : L.logf) x *= scale;
      logf = L.logf.data();
    }
    if (uses_path(L.kind)) {
      nn::linear_forward(L.a1.data(), L.h1.data(), P(p + "attn.w1"), static_cast<const S*>(nullptr), N, D, R);
      nn::linear_forward(L.u.data(), L.a1.data(), P(p + "attn.w2"), static_cast<const S*>(nullptr), N, R, HD);
      const S* conv_bias = has(p + "attn.conv_bias") ? P(p + "attn.conv_bias") : nullptr;
      nn::path_wpath_forward(L.w.data(), L.conv.data(), L.u.data(), P(p + "attn.conv"), conv_bias, B, T, H, Dh,
                             static_cast<S>(nn::kPathWNormEps));
      nn::linear_forward(L.zb.data(), L.h1.data(), P(p + "attn.wbeta"), P(p + "attn.bbeta"), N, D, H);
      nn::path_beta_forward(L.beta.data(), L.zb.data(), N * H, beta_max);
      nn::path_attention_forward(L.att.data(), L.lse.data(), L.q.data(), L.k.data(), L.v.data(), L.w.data(),
                                 L.beta.data(), logf, B, T, H, Dh, scale, nn::PathForm::Blockwise, c.path.block,
                                 ws_fwd.data());
    } else if (L.kind == Attention::sba) {
      nn::sba_attention_forward(L.att.data(), L.q.data(), L.k.data(), L.v.data(), B, T, H, Dh,
                                static_cast<double>(scale), c.sba.remainder == SbaRemainder::current);
    } else {
      nn::softmax_attention_forward(L.att.data(), L.lse.data(), L.q.data(), L.k.data(), L.v.data(), logf, B, T, H, Dh,
                                    static_cast<double>(scale));
    }
  }

  // Post-norm: dx holds d(norm output) of the norm over x; leaves d(x) in dx.
  void post_norm_backward(const Buf<S>& x, const Buf<S>& mean, const Buf<S>& rstd, const std::string& name,
                          S* grads) {
    zero(tmp);
    norm_backward(tmp, dx, x, mean, rstd, name, grads);
    std::swap(dx, tmp);
  }
  // dx += d(x) of the block input x given dh = d(h): through norm `name` (pre-norm), or h = x (post-norm).
  void input_norm_backward(const Buf<S>& x, const Buf<S>& mean, const Buf<S>& rstd, const std::string& name,
                           S* grads) {
    if (post)
      nn::residual_forward(dx.data(), dx.data(), dh.data(), N * D);
    else
      norm_backward(dx, dh, x, mean, rstd, name, grads);
  }

  void attention_backward(Layer& L, const std::string& p, S* grads) {
    // dx holds d(x_mid) (post-norm: d(y1) first); the attention output projection first.
    if (post) post_norm_backward(L.x_mid, L.mean1, L.rstd1, p + "norm1", grads);
    zero(datt);
    nn::linear_backward(datt.data(), G(grads, p + "attn.wo"), static_cast<S*>(nullptr), dx.data(), L.att.data(),
                        P(p + "attn.wo"), N, HD, D);
    zero(dq), zero(dk), zero(dv);
    const bool gate = uses_gate(L.kind);
    if (gate) zero(dlogf);
    if (uses_path(L.kind)) {
      zero(dw), zero(dbeta);
      nn::path_attention_backward(dq.data(), dk.data(), dv.data(), dw.data(), dbeta.data(), gate ? dlogf.data() : nullptr,
                                  datt.data(), L.q.data(), L.k.data(), L.v.data(), L.w.data(), L.beta.data(),
                                  gate ? L.logf.data() : nullptr, L.att.data(), L.lse.data(), B, T, H, Dh, scale,
                                  nn::PathForm::Blockwise, c.path.block, ws_bwd.data());
    } else if (L.kind == Attention::sba) {
      nn::sba_attention_backward(dq.data(), dk.data(), dv.data(), datt.data(), L.q.data(), L.k.data(), L.v.data(), B,
                                 T, H, Dh, static_cast<double>(scale), c.sba.remainder == SbaRemainder::current);
    } else {
      nn::softmax_attention_backward(dq.data(), dk.data(), dv.data(), gate ? dlogf.data() : nullptr, datt.data(),
                                     L.q.data(), L.k.data(), L.v.data(), gate ? L.logf.data() : nullptr, L.att.data(),
                                     L.lse.data(), B, T, H, Dh, static_cast<double>(scale));
    }
    const S* dq_in = dq.data();
    const S* dk_in = dk.data();
    if (L.kind == Attention::rope) {
      zero(dq_pre), zero(dk_pre);
      nn::rope_backward(dq_pre.data(), dq.data(), B, T, H, Dh, c.rope_theta);
      nn::rope_backward(dk_pre.data(), dk.data(), B, T, H, Dh, c.rope_theta);
      dq_in = dq_pre.data(), dk_in = dk_pre.data();
    }
    zero(dh);
    S* none = nullptr;
    nn::linear_backward(dh.data(), G(grads, p + "attn.wq"), none, dq_in, L.h1.data(), P(p + "attn.wq"), N, D, HD);
    nn::linear_backward(dh.data(), G(grads, p + "attn.wk"), none, dk_in, L.h1.data(), P(p + "attn.wk"), N, D, HD);
    nn::linear_backward(dh.data(), G(grads, p + "attn.wv"), none, dv.data(), L.h1.data(), P(p + "attn.wv"), N, D, HD);
    if (gate) {
      zero(dzf);
      if (c.scales_gate(L.kind))
        for (S& x : dlogf) x *= scale;
      nn::logsigmoid_backward(dzf.data(), dlogf.data(), L.zf.data(), N * H);
      nn::linear_backward(dh.data(), G(grads, p + "attn.wf"), G(grads, p + "attn.bf"), dzf.data(), L.h1.data(),
                          P(p + "attn.wf"), N, D, H);
    }
    if (uses_path(L.kind)) {
      zero(du);
      const bool bias = has(p + "attn.conv_bias");
      nn::path_wpath_backward(du.data(), G(grads, p + "attn.conv"), bias ? G(grads, p + "attn.conv_bias") : nullptr,
                              dw.data(), L.conv.data(), L.u.data(), P(p + "attn.conv"), B, T, H, Dh,
                              static_cast<S>(nn::kPathWNormEps));
      zero(da1);
      nn::linear_backward(da1.data(), G(grads, p + "attn.w2"), none, du.data(), L.a1.data(), P(p + "attn.w2"), N, R, HD);
      nn::linear_backward(dh.data(), G(grads, p + "attn.w1"), none, da1.data(), L.h1.data(), P(p + "attn.w1"), N, D, R);
      zero(dzb);
      nn::path_beta_backward(dzb.data(), dbeta.data(), L.zb.data(), N * H, beta_max);
      nn::linear_backward(dh.data(), G(grads, p + "attn.wbeta"), G(grads, p + "attn.bbeta"), dzb.data(), L.h1.data(),
                          P(p + "attn.wbeta"), N, D, H);
    }
    input_norm_backward(L.x_in, L.mean1, L.rstd1, p + "norm1", grads);  // dx: now d(x_in)
  }

  void mlp_forward(Layer& L, const std::string& p, Buf<S>& x_next) {
    const Buf<S>& x = post ? L.y1 : L.x_mid;  // the block's input on the residual stream
    if (post)
      std::copy(x.begin(), x.end(), L.h2.begin());
    else
      norm_forward(L.h2, L.mean2, L.rstd2, x, p + "norm2");
    const S* none = nullptr;
    if (c.mlp == MlpKind::swiglu) {
      nn::linear_forward(L.g.data(), L.h2.data(), P(p + "mlp.w_gate_up"), none, N, D, 2 * F);
      nn::swiglu_forward(L.s.data(), L.g.data(), N, F);
      nn::linear_forward(tmp.data(), L.s.data(), P(p + "mlp.w_down"), none, N, F, D);
    } else {
      nn::linear_forward(L.g.data(), L.h2.data(), P(p + "mlp.w_in"), none, N, D, F);
      nn::gelu_forward(L.s.data(), L.g.data(), N * F);
      nn::linear_forward(tmp.data(), L.s.data(), P(p + "mlp.w_out"), none, N, F, D);
    }
    if (post) {
      nn::residual_forward(L.r2.data(), x.data(), tmp.data(), N * D);
      norm_forward(x_next, L.mean2, L.rstd2, L.r2, p + "norm2");
    } else {
      nn::residual_forward(x_next.data(), x.data(), tmp.data(), N * D);
    }
  }

  void mlp_backward(Layer& L, const std::string& p, S* grads) {  // dx: d(x_next) -> d(x_mid) (post: d(y1))
    S* none = nullptr;
    if (post) post_norm_backward(L.r2, L.mean2, L.rstd2, p + "norm2", grads);
    zero(ds), zero(dg), zero(dh);
    if (c.mlp == MlpKind::swiglu) {
      nn::linear_backward(ds.data(), G(grads, p + "mlp.w_down"), none, dx.data(), L.s.data(), P(p + "mlp.w_down"), N, F, D);
      nn::swiglu_backward(dg.data(), ds.data(), L.g.data(), N, F);
      nn::linear_backward(dh.data(), G(grads, p + "mlp.w_gate_up"), none, dg.data(), L.h2.data(),
                          P(p + "mlp.w_gate_up"), N, D, 2 * F);
    } else {
      nn::linear_backward(ds.data(), G(grads, p + "mlp.w_out"), none, dx.data(), L.s.data(), P(p + "mlp.w_out"), N, F, D);
      nn::gelu_backward(dg.data(), ds.data(), L.g.data(), N * F);
      nn::linear_backward(dh.data(), G(grads, p + "mlp.w_in"), none, dg.data(), L.h2.data(), P(p + "mlp.w_in"), N, D, F);
    }
    input_norm_backward(post ? L.y1 : L.x_mid, L.mean2, L.rstd2, p + "norm2", grads);
  }

  const S* head_weight() const { return P(c.tied_embeddings ? "embed.weight" : "head.weight"); }

  nn::LossSum forward(const int32_t* in_ids, const int32_t* labels) {
    std::copy(in_ids, in_ids + N, ids.begin());
    Buf<S>& x0 = layers.empty() ? x_final : layers[0].x_in;
    nn::embedding_forward(x0.data(), ids.data(), P("embed.weight"), N, V, D);
    if (c.position == PositionKind::learned) nn::position_forward(x0.data(), P("pos.weight"), B, T, D);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      Layer& L = layers[l];
      const std::string p = Transformer<S>::layer_prefix(l);
      if (post)
        std::copy(L.x_in.begin(), L.x_in.end(), L.h1.begin());
      else
        norm_forward(L.h1, L.mean1, L.rstd1, L.x_in, p + "norm1");
      attention_forward(L, p);
      nn::linear_forward(tmp.data(), L.att.data(), P(p + "attn.wo"), static_cast<const S*>(nullptr), N, HD, D);
      nn::residual_forward(L.x_mid.data(), L.x_in.data(), tmp.data(), N * D);
      if (post) norm_forward(L.y1, L.mean1, L.rstd1, L.x_mid, p + "norm1");
      Buf<S>& x_next = l + 1 < c.n_layers ? layers[l + 1].x_in : x_final;
      if (c.mlp != MlpKind::none)
        mlp_forward(L, p, x_next);
      else
        x_next = post ? L.y1 : L.x_mid;
    }
    if (post)
      hf = x_final;
    else
      norm_forward(hf, meanf, rstdf, x_final, "norm_f");

    // The head over the rows that need it.
    have_labels = labels != nullptr;
    rows.clear(), row_labels.clear();
    for (int64_t n = 0; n < N; ++n)
      if (!labels || labels[n] != -100) rows.push_back(n), row_labels.push_back(labels ? labels[n] : 0);
    const int64_t M = static_cast<int64_t>(rows.size());
    all_rows = M == N;
    const S* head_in = hf.data();
    if (!all_rows) {
      hf_rows.resize(M * D);
      for (int64_t m = 0; m < M; ++m) std::copy_n(hf.data() + rows[m] * D, D, hf_rows.data() + m * D);
      head_in = hf_rows.data();
    }
    logits.resize(M * V);
    nn::linear_forward(logits.data(), head_in, head_weight(), static_cast<const S*>(nullptr), M, D, V);
    nn::LossSum loss;
    if (have_labels && M > 0) {
      losses.resize(M);
      loss = nn::crossentropy_forward(losses.data(), static_cast<S*>(nullptr), logits.data(), row_labels.data(), M, V);
    }
    return loss;
  }

  void backward(S scale_loss, S* grads) {
    if (!have_labels) fail("model: backward needs a forward with labels");
    const int64_t M = static_cast<int64_t>(rows.size());
    dlogits.assign(M * V, S(0));
    if (M > 0)
      nn::crossentropy_backward(dlogits.data(), static_cast<const S*>(nullptr), logits.data(), row_labels.data(), M, V,
                                static_cast<double>(scale_loss));
    S* dhead = G(grads, c.tied_embeddings ? "embed.weight" : "head.weight");
    zero(dh);
    if (all_rows) {
      nn::linear_backward(dh.data(), dhead, static_cast<S*>(nullptr), dlogits.data(), hf.data(), head_weight(), M, D, V);
    } else {
      dhf_rows.assign(M * D, S(0));
      nn::linear_backward(dhf_rows.data(), dhead, static_cast<S*>(nullptr), dlogits.data(), hf_rows.data(),
                          head_weight(), M, D, V);
      for (int64_t m = 0; m < M; ++m) std::copy_n(dhf_rows.data() + m * D, D, dh.data() + rows[m] * D);
    }
    zero(dx);
    if (post)
      dx = dh;
    else
      norm_backward(dx, dh, x_final, meanf, rstdf, "norm_f", grads);
    for (int64_t l = c.n_layers - 1; l >= 0; --l) {
      Layer& L = layers[l];
      const std::string p = Transformer<S>::layer_prefix(l);
      if (c.mlp != MlpKind::none) mlp_backward(L, p, grads);
      attention_backward(L, p, grads);
    }
    nn::embedding_backward(G(grads, "embed.weight"), dx.data(), ids.data(), N, V, D);
    if (c.position == PositionKind::learned) nn::position_backward(G(grads, "pos.weight"), dx.data(), B, T, D);
  }
};

template <class S>
TransformerRunner<S>::TransformerRunner(const Transformer<S>& model, int64_t B, int64_t T)
    : impl_(std::make_unique<Impl>(model, B, T)) {}

template <class S>
TransformerRunner<S>::~TransformerRunner() = default;

template <class S>
int64_t TransformerRunner<S>::batch() const {
  return impl_->B;
}

template <class S>
int64_t TransformerRunner<S>::seq_len() const {
  return impl_->T;
}

template <class S>
nn::LossSum TransformerRunner<S>::forward(const int32_t* ids, const int32_t* labels) {
  return impl_->forward(ids, labels);
}

template <class S>
void TransformerRunner<S>::backward(S scale, S* grads) {
  impl_->backward(scale, grads);
}

template <class S>
const S* TransformerRunner<S>::logits() const {
  return impl_->logits.data();
}

template <class S>
const std::vector<int64_t>& TransformerRunner<S>::logit_rows() const {
  return impl_->rows;
}

template <class S>
void TransformerRunner<S>::argmax(int32_t* predictions) const {
  const Impl& m = *impl_;
  std::fill(predictions, predictions + m.N, -1);
  for (size_t r = 0; r < m.rows.size(); ++r) {
    const S* row = m.logits.data() + static_cast<int64_t>(r) * m.V;
    predictions[m.rows[r]] = static_cast<int32_t>(std::max_element(row, row + m.V) - row);
  }
}

// double (the float64 reference): every member but backward here; backward, which needs the double
// PaTH backward, in the tests' sb_grad_f64 (src/CMakeLists.txt), which compiles this file again with
// SB_RUNNER_F64_BACKWARD so that the command does not build what only the tests call.
#ifndef SB_RUNNER_F64_BACKWARD
template class TransformerRunner<float>;
template TransformerRunner<double>::TransformerRunner(const Transformer<double>&, int64_t, int64_t);
template TransformerRunner<double>::~TransformerRunner();
template int64_t TransformerRunner<double>::batch() const;
template int64_t TransformerRunner<double>::seq_len() const;
template nn::LossSum TransformerRunner<double>::forward(const int32_t*, const int32_t*);
template const double* TransformerRunner<double>::logits() const;
template const std::vector<int64_t>& TransformerRunner<double>::logit_rows() const;
template void TransformerRunner<double>::argmax(int32_t*) const;
#else
template void TransformerRunner<double>::backward(double, double*);
#endif

}  // namespace sb
