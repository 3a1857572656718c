// task.hpp: the one interface every task generator implements (built-in or plugin).
// A task has a fixed sequence length T, a vocabulary of named tokens (inputs and labels index the
// same vocabulary), named splits, and a deterministic example(split, seed, index). Train and
// evaluation splits are disjoint by construction: see example() in task.cpp.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "statebench/rng.hpp"

namespace sb {

inline constexpr int32_t kIgnoreLabel = -100;  // label value meaning "no loss here"

struct SplitSpec {
  std::string name;
  bool eval = true;  // evaluation splits are disjoint from every training split
  std::string help;
};

// One example's storage, T entries each (T = Task::seq_len()).
struct ExampleView {
  int32_t* input_ids;    // [T] token ids in [0, V)
  int32_t* labels;       // [T] target ids in [0, V) or kIgnoreLabel
  uint8_t* score_mask;   // [T] 1 where accuracy is reported (always a labelled position)
};

struct Example {
  std::vector<int32_t> input_ids, labels;
  std::vector<uint8_t> score_mask;
  ExampleView view() { return {input_ids.data(), labels.data(), score_mask.data()}; }
};

class Task {
 public:
  virtual ~Task() = default;

  virtual std::string name() const = 0;
  virtual int64_t seq_len() const = 0;                 // T
  virtual std::vector<std::string> vocab() const = 0;  // V token names; ids index this
  virtual std::vector<SplitSpec> splits() const;       // default: train, val, test
  virtual std::string details() const { return {}; }   // extra text for `statebench tasks show`

  int64_t vocab_size() const { return static_cast<int64_t>(vocab().size()); }
  int split_index(const std::string& split) const;     // throws sb::Error for an unknown split

  // Example `index` of `split` under `seed`: a pure function of (task parameters, seed, split,
  // index), the same bytes on every run, thread and machine.
  void example(int split, uint64_t seed, uint64_t index, ExampleView out) const;
  void example(const std::string& split, uint64_t seed, uint64_t index, ExampleView out) const;
  Example example(const std::string& split, uint64_t seed, uint64_t index) const;

  // Draws one candidate example from rng. Built-in tasks implement this.
  virtual void sample(int split, Rng& rng, ExampleView out) const = 0;
  // Draws candidate `attempt` of example `index` of the stream `key`. The default builds
  // Rng(key, index, attempt) and calls sample(); plugins override it to cross their C ABI.
  virtual void draw(int split, uint64_t key, uint64_t index, uint32_t attempt, ExampleView out) const;

 private:
  // name() and splits() computed once (they may allocate or format): the per-example path reads
  // only this cache. Filled on first use, thread-safe.
  struct SplitCache {
    std::vector<SplitSpec> specs;
    std::vector<uint64_t> stream_hash;  // hash of (task name, split name) per split
  };
  const SplitCache& split_cache() const;
  mutable std::once_flag split_once_;
  mutable SplitCache split_cache_;
};

// True when this input sequence belongs to the evaluation partition (about 1/4 of all
// sequences, chosen by a fixed hash of the token ids). Training splits only keep sequences
// outside it, evaluation splits only sequences inside it, so they never share an example.
bool in_eval_partition(const int32_t* input_ids, int64_t T);

// Fills `count` consecutive examples (first_index, first_index+1, ...) into row-major [count, T]
// buffers: the batch path used by training and by `generate`.
void fill_examples(const Task& task, int split, uint64_t seed, uint64_t first_index, int64_t count,
                   int32_t* input_ids, int32_t* labels, uint8_t* score_mask);

}  // namespace sb
