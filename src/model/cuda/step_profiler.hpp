// step_profiler.hpp: StepProfiler, the optional op-level timer of GpuRunner / GpuEngine: CUDA
// events recorded around named regions of a step on one stream, summed by name once the stream is
// drained. Only code holding a profiler records anything (ProfileScope with nullptr is a no-op),
// so the unprofiled path and its CUDA graphs are unchanged.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "model/step_profile.hpp"

namespace sb::cuda {

class StepProfiler {
 public:
  explicit StepProfiler(cudaStream_t stream) : stream_(stream) {}
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Regions are flat: a begin() while another region is open is ignored (returns false), so an op
  // region inside a coarser one (the rows tail) is counted once, in the outer one. `op` must outlive
  // the profiler (a string literal).
  bool begin(const char* op);
  void end();
  void begin_step();
  void end_step();
  // Waits for the stream and sums the recorded regions and steps; clears them.
  StepProfile collect();

 private:
  cudaEvent_t next_event();
  struct Region {
    const char* op;
    int start, stop;  // indices into events_
  };
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  int used_ = 0;
  std::vector<Region> regions_, steps_;
  bool open_ = false, step_open_ = false;
};

// Times the enclosing block as region `op` when `profiler` is not null.
class ProfileScope {
 public:
  ProfileScope(StepProfiler* profiler, const char* op) : p_(profiler && profiler->begin(op) ? profiler : nullptr) {}
  ~ProfileScope() { close(); }
  void close() {  // ends the region before the block does
    if (p_) p_->end();
    p_ = nullptr;
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  StepProfiler* p_;
};

}  // namespace sb::cuda
