// batch_prefetch.hpp: the training batch (token ids, labels, score mask) and BatchPrefetcher, which
// fills the batches of consecutive steps on background threads, a bounded number ahead of the
// consumer, so that the host generates batch s+1 while a device runs step s. Batches stay a pure
// function of the step: prefetched, synchronous and resumed runs see the same bytes, whatever the
// number of threads.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sb {

struct Batch {
  std::vector<int32_t> ids, labels;  // [B, T]
  std::vector<uint8_t> mask;         // [B, T]
  void resize(int64_t n) { ids.resize(n), labels.resize(n), mask.resize(n); }
};

// The threads that fill a training run's batches: two for a GPU run, whose step can be shorter than
// one thread's batch (mqrar with softmax attention: 2.7 ms a step on an H200, 2.9 ms for `bench
// tasks`' one core to make its 49152 tokens), one for a CPU run (its engine uses the cores); and the
// batches the prefetcher holds: one slot more than the fillers.
inline int batch_fillers(bool gpu) { return gpu ? 2 : 1; }
inline int batch_slots(bool gpu) { return batch_fillers(gpu) + 1; }

// Yields the batches of steps first, first+1, ..., end-1, strictly in order. With `enabled` and
// depth >= 1, `workers` threads (1 to depth) fill them into `depth` slots: the one the caller holds
// plus up to depth-1 steps ahead, worker w the steps first + w + k workers (with depth >= workers +
// 1 they fill as many steps at once, for batches that take longer to make than a step to train).
// Otherwise get() fills on the caller's thread (same results). The fill runs on several threads
// at once when workers > 1.
class BatchPrefetcher {
 public:
  using Fill = std::function<void(int64_t step, Batch& batch)>;  // must size the batch itself

  BatchPrefetcher(Fill fill, int64_t first, int64_t end, int depth = 2, bool enabled = true, int workers = 1);
  ~BatchPrefetcher();  // stops and joins the workers, whether or not every step was consumed
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Blocks until the batch of `step` is ready. `step` must be the next one (first, then +1 each
  // call; sb::Error otherwise). The reference stays valid until the next get() or destruction.
  // An exception thrown by the fill function for this step is rethrown here.
  const Batch& get(int64_t step);

 private:
  void work(int64_t from, int64_t stride);
  size_t slot_of(int64_t step) const {
    return static_cast<size_t>((step - first_) % static_cast<int64_t>(slots_.size()));
  }

  Fill fill_;
  const int64_t first_, end_;
  int64_t next_get_;                // the step get() expects next (caller's thread only)
  std::vector<Batch> slots_;
  std::mutex mutex_;                // guards the fields below
  std::condition_variable changed_;
  std::vector<int64_t> ready_;      // per slot: the step whose batch it holds, filled (-1: none)
  int64_t held_;                    // steps < held_ are released; the caller may hold step held_
  std::exception_ptr error_;        // what the fill threw for step error_step_ (the lowest failing)
  int64_t error_step_ = -1;
  bool stop_ = false;
  std::vector<std::thread> workers_;  // declared last: they start after everything above exists
};

}  // namespace sb
