// attention_plan_test_util.hpp: the device that the attention plan's host tests plan for
// (test_attention_layout.cpp, test_attention_short_layout.cpp): an H100's limits.
#pragma once
#ifdef STATEBENCH_HAVE_CUDA
#include "kernels/attention/internal.hpp"

namespace sb::test {

// An H100-like device for the plan: 132 SMs, 227 KiB of shared memory per block, the wgmma kernels,
// and the PaTH pairs kernel resident `occ2` / `occ1` times per SM at two / one pipeline stages.
inline cuda::detail::DeviceLimits h100(int occ2 = 1, int occ1 = 2) {
  cuda::detail::DeviceLimits L;
  L.sms = 132, L.max_smem = 227 * 1024, L.sm90 = true;
  for (auto& w : L.path_bwd_occupancy) w[0] = occ2, w[1] = occ1;
  L.path_states = {2, 100 * 1024, 2};
  return L;
}

}  // namespace sb::test

#endif  // STATEBENCH_HAVE_CUDA
