// generate_examples.hpp: the parallel generate-and-write loop behind `statebench generate`.
// Workers fill fixed chunks of consecutive examples; the calling thread hands the chunks to the
// writer strictly in order, so the output bytes are the same for every thread count.
#pragma once
#include <atomic>
#include <cstdint>

#include "io/example_writer.hpp"
#include "io/progress.hpp"
#include "tasks/task.hpp"

namespace sb {

struct GenerateRange {
  int split = 0;       // index into task.splits()
  uint64_t seed = 0;
  uint64_t start = 0;  // index of the first example
  int64_t count = 0;   // number of examples
};

// Examples per chunk for sequences of length T (about 64k tokens, at least 1).
int64_t generate_chunk_examples(int64_t T);

// Generates examples start .. start+count-1 with `threads` threads (>= 1) and writes them to
// `out` in order (does not commit). progress: updated with the number written (may be null).
// cancel: checked between chunks; when it becomes true this throws sb::Error("interrupted").
// Any worker's exception is rethrown here after all threads have stopped.
void generate_examples(const Task& task, const GenerateRange& range, int threads, ExampleWriter& out,
                       Progress* progress = nullptr, const std::atomic<bool>* cancel = nullptr);

}  // namespace sb
