// sba_internal.hpp: what the stick-breaking attention files share (internal, host-visible): the
// kernel parameters and the launchers defined in sba_fwd.cu / sba_bwd.cu, called by the host
// entry points in sba.cpp (public API: kernels/attention/attention.hpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace sb::cuda::detail {

struct SbaParams {
  const void* q = nullptr;     // [B, T, H, Dh] (fp32 or bf16)
  const void* k = nullptr;     // [B, T, H, Dh]
  const void* v = nullptr;     // [B, T, H, Dh]
  const void* dout = nullptr;  // [B, T, H, Dh] (backward)
  void* out = nullptr;         // [B, T, H, Dh] (forward)
  void* dq = nullptr;          // [B, T, H, Dh] written directly (backward)
  float* dk_acc = nullptr;     // [BH, Tp, Dh] fp32 accumulators (atomics), zeroed before the backward
  float* dv_acc = nullptr;     // [BH, Tp, Dh]
  int64_t B = 0, T = 0, H = 0;
  int nb = 0;      // 64-row blocks, Tp = 64 nb
  int stages = 2;  // key-block pipeline depth (the launcher's choice: 1 where shared memory is short)
  float scale = 1.f;
  bool bf16 = false;
  bool remainder = true;  // out_i += r_i v_i (the left-over stick weights the query's own value)
};

// One CTA per (64-query block, head): forward writes out; backward writes dq and adds into dk_acc,
// dv_acc. Stream-ordered; the launches are checked.
void launch_sba_fwd(const SbaParams& p, int64_t Dh, cudaStream_t stream);
void launch_sba_bwd(const SbaParams& p, int64_t Dh, cudaStream_t stream);

}  // namespace sb::cuda::detail
