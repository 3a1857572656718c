// tiles.cuh: device helpers shared by the attention kernels (internal), on top of the warp
// products of kernels/attention/common/mma_sm80.cuh: global <-> tile and fragment I/O (cp.async pipelines, bf16 planes,
// fp32 or bf16 inputs), causal masks, exp2 and quad reductions, gate column sums, the PaTH
// block transport of query rows and the gate column bias.
#pragma once
#include "kernels/attention/common/mma_sm80.cuh"
#include "kernels/attention/internal.hpp"

namespace sb::cuda::detail {

// Element `elem` of an fp32 (bf = false) or bf16 (bf = true) input tensor passed as raw bytes.
template <bool bf>
__device__ __forceinline__ const void* input_at(const void* base, int64_t elem) {
  return static_cast<const unsigned char*>(base) + elem * (bf ? 2 : 4);
}

__device__ __forceinline__ float2 load2(const void* base, int64_t idx, bool is_bf16) {
  if (is_bf16) return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(static_cast<const bf16*>(base) + idx));
  return *reinterpret_cast<const float2*>(static_cast<const float*>(base) + idx);
}
__device__ __forceinline__ void store2(void* base, int64_t idx, float x, float y, bool is_bf16) {
  if (is_bf16)
    *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(base) + idx) = __floats2bfloat162_rn(x, y);
  else
    *reinterpret_cast<float2*>(static_cast<float*>(base) + idx) = make_float2(x, y);
}

// acc (16 x 8NT) = rows [m0, m0+16) of a row-strided matrix (rows >= valid read as 0).
template <int NT>
__device__ __forceinline__ void load_frag_global(float (&acc)[NT][4], const void* src, int64_t stride, bool is_bf16,
                                                 int m0, int valid, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = m0 + g + 8 * half;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float2 v = make_float2(0.f, 0.f);
      if (row < valid) v = load2(src, row * stride + nt * 8 + 2 * t, is_bf16);
      acc[nt][2 * half] = v.x;
      acc[nt][2 * half + 1] = v.y;
    }
  }
}

// Rows [m0, m0+16) of a row-strided matrix = mul * acc (rows >= valid skipped).
template <int NT>
__device__ __forceinline__ void store_frag_global(void* dst, int64_t stride, bool is_bf16, int m0, int valid,
                                                  const float (&acc)[NT][4], float mul, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = m0 + g + 8 * half;
    if (row >= valid) continue;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      store2(dst, row * stride + nt * 8 + 2 * t, mul * acc[nt][2 * half], mul * acc[nt][2 * half + 1], is_bf16);
  }
}

// Writes 4 fp32 values at element idx of a tile: split into planes when T.lo, else bf16.
__device__ __forceinline__ void store_quad(const Tile& T, int idx, const float (&v)[4]) {
  if (T.lo) {
    uint2 h, l;
    split_pack(v[0], v[1], h.x, l.x);
    split_pack(v[2], v[3], h.y, l.y);
    *reinterpret_cast<uint2*>(T.hi + idx) = h;
    *reinterpret_cast<uint2*>(T.lo + idx) = l;
  } else {
    *reinterpret_cast<uint2*>(T.hi + idx) = make_uint2(pack_bf16(v[0], v[1]), pack_bf16(v[2], v[3]));
  }
}

// The two halves of a synchronous tile load, so that a kernel can keep several tiles' loads in
// flight at once (the per-block kernels are latency-bound, kernels/DESIGN.md, "Latency of the per-block
// kernels"): tile_issue reads the quads e = e0 + b nthreads (b < kQ) of rows [0, rows) x cols
// [0, cols) of a row-strided source (fp32, or bf16 kept raw) into registers, rows >= valid as 0;
// tile_finish converts and stores them. cols is a multiple of 4; the source rows are 8-byte (bf16)
// / 16-byte (fp32) aligned.
template <int kQ>
__device__ __forceinline__ void tile_issue(float4 (&f)[kQ], int e0, int rows, int cols, const void* src,
                                           int64_t stride, bool src_bf16, int valid, int nthreads) {
  const int per_row = cols / 4, quads = rows * per_row;
#pragma unroll
  for (int b = 0; b < kQ; ++b) {
    const int e = e0 + b * nthreads, r = e / per_row, c = (e - r * per_row) * 4;
    f[b] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (e < quads && r < valid) {
      if (src_bf16) {
        const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const bf16*>(src) + r * stride + c);
        f[b].x = __uint_as_float(raw.x), f[b].y = __uint_as_float(raw.y);
      } else {
        f[b] = *reinterpret_cast<const float4*>(static_cast<const float*>(src) + r * stride + c);
      }
    }
  }
}
template <int kQ>
__device__ __forceinline__ void tile_finish(const Tile& T, const float4 (&f)[kQ], int e0, int rows, int cols,
                                            bool src_bf16, int nthreads) {
  const int per_row = cols / 4, quads = rows * per_row;
#pragma unroll
  for (int b = 0; b < kQ; ++b) {
    const int e = e0 + b * nthreads, r = e / per_row, c = (e - r * per_row) * 4;
    if (e >= quads) break;
    if (src_bf16) {
      const uint32_t x = __float_as_uint(f[b].x), y = __float_as_uint(f[b].y);  // raw bf16 pairs
      const float v[4] = {__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u), __uint_as_float(y << 16),
                          __uint_as_float(y & 0xffff0000u)};
      store_quad(T, r * T.ld + c, v);
    } else {
      const float v[4] = {f[b].x, f[b].y, f[b].z, f[b].w};
      store_quad(T, r * T.ld + c, v);
    }
  }
}

// A whole synchronous tile load (the two halves above), kLoadBatch loads in flight per thread: a
// 64 x 64 tile on 128 threads costs one global latency, not eight.
constexpr int kLoadBatch = 8;
__device__ __forceinline__ void load_tile(const Tile& T, int rows, int cols, const void* src, int64_t stride,
                                          bool src_bf16, int valid, int tid, int nthreads) {
  const int quads = rows * (cols / 4);
  for (int e0 = tid; e0 < quads; e0 += kLoadBatch * nthreads) {
    float4 f[kLoadBatch];
    tile_issue(f, e0, rows, cols, src, stride, src_bf16, valid, nthreads);
    tile_finish(T, f, e0, rows, cols, src_bf16, nthreads);
  }
}

// Packed strictly lower 64 x 64 fp32 matrices (Z, and Minv without its unit diagonal): row r keeps
// its first 4 ceil(r / 4) entries (zeros from the diagonal on), rows one after the other, so every
// stored quad is 16-byte aligned. tri_row(r) = 4 sum_{s < r} ceil(s / 4); tri_row(64) = kTriFloats.
__host__ __device__ constexpr int tri_row(int r) {
  const int q = (r + 3) >> 2, p = (r + 3) & 3;
  return 4 * (2 * q * (q - 1) + p * q);
}
static_assert(tri_row(kL) == kTriFloats, "packed triangle size");

// The same for a 64 x 64 tile from a packed strictly lower matrix: `diag` on the diagonal, zeros
// above it, column c scaled by colscale[c] when colscale is given (tri_finish reads it).
template <int kQ>
__device__ __forceinline__ void tri_issue(float4 (&f)[kQ], int e0, const float* src, int nthreads) {
  constexpr int kQuads = kL * kL / 4;
#pragma unroll
  for (int b = 0; b < kQ; ++b) {
    const int e = e0 + b * nthreads, r = e >> 4, c = (e & 15) * 4;
    f[b] = e < kQuads && c < r ? __ldg(reinterpret_cast<const float4*>(src + tri_row(r) + c))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
template <int kQ>
__device__ __forceinline__ void tri_finish(const Tile& T, const float4 (&f)[kQ], int e0, float diag,
                                           const float* colscale, int nthreads) {
  constexpr int kQuads = kL * kL / 4;
#pragma unroll
  for (int b = 0; b < kQ; ++b) {
    const int e = e0 + b * nthreads, r = e >> 4, c = (e & 15) * 4;
    if (e >= kQuads) break;
    float v[4] = {f[b].x, f[b].y, f[b].z, f[b].w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // constant indices: v stays in registers
      if (c + q == r) v[q] = diag;
      if (colscale) v[q] *= colscale[c + q];
    }
    store_quad(T, r * T.ld + c, v);
  }
}
__device__ __forceinline__ void load_tri_tile(const Tile& T, const float* src, float diag, const float* colscale,
                                              int tid, int nthreads) {
  for (int e0 = tid; e0 < kL * kL / 4; e0 += kLoadBatch * nthreads) {
    float4 f[kLoadBatch];
    tri_issue(f, e0, src, nthreads);
    tri_finish(T, f, e0, diag, colscale, nthreads);
  }
}

// Stores a warp's 16-row tile (rows m0.., 8 NT columns from c0) of a strictly lower matrix packed:
// entries on or above the diagonal that fall in a stored quad are written as zeros.
template <int NT>
__device__ __forceinline__ void store_tri_frag(float* dst, int m0, int c0, const float (&acc)[NT][4], int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = m0 + g + 8 * rr, col = c0 + nt * 8 + 2 * t;
      if ((col & ~3) < row)
        *reinterpret_cast<float2*>(dst + tri_row(row) + col) =
            make_float2(col < row ? acc[nt][2 * rr] : 0.f, col + 1 < row ? acc[nt][2 * rr + 1] : 0.f);
    }
}

// 16-byte asynchronous global -> shared copy; zero-fills instead when !valid.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}

// A whole tile on kT threads: each thread keeps one 8-column chunk and steps down kT / per_row rows
// per copy, fully unrolled, so a copy is one LDGSTS and an address add (the general loop below
// spent ~20 instructions per copy on index arithmetic and the zero-fill predicate: a quarter of the
// PaTH forward's instructions).
template <int kT>
__device__ __forceinline__ void copy_full_tile_async(const Tile& T, int rows, int cols, const bf16* hi,
                                                     const bf16* lo, int64_t stride, int tid) {
  const int per_row = cols / 8, step = kT / per_row, passes = rows * per_row / kT;
  const int r = tid / per_row, c = (tid - r * per_row) * 8;
  const int64_t so = r * stride + c, sstep = step * stride;
  const int d = r * T.ld + c, dstep = step * T.ld;
#pragma unroll 16
  for (int i = 0; i < passes; ++i) cp_async16(T.hi + d + i * dstep, hi + so + i * sstep);
  if (T.lo) {
#pragma unroll 16
    for (int i = 0; i < passes; ++i) {
      if (lo)
        cp_async16(T.lo + d + i * dstep, lo + so + i * sstep);
      else
        *reinterpret_cast<uint4*>(T.lo + d + i * dstep) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// Starts copying rows [0, rows) x cols [0, cols) of bf16 planes (row stride `stride` elements,
// rows >= valid zero-filled) into a tile; the low plane is copied from lo, or zeroed when lo is
// null. Complete after cp_async_wait + __syncthreads.
__device__ __forceinline__ void copy_tile_async(const Tile& T, int rows, int cols, const bf16* hi, const bf16* lo,
                                                int64_t stride, int valid, int tid, int nthreads) {
  const int per_row = cols / 8;
  for (int e = tid; e < rows * per_row; e += nthreads) {
    const int r = e / per_row, c = (e - r * per_row) * 8;
    const bool ok = r < valid;
    const int64_t so = ok ? r * stride + c : 0;
    cp_async16(T.hi + r * T.ld + c, hi + so, ok);
    if (T.lo) {
      if (lo)
        cp_async16(T.lo + r * T.ld + c, lo + so, ok);
      else
        *reinterpret_cast<uint4*>(T.lo + r * T.ld + c) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// copy_tile_async with copy_full_tile_async for whole tiles on 128 threads. Only the forward kernel
// uses it: in the fused backward the unrolled copies cost more (its instruction footprint)
// than their index arithmetic saved.
__device__ __forceinline__ void copy_tile_async_fast(const Tile& T, int rows, int cols, const bf16* hi,
                                                     const bf16* lo, int64_t stride, int valid, int tid,
                                                     int nthreads) {
  const int per_row = cols / 8;
  if (valid >= rows && nthreads == 128 && (rows * per_row) % 128 == 0 && 128 % per_row == 0)
    copy_full_tile_async<128>(T, rows, cols, hi, lo, stride, tid);
  else
    copy_tile_async(T, rows, cols, hi, lo, stride, valid, tid, nthreads);
}

// Rows [0, rows) of a [*, Dh] operand of the input dtype into a tile: bf16 asynchronously, fp32
// synchronously (split into planes).
template <bool kBf16, bool kFast = false>
__device__ __forceinline__ void load_input_tile(const Tile& T, int rows, int Dh, const void* src, int64_t stride,
                                                int valid, int tid) {
  if constexpr (kBf16 && kFast)
    copy_tile_async_fast(T, rows, Dh, static_cast<const bf16*>(src), nullptr, stride, valid, tid, blockDim.x);
  else if constexpr (kBf16)
    copy_tile_async(T, rows, Dh, static_cast<const bf16*>(src), nullptr, stride, valid, tid, blockDim.x);
  else
    load_tile(T, rows, Dh, src, stride, false, valid, tid, blockDim.x);
}
template <bool kFast = false>
__device__ __forceinline__ void load_planes_tile(const Tile& T, int rows, int cols, const uint16_t* hi,
                                                 const uint16_t* lo, int64_t off, int tid) {
  const bf16* h = reinterpret_cast<const bf16*>(hi) + off;
  const bf16* l = lo ? reinterpret_cast<const bf16*>(lo) + off : nullptr;
  if constexpr (kFast)
    copy_tile_async_fast(T, rows, cols, h, l, cols, rows, tid, blockDim.x);
  else
    copy_tile_async(T, rows, cols, h, l, cols, rows, tid, blockDim.x);
}

// Zeroes accumulator entries above the diagonal of the query rows: keeps (row, col) with
// col <= qoff + row (row = m0 + g (+8) local to the tile, col = 8 nt + 2t (+1)).
template <int NT>
__device__ __forceinline__ void mask_lower(float (&acc)[NT][4], int qoff, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = qoff + g + ((e & 2) ? 8 : 0), col = nt * 8 + 2 * t + (e & 1);
      if (col > row) acc[nt][e] = 0.f;
    }
}

// 2^x on the special-function unit (ex2.approx.ftz: ~2 ulp, subnormal results flushed to 0, 2^-inf =
// 0). exp2f adds subnormal handling (three more instructions per element) the probabilities don't need.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Reductions over the 4 lanes that share a row (lanes 4g .. 4g+3).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// Column sums of a warp's 16 x 64 tile: returns, in lanes 0..3, the sums of columns 8 nt + 2t (+1)
// for each nt (other lanes hold partial garbage). Used for the gate gradient.
template <int NT>
__device__ __forceinline__ void column_sums(const float (&acc)[NT][4], float (&out)[NT][2]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float x = acc[nt][c] + acc[nt][c + 2];
      x += __shfl_xor_sync(0xffffffffu, x, 4);
      x += __shfl_xor_sync(0xffffffffu, x, 8);
      x += __shfl_xor_sync(0xffffffffu, x, 16);
      out[nt][c] = x;
    }
}

// dst[col] += sign * (column sum of a warp's 16 x 8NT tile) for the columns col < valid (fp32
// atomics from lanes 0..3). Used for the gate gradient.
template <int NT>
__device__ __forceinline__ void add_column_sums(float* dst, const float (&acc)[NT][4], float sign, int64_t valid,
                                                int lane) {
  float cs[NT][2];
  column_sums(acc, cs);
  if ((lane >> 2) != 0) return;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int col = nt * 8 + 2 * (lane & 3) + c;
      if (col < valid) atomicAdd(dst + col, sign * cs[nt][c]);
    }
}

// X <- X P_m with block m's transport operands (tiles `cb` bytes into their pipeline stage): dense
// X - X C, or factored X - (X W^T) Y; in split precision unless `split` is false (gradient chains
// with bf16 inputs: one bf16 plane per operand).
template <int Dh>
__device__ __forceinline__ void transport_rows(float (&X)[Dh / 8][4], const Tile& C, const Tile& W, const Tile& Y,
                                               int cb, bool dense, int lane, bool split = true) {
  constexpr int NTD = Dh / 8, KTD = Dh / 16;
  if (dense) {
    float Tm[NTD][4];
    zero(Tm);
    mma_rA<KTD, NTD, BL::KN>(Tm, X, 1.f, shifted(C, cb), 0, 0, split, lane);
#pragma unroll
    for (int nt = 0; nt < NTD; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) X[nt][e] -= Tm[nt][e];
  } else {
    float T1[8][4];
    zero(T1);
    mma_rA<KTD, 8, BL::NK>(T1, X, 1.f, shifted(W, cb), 0, 0, split, lane);   // X W^T
    mma_rA<4, NTD, BL::KN>(X, T1, -1.f, shifted(Y, cb), 0, 0, split, lane);  // X -= (X W^T) Y
  }
}

// Fills colb[j] = (G_{k0+j} - gref) * log2e for the key block starting at k0 (0 past T / no gate).
__device__ __forceinline__ void fill_colbias(float* colb, const double* gcum_head, int64_t k0, int64_t T, double gref,
                                             int tid) {
  for (int c = tid; c < kL; c += blockDim.x) {
    const int64_t j = k0 + c;
    colb[c] = (gcum_head && j < T) ? static_cast<float>(gcum_head[j] - gref) * kLog2e : 0.f;
  }
}

}  // namespace sb::cuda::detail
