// shim.hpp: host stand-ins for what the short warp kernels use on the device (run.sh): a thread per
// lane, a 32-thread barrier per warp for __syncwarp and one per CTA for __syncthreads, shuffles through
// a per-warp exchange array; tf32 rounding, ldmatrix (fp32 and b16 tiles, .trans), mma.sync m16n8k8
// tf32 and m16n8k16 bf16 through per-warp arrays (exact products summed in fp32), cp.async as a copy;
// threadIdx / blockIdx per thread.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
namespace emu {
inline thread_local uint3 t_thread, t_block;
inline thread_local float* t_smem;
inline thread_local std::barrier<>* t_bar;
inline thread_local std::barrier<>* t_cta_bar;
inline thread_local double* t_xchg;
inline thread_local float* t_frag;  // [32 lanes][6]: a0..a3, b0, b1
inline thread_local const float** t_rows;  // [32 lanes]: ldmatrix row addresses
inline void syncwarp() { t_bar->arrive_and_wait(); }
inline void syncthreads() { t_cta_bar->arrive_and_wait(); }
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
template <class T>
T shfl_xor(T v, int mask) {
  const int lane = t_thread.x & 31;
  t_xchg[lane] = static_cast<double>(v);
  syncwarp();
  const T r = static_cast<T>(t_xchg[lane ^ mask]);
  syncwarp();
  return r;
}
inline float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// cvt.rna.tf32.f32: 10 mantissa bits, ties away from zero.
inline uint32_t tf32_bits(float x) {
  const uint32_t u = f2u(x);
  return std::isfinite(x) ? (u + 0x1000u) & 0xffffe000u : u;
}
// ldmatrix .x4 of fp32 tiles: lane L's row address is row L % 8 of tile L / 8; r[e] = entry
// (lane / 4, lane % 4) of tile e.
inline void ldsm_x4(uint32_t (&r)[4], const float* row) {
  const int lane = t_thread.x & 31;
  t_rows[lane] = row;
  syncwarp();
  for (int e = 0; e < 4; ++e) r[e] = f2u(t_rows[8 * e + lane / 4][lane % 4]);
  syncwarp();
}
inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int lane = t_thread.x & 31, g = lane >> 2, t = lane & 3;
  // The tensor cores read an operand's tf32 bits: the low 13 are ignored.
  for (int e = 0; e < 4; ++e) t_frag[lane * 6 + e] = u2f(a[e] & 0xffffe000u);
  for (int e = 0; e < 2; ++e) t_frag[lane * 6 + 4 + e] = u2f(b[e] & 0xffffe000u);
  syncwarp();
  for (int e = 0; e < 4; ++e) {
    const int i = g + 8 * (e >> 1), j = 2 * t + (e & 1);
    float acc = d[e];
    for (int k = 0; k < 8; ++k) {
      const float A = t_frag[((i % 8) * 4 + k % 4) * 6 + (i >= 8) + 2 * (k >= 4)];
      const float B = t_frag[(j * 4 + k % 4) * 6 + 4 + (k >= 4)];
      acc += A * B;
    }
    d[e] = acc;
  }
  syncwarp();
}
template <class T>
T shfl_idx(T v, int src) {
  const int lane = t_thread.x & 31;
  t_xchg[lane] = static_cast<double>(v);
  syncwarp();
  const T r = static_cast<T>(t_xchg[src & 31]);
  syncwarp();
  return r;
}
// ldmatrix .x4 .trans of b16 8 x 8 matrices: lane L's row address is row L % 8 of matrix L / 8; r[e] = the pair
// (rows 2 (lane % 4), + 1; column lane / 4) of matrix e, the first in the low half.
inline void ldsm_x4_trans(uint32_t (&r)[4], const uint16_t* row) {
  const int lane = t_thread.x & 31;
  t_rows[lane] = reinterpret_cast<const float*>(row);
  syncwarp();
  for (int e = 0; e < 4; ++e) {
    const auto* r0 = reinterpret_cast<const uint16_t*>(t_rows[8 * e + 2 * (lane % 4)]);
    const auto* r1 = reinterpret_cast<const uint16_t*>(t_rows[8 * e + 2 * (lane % 4) + 1]);
    r[e] = static_cast<uint32_t>(r0[lane / 4]) | static_cast<uint32_t>(r1[lane / 4]) << 16;
  }
  syncwarp();
}
// mma.sync m16n8k16 bf16 with fp32 accumulation: exact products summed in fp32.
inline float bf16_half(uint32_t u, int hi) { return u2f(hi ? u & 0xffff0000u : u << 16); }
inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int lane = t_thread.x & 31, g = lane >> 2, t = lane & 3;
  auto* f = reinterpret_cast<uint32_t*>(t_frag);
  for (int e = 0; e < 4; ++e) f[lane * 6 + e] = a[e];
  f[lane * 6 + 4] = b0, f[lane * 6 + 5] = b1;
  syncwarp();
  for (int e = 0; e < 4; ++e) {
    const int i = g + 8 * (e >> 1), j = 2 * t + (e & 1);
    float acc = d[e];
    for (int k = 0; k < 16; ++k) {
      const float A = bf16_half(f[((i % 8) * 4 + (k % 8) / 2) * 6 + (i >= 8) + 2 * (k >= 8)], k & 1);
      const float B = bf16_half(f[(j * 4 + (k % 8) / 2) * 6 + 4 + (k >= 8)], k & 1);
      acc += A * B;
    }
    d[e] = acc;
  }
  syncwarp();
}
// cp.async of 16 bytes, or 16 zero bytes where the copy's source size is 0.
inline void cp_async16(void* dst, const void* src, bool valid) {
  if (valid) std::memcpy(dst, src, 16);
  else std::memset(dst, 0, 16);
}
}  // namespace emu
#define __shfl_sync(m, v, s) emu::shfl_idx(v, s)
#define __syncwarp() emu::syncwarp()
#define __syncthreads() emu::syncthreads()
#define __shfl_up_sync(m, v, o) emu::shfl(v, o, true)
#define __shfl_down_sync(m, v, o) emu::shfl(v, o, false)
#define __shfl_xor_sync(m, v, o) emu::shfl_xor(v, o)
#define __uint_as_float(u) emu::u2f(u)
#define __float_as_uint(f) emu::f2u(f)
#define threadIdx emu::t_thread
#define blockIdx emu::t_block
