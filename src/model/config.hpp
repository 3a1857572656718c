// config.hpp: the model's typed configuration (attention kind per layer, widths, MLP, norm and its
// position, learned positions, initialisation, PaTH's w path, stick-breaking's remainder), shared by
// the CPU and GPU runners and by the training config (train/config.hpp reads it from YAML and
// validates it; docs/config.md documents every key).
#pragma once
#include <cstdint>
#include <vector>

namespace sb {

enum class Attention { path, rope, nope, fox, path_fox, sba };
enum class MlpKind { swiglu, gelu, none };
enum class NormKind { rmsnorm, layernorm };
enum class NormPosition { pre, post };  // pre: x += f(norm(x)); post: x = norm(x + f(x)), no final norm
enum class PositionKind { none, learned };  // learned: absolute position embeddings added to the tokens'
enum class InitScheme { normal, scaled };
enum class SbaRemainder { current, none };  // what the left-over stick of stick-breaking attention weights

// Names as written in YAML ("path", "path_fox", "swiglu", ...).
const char* to_string(Attention a);
const char* to_string(MlpKind m);
const char* to_string(NormKind n);
const char* to_string(NormPosition p);
const char* to_string(PositionKind p);
const char* to_string(InitScheme s);
const char* to_string(SbaRemainder r);

// Whether an attention kind has PaTH's Householder transports (w, beta) / FoX's forget gate.
constexpr bool uses_path(Attention a) { return a == Attention::path || a == Attention::path_fox; }
constexpr bool uses_gate(Attention a) { return a == Attention::fox || a == Attention::path_fox; }

struct InitConfig {
  InitScheme scheme = InitScheme::scaled;  // scaled: output projections get std/sqrt(2*n_layers)
  double std = 0.02;
  double gate_bias = 0.0;  // initial forget-gate bias b_f of fox / path_fox layers: f = sigmoid(b_f) at init
  bool operator==(const InitConfig&) const = default;
};

struct PathConfig {
  int64_t rank = 32;         // low rank r of the w projection (W1: d_model -> r, W2: r -> Dh)
  double beta_clamp = 0.0;   // 0 = off; else beta = min(beta, beta_clamp), in (0, 2]
  int64_t block = 32;        // block size of the blockwise (UT) algorithm
  bool conv_bias = false;    // bias in the causal depthwise conv (kernel 3) on u
  bool scale_gate = false;   // path_fox: the forget-gate term times 1/sqrt(Dh) (flash-linear-attention's)
  bool operator==(const PathConfig&) const = default;
};

struct SbaConfig {
  SbaRemainder remainder = SbaRemainder::current;  // current: out_i += r_i v_i (the authors' reference)
  bool operator==(const SbaConfig&) const = default;
};

struct ModelConfig {
  int64_t d_model = 64;                   // D
  int64_t n_layers = 1;
  int64_t n_heads = 2;                    // H
  int64_t head_dim = 0;                   // Dh; resolved to d_model / n_heads when omitted
  MlpKind mlp = MlpKind::swiglu;
  double mlp_ratio = 4.0;                 // MLP hidden width = mlp_hidden() = round(ratio * D)
  Attention attention = Attention::path;  // for every layer unless `layers` is given
  std::vector<Attention> layers;          // empty, or one entry per layer (hybrids)
  NormKind norm = NormKind::rmsnorm;
  NormPosition norm_position = NormPosition::pre;
  PositionKind position = PositionKind::none;
  int64_t max_len = 0;                    // learned positions: rows of pos.weight; 0 = the training length
  bool tied_embeddings = false;           // output head reuses the token embedding
  InitConfig init;
  double rope_theta = 10000.0;
  PathConfig path;
  SbaConfig sba;

  Attention layer_attention(int64_t layer) const;  // layers[layer] if given, else attention
  // Whether layers of kind a multiply their log forget gates by 1/sqrt(Dh) (path_fox with path.scale_gate).
  bool scales_gate(Attention a) const { return a == Attention::path_fox && path.scale_gate; }
  int64_t mlp_hidden() const;                      // round(mlp_ratio * d_model), >= 1
  bool operator==(const ModelConfig&) const = default;
};

// The model to build for training at sequence length train_length: with learned positions and
// max_len 0, max_len becomes train_length (the config keeps 0, so its fingerprint does not depend
// on the task's length twice); otherwise the config unchanged.
ModelConfig resolve_max_len(const ModelConfig& m, int64_t train_length);

}  // namespace sb
