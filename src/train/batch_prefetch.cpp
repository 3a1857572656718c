// batch_prefetch.cpp: BatchPrefetcher's worker loop and hand-over (one mutex, one condition
// variable; no busy waiting). Fill exceptions travel to the caller's thread as exception_ptr.
#include "train/batch_prefetch.hpp"

#include "core/error.hpp"

namespace sb {

BatchPrefetcher::BatchPrefetcher(Fill fill, int64_t first, int64_t end, int depth, bool enabled)
    : fill_(std::move(fill)), first_(first), end_(end), next_get_(first),
      slots_(enabled && depth > 0 ? static_cast<size_t>(depth) : 1), filled_(first), held_(first) {
  if (!fill_) fail("batch prefetcher: no fill function");
  if (enabled && depth > 0 && first < end) worker_ = std::thread([this] { work(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();  // waits at most for the batch being filled now
}

void BatchPrefetcher::work() {
  const auto depth = static_cast<int64_t>(slots_.size());
  for (int64_t step = first_; step < end_; ++step) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || step < held_ + depth; });  // its slot is free
      if (stop_) return;
    }
    try {
      fill_(step, slot(step));  // outside the lock: the caller never reads a slot not yet filled
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
        error_step_ = step;
      }
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard lock(mutex_);
      filled_ = step + 1;
    }
    changed_.notify_all();
  }
}

const Batch& BatchPrefetcher::get(int64_t step) {
  if (step != next_get_ || step >= end_)
    fail("batch prefetcher: step {} requested, expected step {} (range [{}, {}))", step, next_get_, first_, end_);
  if (!worker_.joinable()) {
    fill_(step, slots_[0]);
    ++next_get_;
    return slots_[0];
  }
  std::unique_lock lock(mutex_);
  held_ = step;  // releases the slot of step-1
  changed_.notify_all();
  changed_.wait(lock, [&] { return filled_ > step || error_step_ == step; });
  if (filled_ <= step) std::rethrow_exception(error_);
  ++next_get_;
  return slot(step);
}

}  // namespace sb
