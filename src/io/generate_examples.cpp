// generate_examples.cpp: chunked parallel generation with in-order writing (see the header).
#include "io/generate_examples.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace sb {

namespace {

struct ChunkBuffer {
  std::vector<int32_t> input_ids, labels;  // [n, T]
  std::vector<uint8_t> score_mask;         // [n, T]
  int64_t chunk = -1;                      // which chunk it holds once ready
  bool ready = false;
};

void fill_chunk(const Task& task, const GenerateRange& range, int64_t chunk, int64_t per_chunk, ChunkBuffer& buf) {
  const int64_t T = task.seq_len();
  const int64_t first = chunk * per_chunk;
  const int64_t n = std::min(per_chunk, range.count - first);
  const auto size = static_cast<size_t>(n * T);
  buf.input_ids.resize(size);
  buf.labels.resize(size);
  buf.score_mask.resize(size);
  fill_examples(task, range.split, range.seed, range.start + static_cast<uint64_t>(first), n, buf.input_ids.data(),
                buf.labels.data(), buf.score_mask.data());
}

void check_cancel(const std::atomic<bool>* cancel) {
  if (cancel && cancel->load(std::memory_order_relaxed)) fail("interrupted");
}

}  // namespace

int64_t generate_chunk_examples(int64_t T) { return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(T, 1)); }

void generate_examples(const Task& task, const GenerateRange& range, int threads, ExampleWriter& out,
                       Progress* progress, const std::atomic<bool>* cancel) {
  if (range.count < 0) fail("cannot generate {} examples", range.count);
  if (range.count == 0) return;
  const int64_t per_chunk = generate_chunk_examples(task.seq_len());
  const int64_t chunks = (range.count + per_chunk - 1) / per_chunk;
  threads = static_cast<int>(std::clamp<int64_t>(threads, 1, chunks));

  auto write_chunk = [&](int64_t chunk, const ChunkBuffer& buf) {
    const int64_t n = std::min(per_chunk, range.count - chunk * per_chunk);
    out.write(n, buf.input_ids.data(), buf.labels.data(), buf.score_mask.data());
    if (progress) progress->update(std::min(range.count, (chunk + 1) * per_chunk));
  };

  if (threads == 1) {
    ChunkBuffer buf;
    for (int64_t c = 0; c < chunks; ++c) {
      check_cancel(cancel);
      fill_chunk(task, range, c, per_chunk, buf);
      write_chunk(c, buf);
    }
    return;
  }

  // Chunk c lives in slot c % slots; a worker may claim chunk c once chunk c - slots is written.
  const int64_t slots = 2 * static_cast<int64_t>(threads);
  std::vector<ChunkBuffer> buffers(static_cast<size_t>(slots));
  std::mutex mu;
  std::condition_variable cv;
  int64_t next_claim = 0, next_write = 0;
  bool stop = false;
  std::exception_ptr error;

  auto worker = [&] {
    for (;;) {
      int64_t c;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || next_claim >= chunks || next_claim < next_write + slots; });
        if (stop || next_claim >= chunks) return;
        c = next_claim++;
      }
      ChunkBuffer& buf = buffers[static_cast<size_t>(c % slots)];
      try {
        fill_chunk(task, range, c, per_chunk, buf);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!error) error = std::current_exception();
        stop = true;
        cv.notify_all();
        return;
      }
      std::lock_guard lock(mu);
      buf.chunk = c;
      buf.ready = true;
      cv.notify_all();
    }
  };

  std::vector<std::thread> pool;
  auto shut_down = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : pool) t.join();
    pool.clear();
  };

  try {
    for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
    for (int64_t c = 0; c < chunks; ++c) {
      check_cancel(cancel);
      ChunkBuffer& buf = buffers[static_cast<size_t>(c % slots)];
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return error || (buf.ready && buf.chunk == c); });
        if (error) break;
      }
      write_chunk(c, buf);  // outside the lock: workers keep filling other slots
      std::lock_guard lock(mu);
      buf.ready = false;
      ++next_write;
      cv.notify_all();
    }
  } catch (...) {
    shut_down();
    throw;
  }
  shut_down();
  if (error) std::rethrow_exception(error);
}

}  // namespace sb
