// transformer.cpp: the model's parameter views (names, shapes, weight-decay flags) and their
// deterministic initialisation. The computation lives in runner.cpp.
#include "model/transformer.hpp"

#include <cmath>

#include "core/error.hpp"
#include "statebench/rng.hpp"

namespace sb {

template <class S>
Transformer<S>::Transformer(const ModelConfig& config, int64_t vocab_size) : config_(config), V_(vocab_size) {
  const ModelConfig& c = config_;
  if (V_ < 1) fail("model: vocabulary size {} must be >= 1", V_);
  if (c.head_dim < 1) fail("model.head_dim: unresolved (call resolve_and_validate on the config)");
  const int64_t D = c.d_model, H = c.n_heads, HD = c.n_heads * c.head_dim, F = c.mlp_hidden();
  const bool layernorm = c.norm == NormKind::layernorm;
  auto add_norm = [&](const std::string& name) {
    params_.add(name + ".weight", {D}, false);
    if (layernorm) params_.add(name + ".bias", {D}, false);
  };
  params_.add("embed.weight", {V_, D}, true);
  if (c.position == PositionKind::learned) {
    if (c.max_len < 1) fail("model.max_len: learned positions need a length (build the model from resolve_max_len())");
    params_.add("pos.weight", {c.max_len, D}, true);
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = layer_prefix(l);
    const Attention kind = c.layer_attention(l);
    add_norm(p + "norm1");
    params_.add(p + "attn.wq", {HD, D}, true);
    params_.add(p + "attn.wk", {HD, D}, true);
    params_.add(p + "attn.wv", {HD, D}, true);
    params_.add(p + "attn.wo", {D, HD}, true);
    if (uses_gate(kind)) {
      params_.add(p + "attn.wf", {H, D}, true);
      params_.add(p + "attn.bf", {H}, false);
    }
    if (uses_path(kind)) {
      params_.add(p + "attn.w1", {c.path.rank, D}, true);
      params_.add(p + "attn.w2", {HD, c.path.rank}, true);
      params_.add(p + "attn.conv", {HD, 3}, false);
      if (c.path.conv_bias) params_.add(p + "attn.conv_bias", {HD}, false);
      params_.add(p + "attn.wbeta", {H, D}, true);
      params_.add(p + "attn.bbeta", {H}, false);
    }
    if (c.mlp != MlpKind::none) {
      add_norm(p + "norm2");
      if (c.mlp == MlpKind::swiglu) {
        params_.add(p + "mlp.w_gate_up", {2 * F, D}, true);  // rows [0, F) gate, [F, 2F) up
        params_.add(p + "mlp.w_down", {D, F}, true);
      } else {
        params_.add(p + "mlp.w_in", {F, D}, true);
        params_.add(p + "mlp.w_out", {D, F}, true);
      }
    }
  }
  if (c.norm_position == NormPosition::pre) add_norm("norm_f");  // post-norm blocks end normalised
  if (!c.tied_embeddings) params_.add("head.weight", {V_, D}, true);
  params_.finalize();
}

template <class S>
void Transformer<S>::init_params(uint64_t seed) {
  const ModelConfig& c = config_;
  const double std = c.init.std;
  const double out_std = c.init.scheme == InitScheme::scaled ? std / std::sqrt(2.0 * static_cast<double>(c.n_layers)) : std;
  for (int idx = 0; idx < static_cast<int>(params_.views().size()); ++idx) {
    const ParamView& view = params_.view(idx);
    S* p = params_.param(idx);
    // One independent stream per tensor, keyed by its name: adding a tensor never shifts others.
    Rng rng(stream_key(seed, "init", view.name), 0);
    auto ends_with = [&](const char* suffix) {
      const std::string s(suffix);
      return view.name.size() >= s.size() && view.name.compare(view.name.size() - s.size(), s.size(), s) == 0;
    };
    auto normal = [&](double sd) {
      for (int64_t i = 0; i < view.numel; i += 2) {  // Box-Muller, two values per draw pair
        const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
        const double r = std::sqrt(-2.0 * std::log(u1));
        p[i] = static_cast<S>(sd * r * std::cos(2 * M_PI * u2));
        if (i + 1 < view.numel) p[i + 1] = static_cast<S>(sd * r * std::sin(2 * M_PI * u2));
      }
    };
    if (ends_with(".weight") && view.shape.size() == 1) {  // norm gains
      for (int64_t i = 0; i < view.numel; ++i) p[i] = S(1);
    } else if (ends_with("attn.bf")) {  // forget-gate bias: f = sigmoid(gate_bias) (0: f = 0.5)
      for (int64_t i = 0; i < view.numel; ++i) p[i] = static_cast<S>(c.init.gate_bias);
    } else if (view.shape.size() == 1) {  // biases: norm bias, PaTH beta bias (beta = 1), conv bias
      for (int64_t i = 0; i < view.numel; ++i) p[i] = S(0);
    } else if (ends_with("attn.conv")) {  // PyTorch Conv1d default for a depthwise kernel of 3
      const double bound = 1.0 / std::sqrt(3.0);
      for (int64_t i = 0; i < view.numel; ++i) p[i] = static_cast<S>(bound * (2 * rng.uniform() - 1));
    } else if (ends_with("attn.wo") || ends_with("mlp.w_down") || ends_with("mlp.w_out")) {
      normal(out_std);
    } else {
      normal(std);
    }
  }
}

template class Transformer<float>;
template class Transformer<double>;

}  // namespace sb
