// config.cpp: the model configuration's enum names and derived sizes (model/config.hpp).
#include "model/config.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace sb {

const char* to_string(Attention a) {
  switch (a) {
    case Attention::path: return "path";
    case Attention::rope: return "rope";
    case Attention::nope: return "nope";
    case Attention::fox: return "fox";
    case Attention::path_fox: return "path_fox";
    case Attention::sba: return "sba";
  }
  return "?";
}
const char* to_string(MlpKind m) {
  switch (m) {
    case MlpKind::swiglu: return "swiglu";
    case MlpKind::gelu: return "gelu";
    case MlpKind::none: return "none";
  }
  return "?";
}
const char* to_string(NormKind n) { return n == NormKind::rmsnorm ? "rmsnorm" : "layernorm"; }
const char* to_string(NormPosition p) { return p == NormPosition::pre ? "pre" : "post"; }
const char* to_string(PositionKind p) { return p == PositionKind::none ? "none" : "learned"; }
const char* to_string(InitScheme s) { return s == InitScheme::normal ? "normal" : "scaled"; }
const char* to_string(SbaRemainder r) { return r == SbaRemainder::current ? "current" : "none"; }

Attention ModelConfig::layer_attention(int64_t layer) const {
  if (layer < 0 || layer >= n_layers) fail("layer {} out of range (model has {} layers)", layer, n_layers);
  return layers.empty() ? attention : layers[static_cast<size_t>(layer)];
}

ModelConfig resolve_max_len(const ModelConfig& m, int64_t train_length) {
  ModelConfig r = m;
  if (r.position == PositionKind::learned && r.max_len == 0) r.max_len = train_length;
  return r;
}

int64_t ModelConfig::mlp_hidden() const { return std::max<int64_t>(1, std::llround(mlp_ratio * static_cast<double>(d_model))); }

}  // namespace sb
