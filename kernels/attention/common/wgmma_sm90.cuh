// wgmma_sm90.cuh: Hopper warpgroup tensor-core building blocks (internal; real instructions only in
// sm_90a code, SB_WGMMA): 128-byte-swizzled bf16 tiles in shared memory and their cp.async loads,
// shared-memory matrix descriptors (K-major and MN-major operands), wgmma m64n64k16 / m64n32k16
// bf16 products with A from shared memory or registers (m64n128k16 with A from registers), the
// fences around them, TMA loads on mbarriers and fp32 TMA reductions from shared to global memory.
// One warpgroup (4 warps) computes a 64 x N tile; warp w holds rows 16w .. 16w+15 in the mma.sync accumulator layout.
#pragma once
#include "kernels/attention/common/tiles.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SB_WGMMA 1
#else
#define SB_WGMMA 0
#endif

namespace sb::cuda::detail {

// Swizzled tile: [rows][cols] bf16 (cols a multiple of 64) as panels of 64 columns, each panel
// rows x 128 bytes; element (r, c) at byte (c / 64) * rows * 128 + r * 128 + ((c % 64 / 8) ^ (r % 8)) * 16
// + (c % 8) * 2. The base must be 1024-byte aligned (the hardware swizzles address bits 4-6 with 7-9).
__host__ __device__ constexpr int sw_bytes(int rows, int cols) { return rows * cols * 2; }

__device__ __forceinline__ uint32_t sw_offset(int r, int c, int rows) {
  return (c >> 6) * rows * 128 + r * 128 + ((((c >> 3) & 7) ^ (r & 7)) << 4) + (c & 7) * 2;
}

// Starts copying rows [0, rows) x cols [0, cols) of a bf16 matrix (row stride `stride` elements;
// rows >= valid zero-filled) into a swizzled tile. Complete after cp_async_wait, fence_async_smem
// and a barrier.
__device__ __forceinline__ void sw_copy_async(void* dst, int rows, int cols, const bf16* src, int64_t stride,
                                              int valid, int tid, int nthreads) {
  const int per_row = cols / 8;
  for (int e = tid; e < rows * per_row; e += nthreads) {
    const int r = e / per_row, c = (e - r * per_row) * 8;
    const bool ok = r < valid;
    cp_async16(static_cast<unsigned char*>(dst) + sw_offset(r, c, rows), src + (ok ? r * stride + c : 0), ok);
  }
}

// sw_copy_async of a whole tile (all rows valid) on 256 threads with the index arithmetic hoisted:
// thread tid copies the chunks tid + 256 i, the rows r + step i of one column c, whose swizzled
// offsets differ by step rows (step is a multiple of 8: the swizzle phase r & 7 stays).
template <int kRows, int kCols>
__device__ __forceinline__ void sw_copy_full_async(void* dst, const bf16* src, int64_t stride, int tid) {
  constexpr int per_row = kCols / 8, step = 256 / per_row, passes = kRows * per_row / 256;
  static_assert(step % 8 == 0 && passes >= 1 && kRows % step == 0, "whole passes of 256 chunks");
  const int r = tid / per_row, c = (tid % per_row) * 8;
  unsigned char* d = static_cast<unsigned char*>(dst) + sw_offset(r, c, kRows);
  const bf16* s = src + r * stride + c;
#pragma unroll
  for (int i = 0; i < passes; ++i) cp_async16(d + i * step * 128, s + i * step * stride);
}

// A tile of kRows x kCols through sw_copy_full_async when all rows are valid, else sw_copy_async.
template <int kRows, int kCols>
__device__ __forceinline__ void sw_copy_tile_async(void* dst, const bf16* src, int64_t stride, int valid, int tid) {
  if (valid >= kRows)
    sw_copy_full_async<kRows, kCols>(dst, src, stride, tid);
  else
    sw_copy_async(dst, kRows, kCols, src, stride, valid, tid, 256);
}

// Stores the packed bf16 pairs of an A fragment (rows m0 + g (+8) of k-tile kk, as pack_a makes
// them) into a swizzled tile with 64 columns.
__device__ __forceinline__ void sw_store_a(void* tile, int rows, int m0, int kk, const uint32_t (&a)[4], int lane) {
  const int g = lane >> 2, t = lane & 3;
  unsigned char* b = static_cast<unsigned char*>(tile);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = m0 + g + ((i & 1) ? 8 : 0), c = 16 * kk + ((i & 2) ? 8 : 0) + 2 * t;
    *reinterpret_cast<uint32_t*>(b + sw_offset(r, c, rows)) = a[i];
  }
}

// 64-bit shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride
// byte offsets (all >> 4).
__device__ __forceinline__ uint64_t wg_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint32_t a = smem_addr(p);
  return static_cast<uint64_t>((a & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}
// K-major operand (M or N rows of a swizzled tile, K along its columns): rows [row0, row0 + 64) and
// k-tile kk (columns 16kk .. 16kk+15). 8-row groups lie 1024 bytes apart.
__device__ __forceinline__ uint64_t desc_kmajor(const void* tile, int rows, int row0, int kk) {
  const unsigned char* b = static_cast<const unsigned char*>(tile);
  return wg_desc(b + (kk >> 2) * rows * 128 + row0 * 128 + (kk & 3) * 32, 16, 1024);
}
// MN-major operand (K along the rows of a swizzled tile, M or N along its columns): k-tile kk (rows
// 16kk .. 16kk+15), columns from col0 (a multiple of 32, the 32 or 64 columns within one panel).
// 8-row groups along K lie 1024 bytes apart; the 64-column atom stride is never used by an n64 /
// n32 / m64 product (set to the same value). A 32-column offset moves the start by 64 bytes within
// the 128-byte rows: the swizzle (address bits 4-6 ^ 7-9) still lands on the stored chunks.
__device__ __forceinline__ uint64_t desc_mnmajor(const void* tile, int rows, int col0, int kk) {
  const unsigned char* b = static_cast<const unsigned char*>(tile);
  return wg_desc(b + (col0 >> 6) * rows * 128 + (col0 & 63) * 2 + kk * 2048, 1024, 1024);
}

// MN-major operand 128 columns wide (both 64-column panels of a 128-column tile): k-tile kk; the
// panels (the layout's MN atoms, leading byte offset) lie rows * 128 bytes apart.
__device__ __forceinline__ uint64_t desc_mnmajor128(const void* tile, int rows, int kk) {
  return wg_desc(static_cast<const unsigned char*>(tile) + kk * 2048, rows * 128, 1024);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes generic-proxy shared-memory writes (st.shared, cp.async) visible to wgmma (async proxy);
// a barrier must follow before another warp's wgmma reads them.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving accumulator accesses across a wgmma wait (or fence).
template <int NT>
__device__ __forceinline__ void wg_hold(float (&d)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}

#define SB_WG_D32(d)                                                                                              \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),         \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),     \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),     \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),     \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define SB_WG_REGS32                                                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"

// d (64 x 64 over the warpgroup) += A (64 x 16) B (16 x 64), both from shared memory; kTA / kTB:
// operand MN-major (1) or K-major (0).
template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_ss(float (&d)[8][4], uint64_t da, uint64_t db) {
#if SB_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " SB_WG_REGS32 ", %32, %33, p, 1, 1, %35, %36;\n}\n"
      : SB_WG_D32(d)
      : "l"(da), "l"(db), "r"(1), "n"(kTA), "n"(kTB));
#endif
}
// d (64 x 32) += A (64 x 16) B (16 x 32), both from shared memory.
template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_ss(float (&d)[4][4], uint64_t da, uint64_t db) {
#if SB_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
      "%12, %13, %14, %15}, %16, %17, p, 1, 1, %19, %20;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3])
      : "l"(da), "l"(db), "r"(1), "n"(kTA), "n"(kTB));
#endif
}
// d (64 x 64) += A B with A from registers (this warp's 16 rows, mma.sync A-fragment layout).
template <int kTB>
__device__ __forceinline__ void wgmma_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db) {
#if SB_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " SB_WG_REGS32
      ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : SB_WG_D32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(kTB));
#endif
}
// d (64 x 128) += A B with A from registers and B 128 columns wide (desc_mnmajor128).
template <int kTB>
__device__ __forceinline__ void wgmma_rs(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db) {
#if SB_WGMMA
  float(&d0)[8][4] = *reinterpret_cast<float(*)[8][4]>(&d[0]);
  float(&d1)[8][4] = *reinterpret_cast<float(*)[8][4]>(&d[8]);
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : SB_WG_D32(d0), SB_WG_D32(d1)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(kTB));
#endif
}
#undef SB_WG_D32
#undef SB_WG_REGS32

// TMA loads (async proxy) into shared memory, completed on an mbarrier: the issuing thread arms the
// stage's barrier with the bytes it expects (mbar_expect_tx), then issues the loads; every reader
// waits for the barrier's phase (mbar_wait, parity = the stage's use count % 2). The barrier is
// initialised by one thread (count 1), then fence_mbar_init and a CTA barrier before any use.
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
#if SB_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}
__device__ __forceinline__ void fence_mbar_init() {
#if SB_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
#if SB_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if SB_WGMMA
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}
// The box of a 4-D tensor map at (c0, c1, c2, c3) into dst (1024-byte aligned with a swizzle).
__device__ __forceinline__ void tma_load_4d(void* dst, const void* map, uint64_t* bar, int c0, int c1, int c2, int c3) {
#if SB_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}
// The box of a 2-D tensor map at (c0, c1) into dst (1024-byte aligned with a swizzle).
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, uint64_t* bar, int c0, int c1) {
#if SB_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
      "[%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
#endif
}
// The box of a 1-D tensor map from element c0 into dst (128-byte aligned).
__device__ __forceinline__ void tma_load_1d(void* dst, const void* map, uint64_t* bar, int c0) {
#if SB_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];\n" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0)
      : "memory");
#endif
}

// TMA reductions (async proxy): the box of dq_map (with_dq_map: a 4-D view of an fp32 [rows, Dh]
// matrix) at (column c0, rows 16 r16 ..) += the shared tile src (the box's bytes in the map's swizzle,
// 1024-byte aligned), each element a relaxed gpu-scope atomic add. The issuing thread commits its
// reductions as a group and, before src is written again, waits until its groups have been read
// (bulk_wait_read).
__device__ __forceinline__ void tma_reduce_add_rows16(const void* map, const float* src, int c0, int r16) {
#if SB_WGMMA
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, 0, 0, %3}], [%1];\n" ::"l"(
          map),
      "r"(smem_addr(src)), "r"(c0), "r"(r16)
      : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if SB_WGMMA
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait_read() {
#if SB_WGMMA
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

// tensor(r0 + row, c0 + col) += acc for this warp's 16 x 8NT accumulator (NT a multiple of 4; r0 a
// multiple of 16), through its staging tile `stage` (NT / 4 panels of [16 rows][32 floats], 2 KB
// each, 1024-byte aligned) and one TMA reduction per panel. dq_map's boxes put fragment row r at
// staging row 2 (r % 8) + r / 8 under the 128-byte swizzle (16-byte chunk ^ staging row % 8), so a
// lane's rows g and g + 8 sit in different chunks and each half-warp's float2 stores hit 16 distinct
// 8-byte slots: conflict-free (2 wavefronts per store; with a 2-D map rows g and g + 8 shared a
// chunk: 4x the wavefronts). Warp-local: first waits until the warp's
// previous reductions have read `stage`. Lane 0 issues; it must bulk_wait_read before the kernel ends.
template <int NT>
__device__ __forceinline__ void tma_add_frag(const void* map, int c0, int r0, const float (&acc)[NT][4],
                                             float* stage, int lane) {
  static_assert(NT % 4 == 0, "whole 32-column panels");
  const int g = lane >> 2, t = lane & 3;
  if (lane == 0) bulk_wait_read();
  __syncwarp();
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int s = 2 * g + half, chunk = 2 * (nt & 3) + (t >> 1);
      *reinterpret_cast<float2*>(stage + (nt >> 2) * 512 + s * 32 + ((chunk ^ (s & 7)) << 2) + 2 * (t & 1)) =
          make_float2(acc[nt][2 * half], acc[nt][2 * half + 1]);
    }
  fence_async_smem();
  __syncwarp();
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < NT / 4; ++j) tma_reduce_add_rows16(map, stage + j * 512, c0 + 32 * j, r0 / 16);
    bulk_commit();
  }
}

// The first 1024-byte aligned address at or after p (dynamic shared memory is only 16-aligned).
__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {
  const uint32_t a = smem_addr(p);
  return p + ((1024u - (a & 1023u)) & 1023u);
}

}  // namespace sb::cuda::detail
