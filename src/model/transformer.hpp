// transformer.hpp: the decoder-only transformer (PaTH, RoPE, NoPE, FoX, PaTH-FoX, stick-breaking
// attention; SwiGLU / GELU MLP; RMSNorm / LayerNorm, pre- or post-norm; optional learned absolute
// positions; tied or untied head) on the CPU.
// Transformer owns the parameters (one flat ParamStore with named views); a TransformerRunner
// owns the activations for one (B, T) shape and runs forward / backward over them. Training is
// data-parallel: one runner per thread, each with a private gradient buffer summed by the trainer.
//
// x = embed[ids] (+ pos[t] with learned positions). Per layer l (x [B, T, D] the residual stream):
//   h = norm1(x) (post-norm: h = x); q, k, v = h Wq^T, h Wk^T, h Wv^T   [B, T, H, Dh]
//   rope: q, k rotated; fox / path_fox: log_f = logsigmoid(h Wf^T + bf)  [B, T, H]
//   path / path_fox: u = (h W1^T) W2^T, w = l2norm(silu(conv3(u))), beta = 2 sigmoid(h Wb^T + bb)
//   pre-norm:  x += attention(q, k, v, ...) Wo^T;  x += mlp(norm2(x))
//   post-norm: x = norm1(x + attention(...) Wo^T);  x = norm2(x + mlp(x))
// logits = norm_f(x) Wout^T (post-norm: x Wout^T, no final norm; Wout = the embedding when tied).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/param_store.hpp"
#include "nn/ops_loss.hpp"
#include "model/config.hpp"

namespace sb {

template <class S>
class Transformer {
 public:
  Transformer(const ModelConfig& config, int64_t vocab_size);  // declares every parameter view
  const ModelConfig& config() const { return config_; }
  int64_t vocab_size() const { return V_; }
  ParamStore<S>& params() { return params_; }
  const ParamStore<S>& params() const { return params_; }
  // Deterministic initialisation from `seed` (config.init: normal std, or scaled output projections).
  void init_params(uint64_t seed);
  // Parameter names of layer l, e.g. layer_prefix(0) = "layers.0.".
  static std::string layer_prefix(int64_t l) { return "layers." + std::to_string(l) + "."; }

 private:
  ModelConfig config_;
  int64_t V_;
  ParamStore<S> params_;
};

template <class S>
class TransformerRunner {
 public:
  // Preallocates every activation for batches of B sequences of length T.
  TransformerRunner(const Transformer<S>& model, int64_t B, int64_t T);
  ~TransformerRunner();
  int64_t batch() const;
  int64_t seq_len() const;

  // ids [B, T]; labels [B, T] (-100 = no loss) or nullptr. Returns the loss sum and count.
  nn::LossSum forward(const int32_t* ids, const int32_t* labels);
  // Backward of `scale` * (the loss sum of the last forward) into grads [model.params().size()]
  // (the ParamStore's flat layout), accumulating. Needs a forward with labels first.
  void backward(S scale, S* grads);
  // Logits of the last forward: [M, V] for the M rows logit_rows() lists (the labelled rows when
  // labels were given, else all B*T rows in order).
  const S* logits() const;
  const std::vector<int64_t>& logit_rows() const;
  // [B, T]: argmax over V at each row of logit_rows(), -1 elsewhere (ties: the first index).
  void argmax(int32_t* predictions) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

extern template class Transformer<float>;
extern template class Transformer<double>;
extern template class TransformerRunner<float>;
extern template class TransformerRunner<double>;

}  // namespace sb
