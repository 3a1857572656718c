// swiglu_up_fwd_sm80.cu: the SwiGLU MLP's input product and the SwiGLU in one kernel
// (swiglu_up_forward_bf16_cuda, kernels/ops/ops_bf16.hpp): g = h w_gate_up^T is rounded to bf16 and
// stored for the backward, and s = silu(gate) up is made from the same fragments, so the [N, 2F] g is
// not read back. mma.sync m16n8k16 bf16 tiles (warp_bf16's fragments, tiles.cuh's cp.async).
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/attention/common/bf16_warp_ops.cuh"
#include "kernels/attention/common/tiles.cuh"
#include "kernels/ops/launch.cuh"
#include "kernels/ops/ops_bf16.hpp"

namespace sb::cuda {
namespace {

using namespace ops_detail;
using detail::cp_async16, detail::cp_async_commit, detail::cp_async_wait;
namespace wb = detail::warp_bf16;

// Persistent CTAs of four warps, each CTA on 64 of the F columns: warp w holds its B fragments (the
// rows of w_gate_up for gate columns f0 + 16 w .. + 15 and the same up columns, all of K = D) in
// registers and, for each row tile of 64, makes those 32 columns over the tile's 64 rows from h's
// tile in shared memory (the next tile's in flight meanwhile). The CTA stages the tile's rows of
// gate | up | s (bf16) and stores them with 16-byte accesses.
constexpr int kRows = 64, kCols = 64, kWarps = 4, kThreadsCta = 32 * kWarps, kCtasPerSm = 2;
// A row of gate | up | s in shared memory (bf16): 100 words, so that a quad's pairs in 8 rows hit distinct banks.
constexpr int kOutLd = 3 * kCols + 8;
// Two buffers of h's tile (D / 64 swizzled chunks of 64 columns), then the staged outputs (bf16 elements).
template <int D>
constexpr int kSmemBytes = (2 * kRows * D + kRows * kOutLd) * 2;

__host__ __device__ inline int64_t row_tiles(int64_t N) { return (N + kRows - 1) / kRows; }

// The grid: whole sets of F / 64 CTAs (one a column tile), at most one a row tile, up to a wave.
int64_t grid_ctas(int64_t N, int64_t F, int sms) {
  const int64_t f_tiles = F / kCols;
  return f_tiles * std::max<int64_t>(1, std::min(row_tiles(N), int64_t{kCtasPerSm} * sms / f_tiles));
}

// Row tile rt's h (rows rt 64.., zero past N) into buffer hb: chunk kc of 64 columns at hb + kc 64 64.
template <int D>
__device__ __forceinline__ void load_h(uint16_t* hb, const uint16_t* h, int64_t rt, int64_t N, int tid) {
#pragma unroll
  for (int it = 0; it < kRows * D / 8 / kThreadsCta; ++it) {
    const int idx = tid + kThreadsCta * it, r = idx / (D / 8), c = 8 * (idx % (D / 8));
    const int64_t row = rt * kRows + r;
    const bool valid = row < N;
    cp_async16(hb + (c / 64) * kRows * 64 + wb::swz<64>(r, c % 64), h + (valid ? row * D + c : 0), valid);
  }
  cp_async_commit();
}

template <int D>
__global__ void __launch_bounds__(kThreadsCta, kCtasPerSm)
    swiglu_up_fwd_kernel(uint16_t* g, uint16_t* s, const uint16_t* h, const uint16_t* w, int64_t N, int64_t F) {
  extern __shared__ __align__(16) uint16_t smem[];  // [2][kRows x D] h, [kRows x kOutLd] outputs
  uint16_t* st = smem + 2 * kRows * D;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gr = lane >> 2, t = lane & 3;
  const int64_t f_tiles = F / kCols, f0 = (blockIdx.x % f_tiles) * kCols;
  const int64_t rt0 = blockIdx.x / f_tiles, rt_step = gridDim.x / f_tiles, rts = row_tiles(N);
  if (rt0 < rts) load_h<D>(smem, h, rt0, N, tid);
  // B fragments (m16n8k16, B^T = w's rows): n-tile j of 8 columns, j = 0, 1 gate f0 + 16 warp + 8 j..,
  // j = 2, 3 the same up columns; lane (gr, t) holds row gr's pairs at k = 16 ks + 2 t and + 8.
  uint32_t bw[D / 16][4][2];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t wrow = (j < 2 ? 0 : F) + f0 + 16 * warp + 8 * (j & 1) + gr;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(w + wrow * D) + t;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) bw[ks][j][0] = __ldg(src + 8 * ks), bw[ks][j][1] = __ldg(src + 8 * ks + 4);
  }
  int buf = 0;
  for (int64_t rt = rt0; rt < rts; rt += rt_step, buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads();  // this tile in; every warp done with the other buffer and with the staged rows
    if (rt + rt_step < rts) load_h<D>(smem + (buf ^ 1) * kRows * D, h, rt + rt_step, N, tid);
    const uint16_t* hb = smem + buf * kRows * D;
    float acc[4][4][4] = {};  // [m-tile of 16 rows][n-tile j][fragment]
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        uint32_t af[4];
        wb::frag_a<64>(af, hb + (ks / 4) * kRows * 64, 16 * m, 16 * (ks % 4), lane);
#pragma unroll
        for (int j = 0; j < 4; ++j) wb::mma_bf16(acc[m][j], af, bw[ks][j][0], bw[ks][j][1]);
      }
    }
    // The lane's entries (rows 16 m + gr, + 8; columns 16 warp + 8 j + 2 t, + 1): gate and up rounded,
    // s from the rounded values (what swiglu_forward_bf16_cuda makes of them).
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const uint32_t gp = wb::pack_bf16(acc[m][j][2 * hh], acc[m][j][2 * hh + 1]);
          const uint32_t up = wb::pack_bf16(acc[m][j + 2][2 * hh], acc[m][j + 2][2 * hh + 1]);
          const float2 gv = wb::unpack_bf16(gp), uv = wb::unpack_bf16(up);
          uint32_t* p = reinterpret_cast<uint32_t*>(st + (16 * m + 8 * hh + gr) * kOutLd + 16 * warp + 8 * j + 2 * t);
          p[0] = gp;
          p[kCols / 2] = up;
          p[kCols] = wb::pack_bf16(swiglu_value(gv.x, uv.x), swiglu_value(gv.y, uv.y));
        }
    __syncthreads();  // the tile's rows staged
#pragma unroll
    for (int it = 0; it < kRows * 3 * kCols / 8 / kThreadsCta; ++it) {  // 16 bytes a thread
      const int idx = tid + kThreadsCta * it, r = idx / (3 * kCols / 8), c = 8 * (idx % (3 * kCols / 8));
      const int64_t row = rt * kRows + r;
      if (row >= N) continue;
      uint16_t* dst = c < 2 * kCols ? g + row * 2 * F + (c < kCols ? f0 + c : F + f0 + c - kCols)
                                    : s + row * F + f0 + c - 2 * kCols;
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(st + r * kOutLd + c);
    }
  }
}

template <int D>
void launch(uint16_t* g, uint16_t* s, const uint16_t* h, const uint16_t* w, int64_t N, int64_t F, int64_t ctas,
            cudaStream_t stream) {
  CUDA_CHECK(cudaFuncSetAttribute(swiglu_up_fwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<D>));
  swiglu_up_fwd_kernel<D><<<static_cast<unsigned>(ctas), kThreadsCta, kSmemBytes<D>, stream>>>(g, s, h, w, N, F);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool swiglu_up_forward_fits(int64_t D, int64_t F, std::initializer_list<const void*> pointers) {
  if ((D != 64 && D != 128) || F <= 0 || F % kCols != 0) return false;
  for (const void* p : pointers)
    if (!aligned_to(p, 16)) return false;
  return true;
}

bool swiglu_up_forward_pays(int64_t N, int64_t D, int64_t F, int sms) {
  return D <= 128 && row_tiles(N) * (F / kCols) >= int64_t{kCtasPerSm} * sms;
}

void swiglu_up_forward_bf16_cuda(uint16_t* g, uint16_t* s, const uint16_t* h, const uint16_t* w_gate_up, int64_t N,
                                 int64_t D, int64_t F, cudaStream_t stream) {
  if (N <= 0) return;
  if (!swiglu_up_forward_fits(D, F, {g, s, h, w_gate_up}))
    throw_error("swiglu_up_forward: D must be 64 or 128, F a multiple of 64 and the pointers 16-byte aligned");
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t ctas = grid_ctas(N, F, sms);
  if (ctas > 2147483647) throw_error("swiglu_up_forward: too many columns");
  if (D == 64) launch<64>(g, s, h, w_gate_up, N, F, ctas, stream);
  else launch<128>(g, s, h, w_gate_up, N, F, ctas, stream);
}

}  // namespace sb::cuda
