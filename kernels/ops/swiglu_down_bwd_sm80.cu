// swiglu_down_bwd_sm80.cu: the SwiGLU MLP's down-projection d(input) and the SwiGLU backward in one
// kernel (swiglu_down_backward_bf16_cuda, kernels/ops/ops_bf16.hpp): ds = dy w_down stays in the CTA
// (fp32, never stored), so a step reads the [N, 2F] pre-activation and writes its gradient once, and
// the [N, F] ds is neither written nor read back. mma.sync m16n8k16 bf16 tiles (warp_bf16's fragments).
#include <cuda_bf16.h>

#include "kernels/attention/common/bf16_warp_ops.cuh"
#include "kernels/ops/launch.cuh"
#include "kernels/ops/ops_bf16.hpp"

namespace sb::cuda {
namespace {

using namespace ops_detail;
namespace wb = detail::warp_bf16;

// A CTA: 64 rows x 64 of the F columns (both halves of g: gate and up), four warps of 16 rows; K = D
// in chunks of 64 through two shared-memory stages, the CTA's gate and up columns beside them, all by
// cp.async (g's copies in flight during the first chunk's products); then ds through shared memory
// (fp32) so that every global access of the epilogue is 16 bytes.
constexpr int kRows = 64, kCols = 64, kChunk = 64, kWarps = 4, kThreadsCta = 32 * kWarps;
constexpr int kStage = kRows * kChunk + kChunk * kCols;  // bf16 elements a stage: dy's chunk, then w's
constexpr int kDsLd = kCols + 8;  // ds rows in shared memory (floats): a quad's float2 stores on distinct banks
constexpr int kGroups = kRows * kCols / 8 / kThreadsCta;  // 8-column groups of the epilogue a thread
static_assert(2 * kStage * 2 >= kRows * kDsLd * 4, "ds fits in the stages");

// Eight bf16 of a 16-byte word, widened (exact).
__device__ __forceinline__ void widen8(const uint4& q, float (&v)[8]) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k)
    v[2 * k] = __uint_as_float(w[k] << 16), v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
      "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

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
  commit();
}

// The CTA's gate columns f0.. and up columns F + f0.. of rows r0.. into gt ([kRows, 2 kCols]: gate, then up).
__device__ __forceinline__ void load_gate_up(uint16_t* gt, const uint16_t* g, int64_t r0, int64_t f0, int64_t N,
                                             int64_t F, int tid) {
#pragma unroll
  for (int it = 0; it < 2 * kRows * kCols / 8 / kThreadsCta; ++it) {
    const int idx = tid + kThreadsCta * it, r = idx / 16, c = 8 * (idx % 16);
    const bool valid = r0 + r < N;
    cp_async16(gt + r * 2 * kCols + c, g + (valid ? (r0 + r) * 2 * F + (c < kCols ? f0 + c : F + f0 + c - kCols) : 0),
               valid);
  }
  commit();
}

__global__ void __launch_bounds__(kThreadsCta, 4)
    swiglu_down_bwd_kernel(uint16_t* dg, const uint16_t* dy, const uint16_t* w, const uint16_t* g, int64_t N, int64_t D,
                           int64_t F) {
  __shared__ __align__(16) uint16_t smem[2 * kStage];
  __shared__ __align__(16) uint16_t gt[kRows * 2 * kCols];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t f_tiles = F / kCols, bid = blockIdx.x;  // column tiles fastest: a row tile's CTAs share its dy
  const int64_t f0 = (bid % f_tiles) * kCols, r0 = (bid / f_tiles) * kRows;
  const int chunks = static_cast<int>(D / kChunk);
  // Copy groups in order: chunk 0, gate and up, chunk 1, 2, ...
  load_chunk(smem, dy, w, r0, f0, 0, N, D, F, tid);
  load_gate_up(gt, g, r0, f0, N, F, tid);
  float acc[kCols / 8][4] = {};
  for (int kc = 0; kc < chunks; ++kc) {
    const bool next = kc + 1 < chunks;
    if (next) load_chunk(smem + ((kc + 1) & 1) * kStage, dy, w, r0, f0, kc + 1, N, D, F, tid);
    if (kc == 0 && next) wait_pending<2>();  // chunk 0 in; gate, up and chunk 1 may be pending
    else if (kc == 0 || next) wait_pending<1>();
    else wait_pending<0>();
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
    __syncthreads();  // the stage is rewritten by the load after next (or by ds)
  }
  wait_pending<0>();                           // gate and up (one chunk: still pending)
  float* ds = reinterpret_cast<float*>(smem);  // [kRows, kDsLd]
  const int gr = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<float2*>(ds + (16 * warp + gr + 8 * h) * kDsLd + 8 * nt + 2 * t) =
          make_float2(acc[nt][2 * h], acc[nt][2 * h + 1]);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kGroups; ++i) {  // group q: row q / 8, columns 8 (q % 8) ..
    const int q = tid + kThreadsCta * i, r = q / 8, c = 8 * (q % 8);
    if (r0 + r >= N) continue;
    float gv[8], uv[8], dgv[8], duv[8];
    widen8(*reinterpret_cast<const uint4*>(gt + r * 2 * kCols + c), gv);
    widen8(*reinterpret_cast<const uint4*>(gt + r * 2 * kCols + kCols + c), uv);
    const float* d = ds + r * kDsLd + c;
#pragma unroll
    for (int e = 0; e < 8; ++e) swiglu_grad(d[e], gv[e], uv[e], dgv[e], duv[e]);
    uint16_t* row = dg + (r0 + r) * 2 * F + f0 + c;
    store_vec<8>(row, dgv);
    store_vec<8>(row + F, duv);
  }
}

}  // namespace

bool swiglu_down_backward_fits(int64_t D, int64_t F, std::initializer_list<const void*> pointers) {
  if (D <= 0 || F <= 0 || D % kChunk != 0 || F % kCols != 0) return false;
  for (const void* p : pointers)
    if (!aligned_to(p, 16)) return false;
  return true;
}

void swiglu_down_backward_bf16_cuda(uint16_t* dg, const uint16_t* dy, const uint16_t* w_down, const uint16_t* g,
                                    int64_t N, int64_t D, int64_t F, cudaStream_t stream) {
  if (N <= 0) return;
  if (!swiglu_down_backward_fits(D, F, {dg, dy, w_down, g}))
    throw_error("swiglu_down_backward: D and F must be multiples of 64 and the pointers 16-byte aligned");
  const int64_t ctas = (N + kRows - 1) / kRows * (F / kCols);
  if (ctas > 2147483647) throw_error("swiglu_down_backward: too many rows");
  swiglu_down_bwd_kernel<<<static_cast<unsigned>(ctas), kThreadsCta, 0, stream>>>(dg, dy, w_down, g, N, D, F);
  SB_CUDA_CHECK_LAUNCH();
}

}  // namespace sb::cuda
