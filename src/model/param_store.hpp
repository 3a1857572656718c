// param_store.hpp: every trainable parameter of a model in one flat buffer (llm.c style), with a
// second flat buffer of gradients laid out identically, and named views (offset, shape, decay
// flag) into both. Optimisers, gradient clipping and checkpoints are plain loops over the buffers.
// Build phase: add() each tensor, then finalize() allocates (params and grads zeroed).
#pragma once
#include "core/aligned_vector.hpp"
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace sb {

// One named tensor inside the flat buffers. Row-major; shape {rows, cols} for matrices.
struct ParamView {
  std::string name;            // e.g. "layers.0.attn.wq"
  int64_t offset = 0;          // first element in params() / grads()
  std::vector<int64_t> shape;  // every entry >= 1
  int64_t numel = 0;           // product of shape
  bool decay = false;          // AdamW applies weight decay to this tensor
};

// Weight-decay convention (nanoGPT): decay every tensor of rank >= 2 (projection matrices AND
// embeddings), no decay for rank-1 tensors (norm gains, biases, per-channel gates).
// default_decay(shape) returns that rule; add() takes the flag explicitly so models may deviate.
bool default_decay(const std::vector<int64_t>& shape);

template <class S>  // S = float or double
class ParamStore {
 public:
  // View offsets are rounded up to a multiple of kAlign elements, so every tensor starts on a
  // 64-byte boundary for float (128 for double). Padding elements stay zero in params, grads and
  // optimiser state and are harmless in every loop over the flat buffers.
  static constexpr int64_t kAlign = 16;

  // Build phase. Returns the view index. Throws sb::Error on a duplicate/empty name, an empty or
  // non-positive shape, or a call after finalize().
  int add(const std::string& name, std::vector<int64_t> shape, bool decay);
  int add(const std::string& name, std::vector<int64_t> shape) { return add(name, shape, default_decay(shape)); }
  // Allocates params and grads (both zero). Throws if called twice or with no views.
  void finalize();
  bool finalized() const { return finalized_; }

  // Lookup. Throws sb::Error naming the parameter if unknown (or if not finalized, for pointers).
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const ParamView& view(const std::string& name) const;
  const ParamView& view(int index) const { return views_.at(static_cast<size_t>(index)); }
  const std::vector<ParamView>& views() const { return views_; }  // in add() order
  S* param(const std::string& name);  // [view(name).numel]
  const S* param(const std::string& name) const;
  S* grad(const std::string& name);   // [view(name).numel]
  const S* grad(const std::string& name) const;
  S* param(int index);
  S* grad(int index);

  // Flat buffers, size() elements each (including alignment padding).
  int64_t size() const { return size_; }
  int64_t num_params() const;  // sum of numel over views (excludes padding)
  S* params() { return params_.data(); }
  const S* params() const { return params_.data(); }
  S* grads() { return grads_.data(); }
  const S* grads() const { return grads_.data(); }

  void zero_grad();
  // Stable hash of names, shapes, offsets and decay flags: equal layouts <=> equal hashes
  // (used by checkpoints to refuse loading into a different model).
  uint64_t layout_hash() const;

 private:
  std::vector<ParamView> views_;
  std::unordered_map<std::string, int> index_;
  int64_t size_ = 0;
  bool finalized_ = false;
  AlignedVector<S> params_, grads_;
};

extern template class ParamStore<float>;
extern template class ParamStore<double>;

}  // namespace sb
