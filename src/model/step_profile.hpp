// step_profile.hpp: a per-op time breakdown of training steps (what `bench train --profile`
// prints), as measured by the GPU runner's optional profiler (model/cuda/step_profiler.hpp): the
// device time of each op region, summed over the profiled steps, by op name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct OpTime {
  std::string op;     // "fwd.attention", "bwd.mlp_in", "adamw", ...
  double ms = 0;      // device time summed over the profiled steps
  int64_t calls = 0;  // regions recorded (e.g. once per layer per step)
};

struct StepProfile {
  int64_t steps = 0;
  double step_ms = 0;       // device time of the whole steps, summed (eager launches, no CUDA graphs)
  std::vector<OpTime> ops;  // in order of first appearance in a step
};

}  // namespace sb
