// shim.hpp: host stand-ins for what the warp-per-head short PaTH kernels use on the device (run.sh):
// a thread per lane, a 32-thread barrier per warp for __syncwarp, shuffles through a per-warp
// exchange array; threadIdx / blockIdx per thread.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <barrier>
#include <cmath>
#include <cstdint>
namespace emu {
inline thread_local uint3 t_thread, t_block;
inline thread_local float* t_smem;
inline thread_local std::barrier<>* t_bar;
inline thread_local double* t_xchg;
inline void syncwarp() { t_bar->arrive_and_wait(); }
template <class T>
T shfl(T v, int src_delta, bool up) {
  const int lane = t_thread.x & 31;
  t_xchg[lane] = static_cast<double>(v);
  syncwarp();
  const int src = up ? lane - src_delta : lane + src_delta;
  const T r = src >= 0 && src < 32 ? static_cast<T>(t_xchg[src]) : v;
  syncwarp();
  return r;
}
}  // namespace emu
#define __syncwarp() emu::syncwarp()
#define __shfl_up_sync(m, v, o) emu::shfl(v, o, true)
#define __shfl_down_sync(m, v, o) emu::shfl(v, o, false)
#define threadIdx emu::t_thread
#define blockIdx emu::t_block
