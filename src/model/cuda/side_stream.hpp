// side_stream.hpp: SideStream, a second stream for work that may overlap the main stream's (the
// runner's weight-gradient products and side attention inputs), with fork and join points by CUDA
// events: fork() orders the side stream after the main stream's work so far; done(slot) marks the
// side work so far under a name; join(slot) orders the main stream after it. Works inside CUDA
// graph capture (the fork pulls the side stream into the capture; every side op must be joined back
// before the capture ends).
#pragma once
#include <cuda_runtime.h>

#include <array>

#include "kernels/common/cuda_check.hpp"

namespace sb::cuda {

class SideStream {
 public:
  static constexpr int kSlots = 4;
  SideStream() {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (auto& e : done_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  }
  ~SideStream() {
    for (auto e : done_)
      if (e) cudaEventDestroy(e);
    if (fork_) cudaEventDestroy(fork_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t stream() const { return stream_; }
  void fork(cudaStream_t main) {
    CUDA_CHECK(cudaEventRecord(fork_, main));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, fork_, 0));
  }
  void done(int slot) {
    CUDA_CHECK(cudaEventRecord(done_[slot], stream_));
    pending_[slot] = true;
  }
  void join(cudaStream_t main, int slot) {
    if (!pending_[slot]) return;
    CUDA_CHECK(cudaStreamWaitEvent(main, done_[slot], 0));
    pending_[slot] = false;
  }
  void join_all(cudaStream_t main) {
    for (int s = 0; s < kSlots; ++s) join(main, s);
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  std::array<cudaEvent_t, kSlots> done_{};
  std::array<bool, kSlots> pending_{};
};

}  // namespace sb::cuda
