// batch_prefetch.cpp: BatchPrefetcher's worker loops and hand-over (one mutex, one condition
// variable; no busy waiting). Fill exceptions travel to the caller's thread as exception_ptr.
#include "train/batch_prefetch.hpp"

#include "core/error.hpp"

namespace sb {

BatchPrefetcher::BatchPrefetcher(Fill fill, int64_t first, int64_t end, int depth, bool enabled, int workers)
    : fill_(std::move(fill)), first_(first), end_(end), next_get_(first),
      slots_(enabled && depth > 0 ? static_cast<size_t>(depth) : 1), ready_(slots_.size(), -1), held_(first) {
  if (!fill_) fail("batch prefetcher: no fill function");
  if (workers < 1 || (enabled && depth > 0 && workers > depth))
    fail("batch prefetcher: {} workers for {} slots (expected 1 to the slots)", workers, depth);
  if (!enabled || depth <= 0) return;
  for (int w = 0; w < workers && first + w < end; ++w)
    workers_.emplace_back([this, w, workers] { work(first_ + w, workers); });
}

BatchPrefetcher::~BatchPrefetcher() {
  if (workers_.empty()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (auto& w : workers_) w.join();  // each waits at most for the batch it is filling now
}

void BatchPrefetcher::work(int64_t from, int64_t stride) {
  const auto depth = static_cast<int64_t>(slots_.size());
  for (int64_t step = from; step < end_; step += stride) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || step < held_ + depth; });  // its slot is free
      if (stop_) return;
    }
    try {
      fill_(step, slots_[slot_of(step)]);  // outside the lock: the caller never reads a slot not yet filled
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        if (error_step_ < 0 || step < error_step_) error_ = std::current_exception(), error_step_ = step;
      }
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard lock(mutex_);
      ready_[slot_of(step)] = step;
    }
    changed_.notify_all();
  }
}

const Batch& BatchPrefetcher::get(int64_t step) {
  if (step != next_get_ || step >= end_)
    fail("batch prefetcher: step {} requested, expected step {} (range [{}, {}))", step, next_get_, first_, end_);
  if (workers_.empty()) {
    fill_(step, slots_[0]);
    ++next_get_;
    return slots_[0];
  }
  const size_t at = slot_of(step);
  std::unique_lock lock(mutex_);
  held_ = step;  // releases the slot of step-1
  changed_.notify_all();
  changed_.wait(lock, [&] { return ready_[at] == step || error_step_ == step; });
  if (ready_[at] != step) std::rethrow_exception(error_);
  ++next_get_;
  return slots_[at];
}

}  // namespace sb
