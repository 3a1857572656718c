// test_batch_prefetch.cpp: BatchPrefetcher (src/train/batch_prefetch.hpp). Prefetched batches equal
// the synchronously filled ones (a deterministic fill and real tasks, from step 0 and from a resume
// step, with one or several workers), several workers fill at once within their slots, fill errors
// surface from get() of their step, early destruction does not hang, and out-of-order requests
// and bad worker counts are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "tasks/registry.hpp"
#include "train/batch_prefetch.hpp"

using namespace sb;

namespace {

constexpr int64_t kTokens = 24;

// A deterministic fill whose every entry depends on the step.
void fill_counting(int64_t step, Batch& b) {
  b.resize(kTokens);
  for (int64_t i = 0; i < kTokens; ++i) {
    b.ids[i] = static_cast<int32_t>(step * 1000 + i);
    b.labels[i] = static_cast<int32_t>(step * 7 - i);
    b.mask[i] = static_cast<uint8_t>((step + i) % 2);
  }
}

Batch filled(const BatchPrefetcher::Fill& fill, int64_t step) {
  Batch b;
  fill(step, b);
  return b;
}

void expect_same(const Batch& got, const Batch& want, int64_t step) {
  EXPECT_EQ(got.ids, want.ids) << "step " << step;
  EXPECT_EQ(got.labels, want.labels) << "step " << step;
  EXPECT_EQ(got.mask, want.mask) << "step " << step;
}

std::unique_ptr<Task> make_task(const std::string& name, const std::map<std::string, std::string>& params) {
  TaskRegistry registry;
  register_builtin_tasks(registry);
  return registry.create(name, params);
}

// The trainer's fill path: examples step*B .. step*B+B-1 of the task's training split.
BatchPrefetcher::Fill task_fill(const Task& task, int64_t B, uint64_t seed) {
  return [&task, B, seed](int64_t step, Batch& b) {
    b.resize(B * task.seq_len());
    fill_examples(task, task.split_index("train"), seed, static_cast<uint64_t>(step * B), B, b.ids.data(),
                  b.labels.data(), b.mask.data());
  };
}

}  // namespace

TEST(BatchPrefetch, EqualsSynchronousFillForEveryDepth) {
  for (int depth : {0, 1, 2, 4}) {
    for (bool enabled : {true, false}) {
      BatchPrefetcher batches(fill_counting, 0, 30, depth, enabled);
      for (int64_t s = 0; s < 30; ++s) expect_same(batches.get(s), filled(fill_counting, s), s);
    }
  }
}

TEST(BatchPrefetch, SeveralWorkersEqualSynchronousFill) {
  for (int workers : {1, 2, 3, 4})
    for (int64_t first : {0, 5}) {
      BatchPrefetcher batches(fill_counting, first, 41, 4, true, workers);
      for (int64_t s = first; s < 41; ++s) expect_same(batches.get(s), filled(fill_counting, s), s);
    }
}

TEST(BatchPrefetch, WorkersStayWithinTheirSlots) {
  constexpr int depth = 3;
  for (int workers : {1, 2, 3}) {
    std::atomic<int64_t> last_got{-1}, violations{0};
    auto fill = [&](int64_t step, Batch& b) {
      if (step > last_got.load() + depth) ++violations;  // the caller holds last_got's slot or later
      fill_counting(step, b);
    };
    BatchPrefetcher batches(fill, 0, 50, depth, true, workers);
    for (int64_t s = 0; s < 50; ++s) {
      expect_same(batches.get(s), filled(fill_counting, s), s);
      last_got = s;
    }
    EXPECT_EQ(violations.load(), 0) << workers << " workers";
  }
}

// Two workers and three slots fill steps 0 and 1 at the same time: each fill waits (up to 10 s)
// until the other has started.
TEST(BatchPrefetch, TwoWorkersFillTwoStepsAtOnce) {
  std::mutex m;
  std::condition_variable cv;
  int active = 0;
  std::atomic<int> overlapped{0};
  auto fill = [&](int64_t step, Batch& b) {
    if (step < 2) {
      std::unique_lock lock(m);
      ++active;
      cv.notify_all();
      if (cv.wait_for(lock, std::chrono::seconds(10), [&] { return active == 2; })) ++overlapped;
    }
    fill_counting(step, b);
  };
  BatchPrefetcher batches(fill, 0, 6, 3, true, 2);
  for (int64_t s = 0; s < 6; ++s) expect_same(batches.get(s), filled(fill_counting, s), s);
  EXPECT_EQ(overlapped.load(), 2);
}

TEST(BatchPrefetch, WorkerCountsOutsideTheSlotsThrow) {
  EXPECT_THROW(BatchPrefetcher(fill_counting, 0, 10, 2, true, 0), Error);
  EXPECT_THROW(BatchPrefetcher(fill_counting, 0, 10, 2, true, 3), Error);
  BatchPrefetcher synchronous(fill_counting, 0, 3, 0, true, 1);  // no slots ahead: the caller fills
  for (int64_t s = 0; s < 3; ++s) expect_same(synchronous.get(s), filled(fill_counting, s), s);
}

TEST(BatchPrefetch, RealTasksMatchTheTrainersSynchronousFill) {
  for (const auto& [name, params] : std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"word_problem", {{"length", "24"}}}, {"flipflop", {{"length", "32"}}}, {"mqar", {}}}) {
    const auto task = make_task(name, params);
    const auto reference = make_task(name, params);  // another instance, used on this thread meanwhile
    const auto fill = task_fill(*task, 4, 11), fill_reference = task_fill(*reference, 4, 11);
    BatchPrefetcher batches(fill, 0, 20);
    for (int64_t s = 0; s < 20; ++s) expect_same(batches.get(s), filled(fill_reference, s), s);
  }
}

TEST(BatchPrefetch, ResumeAtANonzeroStepGivesTheSameBatches) {
  const auto task = make_task("word_problem", {{"length", "24"}});
  const auto fill = task_fill(*task, 3, 5);
  std::vector<Batch> full;
  {
    BatchPrefetcher batches(fill, 0, 25);
    for (int64_t s = 0; s < 25; ++s) full.push_back(batches.get(s));
  }
  BatchPrefetcher resumed(fill, 13, 25);
  for (int64_t s = 13; s < 25; ++s) expect_same(resumed.get(s), full[s], s);
  BatchPrefetcher counting(fill_counting, 7, 12);
  for (int64_t s = 7; s < 12; ++s) expect_same(counting.get(s), filled(fill_counting, s), s);
}

TEST(BatchPrefetch, FillErrorSurfacesFromGetOfItsStep) {
  for (int workers : {0, 1, 2, 3}) {  // 0: disabled, the caller fills
    auto fill = [](int64_t step, Batch& b) {
      if (step == 6 || step == 7) fail("bad task parameter 'length' at step {}", step);
      fill_counting(step, b);
    };
    BatchPrefetcher batches(fill, 2, 20, 4, workers > 0, std::max(workers, 1));
    for (int64_t s = 2; s < 6; ++s) expect_same(batches.get(s), filled(fill_counting, s), s);
    try {
      batches.get(6);
      ADD_FAILURE() << "get(6) did not throw";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "bad task parameter 'length' at step 6");
    }
  }
}

TEST(BatchPrefetch, EarlyDestructionDoesNotHang) {
  {
    BatchPrefetcher batches(fill_counting, 0, 1000000);
    for (int64_t s = 0; s < 3; ++s) expect_same(batches.get(s), filled(fill_counting, s), s);
  }
  { BatchPrefetcher untouched(fill_counting, 0, 1000000); }
  {
    BatchPrefetcher failing([](int64_t, Batch&) { fail("never requested"); }, 0, 10);
  }
  EXPECT_THROW(
      {
        BatchPrefetcher unwinding(fill_counting, 0, 1000000);
        unwinding.get(0);
        fail("stop");  // an exception unwinds past the prefetcher
      },
      Error);
}

TEST(BatchPrefetch, OutOfOrderRequestsThrow) {
  BatchPrefetcher batches(fill_counting, 5, 10);
  EXPECT_THROW(batches.get(6), Error);  // skips step 5
  expect_same(batches.get(5), filled(fill_counting, 5), 5);
  EXPECT_THROW(batches.get(5), Error);  // repeats
  EXPECT_THROW(batches.get(4), Error);  // goes back
  for (int64_t s = 6; s < 10; ++s) expect_same(batches.get(s), filled(fill_counting, s), s);
  EXPECT_THROW(batches.get(10), Error);  // past the end
}
