// checkpoint.cpp: binary checkpoint writer and validating reader (see checkpoint.hpp).
#include "train/checkpoint.hpp"

#include <bit>
#include <cstring>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "statebench/rng.hpp"

namespace sb {

static_assert(std::endian::native == std::endian::little, "checkpoints assume a little-endian host");

namespace {

constexpr char kMagic[8] = {'S', 'B', 'C', 'K', 'P', 'T', '\r', '\n'};

// FNV-style hash over 8-byte words (then the tail bytes), finalised with mix64.
uint64_t checksum64(const char* data, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 0x100000001B3ull;
  }
  for (; i < n; ++i) h = (h ^ static_cast<uint8_t>(data[i])) * 0x100000001B3ull;
  return mix64(h ^ n);
}

template <class T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Bounds-checked reader over the file bytes.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <class T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  const char* take(uint64_t n, const char* what) {
    if (n > bytes_.size() - pos_)
      fail("checkpoint '{}': truncated (file ends inside {}; {} bytes)", path_, what, bytes_.size());
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

struct Parsed {
  CheckpointInfo info;
  size_t tensors_at = 0;  // byte offset of params[0]
};

Parsed parse(const std::string& bytes, const std::string& path) {
  Parsed out;
  CheckpointInfo& info = out.info;
  Reader r(bytes, path);
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    fail("checkpoint '{}': not a statebench checkpoint (bad magic)", path);
  r.take(sizeof(kMagic), "the magic");
  info.version = r.get<uint32_t>("the header");
  if (info.version != kCheckpointVersion)
    fail("checkpoint '{}': unsupported format version {} (this build reads version {})", path, info.version,
         kCheckpointVersion);
  info.scalar_bytes = r.get<uint32_t>("the header");
  if (info.scalar_bytes != 4 && info.scalar_bytes != 8)
    fail("checkpoint '{}': corrupted header (scalar size {})", path, info.scalar_bytes);
  info.fingerprint = r.get<uint64_t>("the header");
  info.layout_hash = r.get<uint64_t>("the header");
  info.state.step = r.get<int64_t>("the header");
  info.optimizer_steps = r.get<int64_t>("the header");
  const uint64_t n_stream = r.get<uint64_t>("the header");
  if (n_stream > (bytes.size() - r.pos()) / 8) fail("checkpoint '{}': truncated or corrupted (stream state of {} words)", path, n_stream);
  info.state.stream.resize(n_stream);
  if (n_stream) std::memcpy(info.state.stream.data(), r.take(n_stream * 8, "the stream state"), n_stream * 8);
  const uint64_t n_yaml = r.get<uint64_t>("the config length");
  if (n_yaml > bytes.size() - r.pos()) fail("checkpoint '{}': truncated or corrupted (config of {} bytes)", path, n_yaml);
  info.config_yaml.assign(r.take(n_yaml, "the config"), n_yaml);
  r.take((8 - n_yaml % 8) % 8, "the config");
  const uint64_t n = r.get<uint64_t>("the tensor size");
  const uint64_t tensor_bytes = n * info.scalar_bytes;
  if (n > (uint64_t{1} << 40) || 3 * tensor_bytes + 8 != bytes.size() - r.pos())
    fail("checkpoint '{}': {} (file has {} bytes, header says {} elements of {} bytes x 3 + checksum after byte {})", path,
         3 * tensor_bytes + 8 > bytes.size() - r.pos() ? "truncated" : "corrupted (size mismatch)", bytes.size(), n,
         info.scalar_bytes, r.pos());
  info.num_elements = static_cast<int64_t>(n);
  out.tensors_at = r.pos();
  const size_t body = bytes.size() - 8;
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, 8);
  if (stored != checksum64(bytes.data(), body)) fail("checkpoint '{}': corrupted (checksum mismatch)", path);
  if (info.state.step < 0 || info.optimizer_steps < 0) fail("checkpoint '{}': corrupted (negative step)", path);
  return out;
}

}  // namespace

template <class S>
void save_checkpoint(const std::string& path, const TrainConfig& config, const TrainState& state,
                     const ParamStore<S>& params, const AdamW<S>& optimizer) {
  if (!params.finalized()) fail("checkpoint '{}': parameter store is not finalized", path);
  if (optimizer.size() != params.size() || optimizer.layout_hash() != params.layout_hash())
    fail("checkpoint '{}': optimiser state does not match the parameter layout", path);
  const std::string yaml = to_yaml(config);
  const size_t n = static_cast<size_t>(params.size());
  std::string out;
  out.reserve(128 + state.stream.size() * 8 + yaml.size() + 3 * n * sizeof(S));
  out.append(kMagic, sizeof(kMagic));
  put(out, kCheckpointVersion);
  put(out, static_cast<uint32_t>(sizeof(S)));
  put(out, config_fingerprint(config));
  put(out, params.layout_hash());
  put(out, state.step);
  put(out, optimizer.steps_taken());
  put(out, static_cast<uint64_t>(state.stream.size()));
  out.append(reinterpret_cast<const char*>(state.stream.data()), state.stream.size() * 8);
  put(out, static_cast<uint64_t>(yaml.size()));
  out += yaml;
  out.append((8 - yaml.size() % 8) % 8, '\0');
  put(out, static_cast<uint64_t>(n));
  out.append(reinterpret_cast<const char*>(params.params()), n * sizeof(S));
  out.append(reinterpret_cast<const char*>(optimizer.m()), n * sizeof(S));
  out.append(reinterpret_cast<const char*>(optimizer.v()), n * sizeof(S));
  put(out, checksum64(out.data(), out.size()));
  write_file_atomic(path, out);
}

CheckpointInfo read_checkpoint_info(const std::string& path) { return parse(read_file(path), path).info; }

template <class S>
TrainState load_checkpoint(const std::string& path, const TrainConfig& config, ParamStore<S>& params,
                           AdamW<S>* optimizer) {
  const std::string bytes = read_file(path);
  const Parsed parsed = parse(bytes, path);
  const CheckpointInfo& info = parsed.info;
  if (!params.finalized()) fail("checkpoint '{}': parameter store is not finalized", path);
  if (info.scalar_bytes != sizeof(S))
    fail("checkpoint '{}': holds float{} values but the model uses float{}", path, info.scalar_bytes * 8, sizeof(S) * 8);
  const uint64_t expected = config_fingerprint(config);
  if (info.fingerprint != expected)
    fail("checkpoint '{}': written for a different configuration (fingerprint {:016x}, this config {:016x})", path,
         info.fingerprint, expected);
  if (info.layout_hash != params.layout_hash() || info.num_elements != params.size())
    fail("checkpoint '{}': parameter layout differs from the model ({} elements stored, model has {})", path,
         info.num_elements, params.size());
  if (optimizer && (optimizer->size() != params.size() || optimizer->layout_hash() != params.layout_hash()))
    fail("checkpoint '{}': optimiser does not match the parameter layout", path);
  const size_t n = static_cast<size_t>(info.num_elements);
  const char* src = bytes.data() + parsed.tensors_at;
  std::memcpy(params.params(), src, n * sizeof(S));
  if (optimizer) {
    std::memcpy(optimizer->m(), src + n * sizeof(S), n * sizeof(S));
    std::memcpy(optimizer->v(), src + 2 * n * sizeof(S), n * sizeof(S));
    optimizer->set_steps_taken(info.optimizer_steps);
  }
  return info.state;
}

template void save_checkpoint(const std::string&, const TrainConfig&, const TrainState&, const ParamStore<float>&,
                              const AdamW<float>&);
template void save_checkpoint(const std::string&, const TrainConfig&, const TrainState&, const ParamStore<double>&,
                              const AdamW<double>&);
template TrainState load_checkpoint(const std::string&, const TrainConfig&, ParamStore<float>&, AdamW<float>*);
template TrainState load_checkpoint(const std::string&, const TrainConfig&, ParamStore<double>&, AdamW<double>*);

}  // namespace sb
