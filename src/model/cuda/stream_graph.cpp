// stream_graph.cpp: StreamGraph (see model/cuda/stream_graph.hpp): eager warm-up, capture, instantiate,
// replay; capture failures end the capture cleanly and fall back to eager launches. StreamGraphs.
#include "model/cuda/stream_graph.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "kernels/ops/ops.hpp"

namespace sb::cuda {

StreamGraph::~StreamGraph() { reset(); }

void StreamGraph::reset() {
  if (exec_) cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
  calls_ = 0;
}

void StreamGraph::run(cudaStream_t stream, std::initializer_list<const void*> key, const std::function<void()>& body) {
  // The legacy default stream (nullptr) cannot be captured.
  if (!enabled_ || stream == nullptr) return body();
  if (!std::equal(key.begin(), key.end(), key_.begin(), key_.end())) reset(), key_.assign(key.begin(), key.end());
  if (exec_) {
    CUDA_CHECK(cudaGraphLaunch(exec_, stream));
    return;
  }
  if (++calls_ < 2) return body();
  const auto give_up = [&](const char* why) {
    (void)cudaGetLastError();
    enabled_ = false;
    reset();
    fmt::print(stderr, "statebench: CUDA graph capture failed ({}); running the step eagerly\n", why);
    body();
  };
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::string body_error;
  try {
    body();
  } catch (const std::exception& e) {
    body_error = e.what();  // e.g. an operation that is illegal while capturing
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!body_error.empty() || end != cudaSuccess || graph == nullptr) {
    if (graph) cudaGraphDestroy(graph);
    return give_up(!body_error.empty() ? body_error.c_str() : cudaGetErrorString(end));
  }
  const cudaError_t inst = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    exec_ = nullptr;
    return give_up(cudaGetErrorString(inst));
  }
  CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

StreamGraph& StreamGraphs::of(int64_t size) {
  const auto it = graphs_.find(size);
  if (it != graphs_.end()) return *it->second;
  for (const auto& g : graphs_) enabled_ = enabled_ && g.second->enabled();
  if (graphs_.size() >= kMaxSizes) graphs_.clear();
  return *graphs_.emplace(size, std::make_unique<StreamGraph>(enabled_)).first->second;
}

}  // namespace sb::cuda
