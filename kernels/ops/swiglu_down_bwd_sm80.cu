// swiglu_down_bwd_sm80.cu: the SwiGLU MLP's down-projection d(input) and the SwiGLU backward in one
// kernel (swiglu_down_backward_bf16_cuda, kernels/ops/ops_bf16.hpp): ds = dy w_down stays in the
// warps' fragments (fp32, never stored), so a step reads the [N, 2F] pre-activation and writes its
// gradient once, and the [N, F] ds is neither written nor read back. mma.sync m16n8k16 bf16 tiles
// (warp_bf16's fragments, tiles.cuh's cp.async).
#include <cuda_bf16.h>

#include "kernels/attention/common/bf16_warp_ops.cuh"
#include "kernels/attention/common/tiles.cuh"
#include "kernels/ops/launch.cuh"
#include "kernels/ops/ops_bf16.hpp"

namespace sb::cuda {
namespace {

using namespace ops_detail;
using detail::cp_async16, detail::cp_async_commit, detail::cp_async_wait;
namespace wb = detail::warp_bf16;

// A CTA: 64 rows x 64 of the F columns (both halves of g: gate and up), four warps of 16 rows; K = D
// in chunks of 64 through two shared-memory stages (cp.async, shared by the warps). Each warp copies
// its own rows of gate and up beside them (in flight during the products), applies the SwiGLU
// backward to its fragments of ds there, in place, and stores those rows with 16-byte accesses: after
// the products, no CTA barrier.
constexpr int kRows = 64, kCols = 64, kChunk = 64, kWarps = 4, kThreadsCta = 32 * kWarps;
constexpr int kStage = kRows * kChunk + kChunk * kCols;  // bf16 elements a stage: dy's chunk, then w's
// A row of gate | up in shared memory (bf16): 68 words, so that a quad's pairs in 8 rows hit distinct banks.
constexpr int kGateLd = 2 * kCols + 8;
constexpr int kSmemBytes = (2 * kStage + kRows * kGateLd) * 2;
constexpr int kCtasPerSm = 4;  // the launch bound (128 registers) and the shared memory allow four

// The grid: a CTA for each 64-row tile and 64 of the F columns.
int64_t grid_ctas(int64_t N, int64_t F) { return (N + kRows - 1) / kRows * (F / kCols); }

// K chunk kc of dy's rows r0.. (zero past N) and of w_down's rows kc 64.., columns f0.. into a stage
// (both tiles swizzled, 64 columns).
__device__ __forceinline__ void load_chunk(uint16_t* st, const uint16_t* dy, const uint16_t* w, int64_t r0, int64_t f0,
                                           int kc, int64_t N, int64_t D, int64_t F, int tid) {
#pragma unroll
  for (int it = 0; it < kRows * kChunk / 8 / kThreadsCta; ++it) {
    const int idx = tid + kThreadsCta * it, r = idx / 8, c = 8 * (idx % 8);
    const bool valid = r0 + r < N;
    cp_async16(st + wb::swz<kChunk>(r, c), dy + (valid ? (r0 + r) * D + kc * kChunk + c : 0), valid);
  }
  uint16_t* wt = st + kRows * kChunk;
#pragma unroll
  for (int it = 0; it < kChunk * kCols / 8 / kThreadsCta; ++it) {
    const int idx = tid + kThreadsCta * it, k = idx / 8, c = 8 * (idx % 8);
    cp_async16(wt + wb::swz<kCols>(k, c), w + (kc * kChunk + k) * F + f0 + c, true);
  }
  cp_async_commit();
}

// A warp's 16 rows (from row, zero past N) of gate columns f0.. and up columns F + f0.. into gt (rows of
// kGateLd: gate, then up).
__device__ __forceinline__ void load_gate_up(uint16_t* gt, const uint16_t* g, int64_t row, int64_t f0, int64_t N,
                                             int64_t F, int lane) {
#pragma unroll
  for (int it = 0; it < 16 * 2 * kCols / 8 / 32; ++it) {
    const int idx = lane + 32 * it, r = idx / 16, c = 8 * (idx % 16);
    const bool valid = row + r < N;
    const int64_t col = c < kCols ? f0 + c : F + f0 + c - kCols;
    cp_async16(gt + r * kGateLd + c, g + (valid ? (row + r) * 2 * F + col : 0), valid);
  }
  cp_async_commit();
}

__global__ void __launch_bounds__(kThreadsCta, kCtasPerSm)
    swiglu_down_bwd_kernel(uint16_t* dg, const uint16_t* dy, const uint16_t* w, const uint16_t* g, int64_t N, int64_t D,
                           int64_t F) {
  extern __shared__ __align__(16) uint16_t smem[];  // two stages, then [kRows, kGateLd] gate | up
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t f_tiles = F / kCols, bid = blockIdx.x;  // column tiles fastest: a row tile's CTAs share its dy
  const int64_t f0 = (bid % f_tiles) * kCols, r0 = (bid / f_tiles) * kRows, row = r0 + 16 * warp;
  uint16_t* gt = smem + 2 * kStage + 16 * warp * kGateLd;  // this warp's rows
  const int chunks = static_cast<int>(D / kChunk);
  // Copy groups in order: chunk 0, the warp's gate and up, chunk 1, 2, ...
  load_chunk(smem, dy, w, r0, f0, 0, N, D, F, tid);
  load_gate_up(gt, g, row, f0, N, F, lane);
  float acc[kCols / 8][4] = {};
  for (int kc = 0; kc < chunks; ++kc) {
    const bool next = kc + 1 < chunks;
    if (next) load_chunk(smem + ((kc + 1) & 1) * kStage, dy, w, r0, f0, kc + 1, N, D, F, tid);
    if (kc == 0 && next) cp_async_wait<2>();  // chunk 0 in; gate, up and chunk 1 may be pending
    else if (kc == 0 || next) cp_async_wait<1>();
    else cp_async_wait<0>();
    __syncthreads();
    const uint16_t* a = smem + (kc & 1) * kStage;
    const uint16_t* b = a + kRows * kChunk;
#pragma unroll
    for (int k0 = 0; k0 < kChunk; k0 += 16) {
      uint32_t af[4];
      wb::frag_a<kChunk>(af, a, 16 * warp, k0, lane);
#pragma unroll
      for (int n0 = 0; n0 < kCols; n0 += 16) {
        uint32_t bf[4];
        wb::frag_b_kn<kCols>(bf, b, k0, n0, lane);
        wb::mma_bf16(acc[n0 / 8], af, bf[0], bf[1]);
        wb::mma_bf16(acc[n0 / 8 + 1], af, bf[2], bf[3]);
      }
    }
    if (next) __syncthreads();  // the stage is rewritten by the load after next
  }
  cp_async_wait<0>();  // gate and up (one chunk: still pending)
  __syncwarp();
  // The lane's entries (rows gr, gr + 8; columns 8 nt + 2 t, + 1): gradients over gate and up, in place.
  const int gr = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t* pg = reinterpret_cast<uint32_t*>(gt + (gr + 8 * h) * kGateLd + 8 * nt + 2 * t);
      uint32_t* pu = pg + kCols / 2;
      const float2 gv = wb::unpack_bf16(*pg), uv = wb::unpack_bf16(*pu);
      float dg0, du0, dg1, du1;
      swiglu_grad(acc[nt][2 * h], gv.x, uv.x, dg0, du0);
      swiglu_grad(acc[nt][2 * h + 1], gv.y, uv.y, dg1, du1);
      *pg = wb::pack_bf16(dg0, dg1);
      *pu = wb::pack_bf16(du0, du1);
    }
  __syncwarp();
#pragma unroll
  for (int it = 0; it < 16 * 2 * kCols / 8 / 32; ++it) {  // the warp's rows, 16 bytes a lane
    const int idx = lane + 32 * it, r = idx / 16, c = 8 * (idx % 16);
    if (row + r >= N) continue;
    const int64_t col = c < kCols ? f0 + c : F + f0 + c - kCols;
    *reinterpret_cast<uint4*>(dg + (row + r) * 2 * F + col) = *reinterpret_cast<const uint4*>(gt + r * kGateLd + c);
  }
}

}  // namespace

bool swiglu_down_backward_fits(int64_t D, int64_t F, std::initializer_list<const void*> pointers) {
  if (D <= 0 || F <= 0 || D % kChunk != 0 || F % kCols != 0) return false;
  for (const void* p : pointers)
    if (!aligned_to(p, 16)) return false;
  return true;
}

bool swiglu_down_backward_pays(int64_t N, int64_t D, int64_t F, int sms) {
  return D <= 128 && grid_ctas(N, F) >= kCtasPerSm * static_cast<int64_t>(sms);
}

void swiglu_down_backward_bf16_cuda(uint16_t* dg, const uint16_t* dy, const uint16_t* w_down, const uint16_t* g,
                                    int64_t N, int64_t D, int64_t F, cudaStream_t stream) {
  if (N <= 0) return;
  if (!swiglu_down_backward_fits(D, F, {dg, dy, w_down, g}))
    throw_error("swiglu_down_backward: D and F must be multiples of 64 and the pointers 16-byte aligned");
  const int64_t ctas = grid_ctas(N, F);
  if (ctas > 2147483647) throw_error("swiglu_down_backward: too many rows");
  CUDA_CHECK(cudaFuncSetAttribute(swiglu_down_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  swiglu_down_bwd_kernel<<<static_cast<unsigned>(ctas), kThreadsCta, kSmemBytes, stream>>>(dg, dy, w_down, g, N, D, F);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace sb::cuda
