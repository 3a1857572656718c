// stream_graph.hpp: StreamGraph, a fixed sequence of stream work (kernels, cuBLAS GEMMs, memsets)
// recorded once into a CUDA graph and replayed, keyed by the pointers it was recorded with. Owns
// the warm-up / capture / replay policy and the fallback to eager launches when capture fails;
// StreamGraphs keeps one per size of work whose shapes take a few values.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <vector>

namespace sb::cuda {

class StreamGraph {
 public:
  // enabled = false: run() always launches eagerly (A/B timing, legacy default stream).
  explicit StreamGraph(bool enabled) : enabled_(enabled) {}
  ~StreamGraph();
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;

  // Runs body() on `stream`. The body must enqueue the same work whenever the key is the same (the
  // device pointers and sizes it uses). First call for a key: eager (warm-up: module loading,
  // kernel attributes). Second: captured into a graph, then launched. Later: replayed. A new key
  // drops the graph and starts over. If capture fails (an operation that cannot be captured), the
  // graph is disabled for good with one line on stderr and body() runs eagerly; errors of the
  // eager body itself propagate (sb::Error).
  void run(cudaStream_t stream, std::initializer_list<const void*> key, const std::function<void()>& body);
  bool replaying() const { return exec_ != nullptr; }
  bool enabled() const { return enabled_; }

 private:
  void reset();
  bool enabled_;
  std::vector<const void*> key_;
  int calls_ = 0;  // calls with the current key
  cudaGraphExec_t exec_ = nullptr;
};

// One StreamGraph per size (e.g. the rows tail's padded row count), so that batches alternating
// between a few sizes replay their own graphs instead of recording anew; a size beyond kMaxSizes
// drops them all. Once a capture has failed, new ones start disabled (eager).
class StreamGraphs {
 public:
  explicit StreamGraphs(bool enabled) : enabled_(enabled) {}
  StreamGraph& of(int64_t size);

 private:
  static constexpr size_t kMaxSizes = 8;
  bool enabled_;
  std::map<int64_t, std::unique_ptr<StreamGraph>> graphs_;
};

}  // namespace sb::cuda
