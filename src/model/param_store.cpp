// param_store.cpp: flat parameter/gradient buffers with named views (see param_store.hpp).
#include "model/param_store.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "statebench/rng.hpp"

namespace sb {

bool default_decay(const std::vector<int64_t>& shape) { return shape.size() >= 2; }

template <class S>
int ParamStore<S>::add(const std::string& name, std::vector<int64_t> shape, bool decay) {
  if (finalized_) fail("parameter '{}' added after the parameter store was finalized", name);
  if (name.empty()) fail("parameter with an empty name");
  if (index_.count(name)) fail("parameter '{}' added twice", name);
  if (shape.empty()) fail("parameter '{}': empty shape", name);
  int64_t numel = 1;
  for (const int64_t d : shape) {
    if (d < 1) fail("parameter '{}': dimension {} must be >= 1", name, d);
    if (numel > std::numeric_limits<int64_t>::max() / d) fail("parameter '{}': too many elements", name);
    numel *= d;
  }
  const int64_t offset = (size_ + kAlign - 1) / kAlign * kAlign;
  views_.push_back({name, offset, std::move(shape), numel, decay});
  index_[name] = static_cast<int>(views_.size() - 1);
  size_ = offset + numel;
  return static_cast<int>(views_.size() - 1);
}

template <class S>
void ParamStore<S>::finalize() {
  if (finalized_) fail("parameter store finalized twice");
  if (views_.empty()) fail("parameter store finalized with no parameters");
  params_.assign(static_cast<size_t>(size_), S(0));
  grads_.assign(static_cast<size_t>(size_), S(0));
  finalized_ = true;
}

template <class S>
const ParamView& ParamStore<S>::view(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail("unknown parameter '{}'", name);
  return views_[static_cast<size_t>(it->second)];
}

template <class S>
S* ParamStore<S>::param(const std::string& name) {
  const ParamView& v = view(name);
  if (!finalized_) fail("parameter '{}' accessed before the parameter store was finalized", name);
  return params_.data() + v.offset;
}

template <class S>
const S* ParamStore<S>::param(const std::string& name) const {
  return const_cast<ParamStore*>(this)->param(name);
}

template <class S>
S* ParamStore<S>::grad(const std::string& name) {
  const ParamView& v = view(name);
  if (!finalized_) fail("gradient of '{}' accessed before the parameter store was finalized", name);
  return grads_.data() + v.offset;
}

template <class S>
const S* ParamStore<S>::grad(const std::string& name) const {
  return const_cast<ParamStore*>(this)->grad(name);
}

template <class S>
S* ParamStore<S>::param(int index) {
  const ParamView& v = views_.at(static_cast<size_t>(index));
  if (!finalized_) fail("parameter '{}' accessed before the parameter store was finalized", v.name);
  return params_.data() + v.offset;
}

template <class S>
S* ParamStore<S>::grad(int index) {
  const ParamView& v = views_.at(static_cast<size_t>(index));
  if (!finalized_) fail("gradient of '{}' accessed before the parameter store was finalized", v.name);
  return grads_.data() + v.offset;
}

template <class S>
int64_t ParamStore<S>::num_params() const {
  int64_t n = 0;
  for (const auto& v : views_) n += v.numel;
  return n;
}

template <class S>
void ParamStore<S>::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), S(0));
}

template <class S>
uint64_t ParamStore<S>::layout_hash() const {
  uint64_t h = hash_str("statebench-param-layout");
  auto mix_in = [&h](uint64_t x) { h = mix64(h ^ x); };
  for (const auto& v : views_) {
    h = hash_str(v.name, h);
    mix_in(static_cast<uint64_t>(v.offset));
    mix_in(v.shape.size());
    for (const int64_t d : v.shape) mix_in(static_cast<uint64_t>(d));
    mix_in(v.decay ? 1 : 2);
  }
  mix_in(static_cast<uint64_t>(size_));
  return h;
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace sb
