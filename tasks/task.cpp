// task.cpp: split lookup, the seeded example stream and the train/eval partition.
#include "tasks/task.hpp"

#include "core/error.hpp"

namespace sb {

namespace {
constexpr uint32_t kMaxAttempts = 4096;
}

std::vector<SplitSpec> Task::splits() const {
  return {{"train", false, "training stream"},
          {"val", true, "held-out validation stream"},
          {"test", true, "held-out test stream"}};
}

const Task::SplitCache& Task::split_cache() const {
  std::call_once(split_once_, [this] {
    split_cache_.specs = splits();
    const std::string task = name();
    for (const auto& spec : split_cache_.specs) split_cache_.stream_hash.push_back(hash_str(spec.name, hash_str(task)));
  });
  return split_cache_;
}

int Task::split_index(const std::string& split) const {
  const auto& all = split_cache().specs;
  std::string names;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == split) return static_cast<int>(i);
    names += (i ? ", " : "") + all[i].name;
  }
  fail("unknown split '{}' for task '{}' (known: {})", split, name(), names);
}

bool in_eval_partition(const int32_t* input_ids, int64_t T) {
  uint64_t h = 0x51A7EB3Cull;
  for (int64_t t = 0; t < T; ++t) h = (h ^ static_cast<uint32_t>(input_ids[t])) * 0x100000001B3ull;
  return (mix64(h ^ static_cast<uint64_t>(T)) & 3u) == 0;
}

void Task::draw(int split, uint64_t key, uint64_t index, uint32_t attempt, ExampleView out) const {
  Rng rng(key, index, attempt);
  sample(split, rng, out);
}

void Task::example(int split, uint64_t seed, uint64_t index, ExampleView out) const {
  const SplitCache& cache = split_cache();
  if (split < 0 || split >= static_cast<int>(cache.specs.size()))
    fail("split index {} out of range for task '{}'", split, name());
  const SplitSpec& spec = cache.specs[split];
  const uint64_t key = mix64(mix64(seed) ^ cache.stream_hash[split]);  // == stream_key(seed, name(), spec.name)
  const int64_t T = seq_len();
  for (uint32_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    draw(split, key, index, attempt, out);
    if (in_eval_partition(out.input_ids, T) == spec.eval) return;
  }
  fail("task '{}': no example for split '{}' outside the other splits' partition after {} draws; "
       "the task has too few distinct sequences (make it longer)", name(), spec.name, kMaxAttempts);
}

void Task::example(const std::string& split, uint64_t seed, uint64_t index, ExampleView out) const {
  example(split_index(split), seed, index, out);
}

Example Task::example(const std::string& split, uint64_t seed, uint64_t index) const {
  const auto T = static_cast<size_t>(seq_len());
  Example ex{std::vector<int32_t>(T), std::vector<int32_t>(T), std::vector<uint8_t>(T)};
  example(split, seed, index, ex.view());
  return ex;
}

void fill_examples(const Task& task, int split, uint64_t seed, uint64_t first_index, int64_t count,
                   int32_t* input_ids, int32_t* labels, uint8_t* score_mask) {
  const int64_t T = task.seq_len();
  for (int64_t i = 0; i < count; ++i)
    task.example(split, seed, first_index + static_cast<uint64_t>(i),
                 {input_ids + i * T, labels + i * T, score_mask + i * T});
}

}  // namespace sb
