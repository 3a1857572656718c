// bf16_warp_ops.cuh: bf16 tensor-core building blocks of the warp-per-head short kernels
// (softmax/softmax_short_bf16_sm80.cu; internal): ldmatrix of b16 tiles (plain and transposed),
// mma.sync m16n8k16 with fp32 accumulation, bf16 pairs packed and unpacked, the A and B fragments of
// row-major tiles (unpadded, 16-byte chunks XOR-swizzled), and a head's rows staged into them by cp.async.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace sb::cuda::detail::warp_bf16 {

// ldmatrix .x4 of b16 8 x 8 matrices: lane L gives the address of row L % 8 of matrix L / 8 and gets, in r[e], the
// pair (row L / 4, columns 2 (L % 4), + 1) of matrix e, or with .trans the pair (rows 2 (L % 4), + 1; column L / 4).
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const uint16_t* p) {
  const float* row = reinterpret_cast<const float*>(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(row))));
}
__device__ __forceinline__ void ldsm4_t(uint32_t (&r)[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(p))));
}
// d += A B over one 16 x 8 x 16 tile: a0..a3 = A's (g, 2t), (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8) pairs, b0, b1 =
// B's (2t, g), (2t + 8, g) pairs down a column (g = lane / 4, t = lane % 4); d as Frag's entries.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float2 unpack_bf16(uint32_t u) {
  return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

// Element (r, c) of a tile of rows of Cols (16, 32 or 64) bf16 with no padding: row r's 16-byte chunk c / 8 is stored
// at chunk (c / 8) ^ ((r / (8 / C)) % C), C = Cols / 8, so that one chunk of 8 consecutive rows from a multiple of 8
// (an ldmatrix matrix) lies on 8 distinct bank groups.
template <int Cols>
__device__ __forceinline__ int swz(int r, int c) {
  constexpr int C = Cols / 8, R = 8 / C;  // chunks a row, rows a 128-byte line
  return r * Cols + ((((c >> 3) ^ ((r / R) % C))) << 3) + (c & 7);
}

// A's fragment of rows r0.., columns c0.. of a tile (swz) stored by rows; of rows m0.., columns k0.. of the transpose
// of such a tile (ldsm4_t).
template <int Cols>
__device__ __forceinline__ void frag_a(uint32_t (&a)[4], const uint16_t* tile, int r0, int c0, int lane) {
  ldsm4(a, tile + swz<Cols>(r0 + (lane & 7) + 8 * ((lane >> 3) & 1), c0 + 8 * (lane >> 4)));
}
template <int Cols>
__device__ __forceinline__ void frag_a_t(uint32_t (&a)[4], const uint16_t* tile, int m0, int k0, int lane) {
  ldsm4_t(a, tile + swz<Cols>(k0 + (lane & 7) + 8 * (lane >> 4), m0 + 8 * ((lane >> 3) & 1)));
}
// B's fragments of two n-tiles (b[0], b[1]: columns n0..; b[2], b[3]: n0 + 8..) over k-rows k0..k0 + 15: from a tile
// (swz) that holds B^T by rows (row n, column k: K in Q K^T) or B itself by rows (row k, column n: V in P V).
template <int Cols>
__device__ __forceinline__ void frag_b_nk(uint32_t (&b)[4], const uint16_t* tile, int n0, int k0, int lane) {
  ldsm4(b, tile + swz<Cols>(n0 + (lane & 7) + 8 * (lane >> 4), k0 + 8 * ((lane >> 3) & 1)));
}
template <int Cols>
__device__ __forceinline__ void frag_b_kn(uint32_t (&b)[4], const uint16_t* tile, int k0, int n0, int lane) {
  ldsm4_t(b, tile + swz<Cols>(k0 + (lane & 7) + 8 * ((lane >> 3) & 1), n0 + 8 * (lane >> 4)));
}

// Rows t < T of a [T, Dh] head tensor (row t at p + t ld) into a [32, Dh] tile (swz) by 16-byte cp.async copies, all
// in flight together; rows past T are zero-filled (a copy of 0 source bytes).
template <int Dh>
__device__ __forceinline__ void stage_rows(uint16_t* tile, const void* p, int64_t ld, int T, int lane) {
  constexpr int C = Dh / 8;  // 16-byte chunks a row; 32 C chunks, C a lane
#pragma unroll
  for (int it = 0; it < C; ++it) {
    const int idx = lane + 32 * it, t = idx / C, c = 8 * (idx % C);
    const bool valid = t < T;
    const uint16_t* src = static_cast<const uint16_t*>(p) + (valid ? t * ld + c : 0);
    uint16_t* dst = tile + swz<Dh>(t, c);
    asm volatile(
        "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
        "l"(src), "r"(valid ? 16 : 0));
  }
}
__device__ __forceinline__ void staged() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncwarp();
}

}  // namespace sb::cuda::detail::warp_bf16
