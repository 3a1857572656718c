// step_profiler.cpp: StepProfiler (see step_profiler.hpp): a pool of timing events reused across
// collections, regions as (op, start event, stop event), summed by op in order of first appearance.
#include "model/cuda/step_profiler.hpp"

#include "core/error.hpp"
#include "kernels/common/cuda_check.hpp"

namespace sb::cuda {

StepProfiler::~StepProfiler() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t StepProfiler::next_event() {
  if (used_ == static_cast<int>(events_.size())) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  cudaEvent_t e = events_[used_++];
  CUDA_CHECK(cudaEventRecord(e, stream_));
  return e;
}

bool StepProfiler::begin(const char* op) {
  if (open_) return false;
  open_ = true;
  next_event();
  regions_.push_back({op, used_ - 1, -1});
  return true;
}

void StepProfiler::end() {
  if (!open_) fail("step profiler: end() without begin()");
  next_event();
  regions_.back().stop = used_ - 1;
  open_ = false;
}

void StepProfiler::begin_step() {
  if (step_open_) fail("step profiler: begin_step() inside a step");
  step_open_ = true;
  next_event();
  steps_.push_back({"step", used_ - 1, -1});
}

void StepProfiler::end_step() {
  if (!step_open_) fail("step profiler: end_step() without begin_step()");
  next_event();
  steps_.back().stop = used_ - 1;
  step_open_ = false;
}

StepProfile StepProfiler::collect() {
  if (open_ || step_open_) fail("step profiler: collect() with a region still open");
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  auto elapsed = [&](const Region& r) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events_[r.start], events_[r.stop]));
    return static_cast<double>(ms);
  };
  StepProfile p;
  p.steps = static_cast<int64_t>(steps_.size());
  for (const Region& s : steps_) p.step_ms += elapsed(s);
  for (const Region& r : regions_) {
    OpTime* slot = nullptr;
    for (OpTime& o : p.ops)
      if (o.op == r.op) slot = &o;
    if (!slot) slot = &p.ops.emplace_back(OpTime{r.op, 0, 0});
    slot->ms += elapsed(r);
    ++slot->calls;
  }
  regions_.clear(), steps_.clear();
  used_ = 0;
  return p;
}

}  // namespace sb::cuda
