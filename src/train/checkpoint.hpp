// checkpoint.hpp: training checkpoints. One binary file (little-endian), written atomically via
// sb::AtomicFile, holding the parameters, AdamW state, step, data-stream state and the effective
// config; loading validates everything and throws sb::Error naming the file, never crashes.
//
// Layout (version 1), all integers little-endian:
//   char[8]  magic "SBCKPT\r\n"        u32 version (1)          u32 scalar bytes (4 float, 8 double)
//   u64 config fingerprint             u64 parameter layout hash
//   i64 step (training steps done)     i64 AdamW t
//   u64 n_stream, u64[n_stream]        data-stream position / RNG state, owned by the trainer
//   u64 n_yaml, char[n_yaml], zero padding to 8 bytes    the effective config (to_yaml)
//   u64 n (ParamStore::size())         S params[n], S m[n], S v[n]
//   u64 checksum of all preceding bytes
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/param_store.hpp"
#include "train/config.hpp"
#include "train/optimizer.hpp"

namespace sb {

inline constexpr uint32_t kCheckpointVersion = 1;

// What the training loop owns besides parameters and optimiser: completed steps and the
// data-stream position / RNG words (opaque here; stored and returned verbatim).
struct TrainState {
  int64_t step = 0;
  std::vector<uint64_t> stream;
  bool operator==(const TrainState&) const = default;
};

// Everything in a checkpoint except the tensors (e.g. to rebuild the model for evaluation:
// parse_config(info.config_yaml) then load_checkpoint with that config).
struct CheckpointInfo {
  uint32_t version = 0;
  uint32_t scalar_bytes = 0;
  uint64_t fingerprint = 0;   // config_fingerprint() of the config it was written with
  uint64_t layout_hash = 0;   // ParamStore::layout_hash()
  TrainState state;
  int64_t optimizer_steps = 0;
  std::string config_yaml;
  int64_t num_elements = 0;   // ParamStore::size()
};

// Writes path atomically (the old file stays intact if anything fails).
template <class S>
void save_checkpoint(const std::string& path, const TrainConfig& config, const TrainState& state,
                     const ParamStore<S>& params, const AdamW<S>& optimizer);

// Reads and fully validates a checkpoint (magic, version, sizes, checksum); no tensors returned.
CheckpointInfo read_checkpoint_info(const std::string& path);

// Loads into a finalized `params` (and `optimizer`, unless null: parameters only, for
// evaluation). Throws sb::Error naming the file on a bad magic, unsupported version, truncated
// or corrupted file, a scalar-type, layout or size mismatch, or a config fingerprint mismatch.
// On error nothing has been modified. Returns the stored training state.
template <class S>
TrainState load_checkpoint(const std::string& path, const TrainConfig& config, ParamStore<S>& params,
                           AdamW<S>* optimizer);

}  // namespace sb
