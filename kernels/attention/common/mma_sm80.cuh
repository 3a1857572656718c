// mma_sm80.cuh: warp-level building blocks of the attention kernels (internal): bf16 shared-memory
// tiles with an optional low-order plane and their carving, ldmatrix + mma.sync m16n8k16 warp products
// (operands from shared memory in either orientation, or from fp32 accumulators in registers),
// "split" products (hi*hi + hi*lo + lo*hi: ~2^-16 relative error) for fp32 accuracy, fragment stores
// and fp32 fragment atomics. Fragment layout (g = lane / 4, t = lane % 4):
//   C/accumulator 16x8: c0,c1 = (row g, cols 2t, 2t+1), c2,c3 = (row g+8, same cols)
//   A 16x16: a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B 16x8:  b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace sb::cuda::detail {

using bf16 = __nv_bfloat16;
constexpr int kL = 64;  // Householder / key block and the default query block
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__host__ __device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// A row-major [rows][ld] bf16 tile in shared memory; lo (may be null) holds x - float(hi).
struct Tile {
  bf16* hi = nullptr;
  bf16* lo = nullptr;
  int ld = 0;
};

// The same tile `bytes` further on (pipeline stage buffers are laid out back to back).
__host__ __device__ inline Tile shifted(const Tile& t, int bytes) {
  Tile s = t;
  if (bytes) {
    s.hi = reinterpret_cast<bf16*>(reinterpret_cast<unsigned char*>(t.hi) + bytes);
    if (t.lo) s.lo = reinterpret_cast<bf16*>(reinterpret_cast<unsigned char*>(t.lo) + bytes);
  }
  return s;
}

// Bytes of a tile with `cols` columns padded by 8 (16 bytes: conflict-free ldmatrix rows).
__host__ __device__ inline int tile_bytes(int rows, int cols, bool lo) {
  return rows * (cols + 8) * 2 * (lo ? 2 : 1);
}

// Carves tiles out of dynamic shared memory; with base == nullptr it only counts (host sizing).
struct Carve {
  unsigned char* base = nullptr;
  int off = 0;
  __host__ __device__ Tile tile(int rows, int cols, bool lo) {
    Tile t;
    t.ld = cols + 8;
    const int plane = rows * t.ld * 2;
    if (base) {
      t.hi = reinterpret_cast<bf16*>(base + off);
      t.lo = lo ? reinterpret_cast<bf16*>(base + off + plane) : nullptr;
    }
    off += plane * (lo ? 2 : 1);
    return t;
  }
  __host__ __device__ float* floats(int n) {
    float* p = base ? reinterpret_cast<float*>(base + off) : nullptr;
    off += ((n * 4 + 15) / 16) * 16;
    return p;
  }
};

// The key-side tiles of the fused forward and PaTH backward: the own block (K, V and, for PaTH,
// W, Y, Z) overlaid on the key-block pipeline (Kb, Vb and the transport operands Cb dense or Wb, Yb
// factored; stage 0 here, stage s is s * stage_bytes further on: see shifted(); no run-time
// indexed arrays, they would go to local memory).
struct KeyTiles {
  Tile K, V, W, Y, Z;
  Tile Kb, Vb, Cb, Wb, Yb;
  int stage_bytes = 0;
};

// Carves KeyTiles at the carver's position and leaves it after the larger of the two overlays.
__host__ __device__ inline KeyTiles carve_key_tiles(Carve& cv, int Dh, bool f32, bool path, bool dense,
                                                    int stages) {
  KeyTiles s;
  const int start = cv.off;
  s.K = cv.tile(kL, Dh, f32);
  s.V = cv.tile(kL, Dh, f32);
  if (path) {
    s.W = cv.tile(kL, Dh, true);
    s.Y = cv.tile(kL, Dh, true);
    s.Z = cv.tile(kL, kL, f32);
  }
  const int own_end = cv.off;
  cv.off = start;
  s.Kb = cv.tile(kL, Dh, f32);
  s.Vb = cv.tile(kL, Dh, f32);
  if (path && dense) s.Cb = cv.tile(Dh, Dh, true);
  if (path && !dense) s.Wb = cv.tile(kL, Dh, true), s.Yb = cv.tile(kL, Dh, true);
  s.stage_bytes = cv.off - start;
  cv.off = start + stages * s.stage_bytes;
  cv.off = cv.off > own_end ? cv.off : own_end;
  return s;
}

// The Dh x Dh tile (hi / lo) of a superchunk transport in pipeline stage `cb`: the dense transport
// tile C, or for factored transports (Dh = 128) the W and Y tiles, which lie back to back and are
// exactly as large (64 rows of Dh with both planes, twice).
__host__ __device__ inline Tile superchunk_tile(const KeyTiles& s, int Dh, bool dense, int cb) {
  if (dense) return shifted(s.Cb, cb);
  Tile t = shifted(s.Wb, cb);
  t.ld = Dh + 8;
  t.lo = t.hi + Dh * t.ld;
  return t;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t bits(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ uint32_t pack_bf16(float x, float y) { return bits(__floats2bfloat162_rn(x, y)); }
// hi = bf16(x, y); lo = bf16 of the remainders.
__device__ __forceinline__ void split_pack(float x, float y, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  const float2 hf = __bfloat1622float2(h);
  hi = bits(h);
  lo = pack_bf16(x - hf.x, y - hf.y);
}

// Operand layouts of B (K x N) in shared memory: NK = stored [n][k] (e.g. keys for Q K^T),
// KN = stored [k][n] (plain row-major).
enum class BL { NK, KN };

// B fragments of k rows [k0, k0+16) and n columns [n0, n0+16): b[0..1] for n-tile n0, b[2..3] for n0+8.
template <BL kB>
__device__ __forceinline__ void load_b2(uint32_t (&b)[4], const bf16* base, int ld, int k0, int n0, int lane) {
  const int l = lane & 7, mat = lane >> 3;
  if constexpr (kB == BL::NK) {
    const int n = n0 + l + ((mat & 2) ? 8 : 0);
    const int k = k0 + ((mat & 1) ? 8 : 0);
    ldsm_x4(b, base + n * ld + k);
  } else {
    const int k = k0 + l + ((mat & 1) ? 8 : 0);
    const int n = n0 + ((mat & 2) ? 8 : 0);
    ldsm_x4_t(b, base + k * ld + n);
  }
}

// A fragment of the 16x16 block at (m0, k0) of A; kTrans: A stored [k][m] (A^T row-major).
template <bool kTrans>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* base, int ld, int m0, int k0, int lane) {
  const int l = lane & 7, mat = lane >> 3;
  if constexpr (!kTrans) {
    const int m = m0 + l + ((mat & 1) ? 8 : 0);
    const int k = k0 + ((mat & 2) ? 8 : 0);
    ldsm_x4(a, base + m * ld + k);
  } else {
    const int k = k0 + l + ((mat & 2) ? 8 : 0);
    const int m = m0 + ((mat & 1) ? 8 : 0);
    ldsm_x4_t(a, base + k * ld + m);
  }
}

// acc (16 x 8NT) += A (16 x 16) * B rows [bk, bk+16), all NT n-tiles from column bn0. With split,
// adds hi*lo(B) when B has a low plane and lo(A)*hi when a_lo (an operand without a low plane is
// exact in bf16, e.g. bf16 inputs).
template <int NT, BL kB>
__device__ __forceinline__ void mma_ktile(float (&acc)[NT][4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                          const Tile& B, int bk, int bn0, bool split, bool a_lo, int lane) {
  const bool b_lo = split && B.lo != nullptr;
  a_lo = split && a_lo;
#pragma unroll
  for (int nt = 0; nt < NT; nt += 2) {
    uint32_t bh[4];
    load_b2<kB>(bh, B.hi, B.ld, bk, bn0 + 8 * nt, lane);
    mma16816(acc[nt], ah, bh[0], bh[1]);
    mma16816(acc[nt + 1], ah, bh[2], bh[3]);
    if (b_lo) {
      uint32_t bl[4];
      load_b2<kB>(bl, B.lo, B.ld, bk, bn0 + 8 * nt, lane);
      mma16816(acc[nt], ah, bl[0], bl[1]);
      mma16816(acc[nt + 1], ah, bl[2], bl[3]);
    }
    if (a_lo) {
      mma16816(acc[nt], al, bh[0], bh[1]);
      mma16816(acc[nt + 1], al, bh[2], bh[3]);
    }
  }
}

// The A fragment (16 x 16, k-tile kk) of sign * a, a in the fp32 accumulator layout (16 x 8 n-tiles
// 2kk and 2kk+1 become one k-tile): plain bf16, or with split also the low plane.
template <int NTA>
__device__ __forceinline__ void pack_a(uint32_t (&ah)[4], uint32_t (&al)[4], const float (&a)[NTA][4], int kk,
                                       float sign, bool split) {
  const float* c0 = a[2 * kk];
  const float* c1 = a[2 * kk + 1];
  if (split) {
    split_pack(sign * c0[0], sign * c0[1], ah[0], al[0]);
    split_pack(sign * c0[2], sign * c0[3], ah[1], al[1]);
    split_pack(sign * c1[0], sign * c1[1], ah[2], al[2]);
    split_pack(sign * c1[2], sign * c1[3], ah[3], al[3]);
  } else {
    ah[0] = pack_bf16(sign * c0[0], sign * c0[1]);
    ah[1] = pack_bf16(sign * c0[2], sign * c0[3]);
    ah[2] = pack_bf16(sign * c1[0], sign * c1[1]);
    ah[3] = pack_bf16(sign * c1[2], sign * c1[3]);
  }
}

// acc (16 x 8NT) += sign * Areg (16 x 16KT, fp32 accumulator layout) * B (16KT x 8NT at bk0, bn0).
template <int KT, int NT, BL kB>
__device__ __forceinline__ void mma_rA(float (&acc)[NT][4], const float (&a)[2 * KT][4], float sign, const Tile& B,
                                       int bk0, int bn0, bool split, int lane) {
#pragma unroll
  for (int kk = 0; kk < KT; ++kk) {
    uint32_t ah[4], al[4] = {0u, 0u, 0u, 0u};
    pack_a(ah, al, a, kk, sign, split);
    mma_ktile<NT, kB>(acc, ah, al, B, bk0 + 16 * kk, bn0, split, true, lane);
  }
}

// acc (16 x 8NT) += A rows [am0, am0+16) x k [ak0, ak0 + 16 kt) * B (rows bk0.., cols bn0..).
template <int NT, bool kATrans, BL kB>
__device__ __forceinline__ void mma_sA(float (&acc)[NT][4], const Tile& A, int am0, int ak0, int kt, const Tile& B,
                                       int bk0, int bn0, bool split, int lane) {
  const bool a_lo = split && A.lo != nullptr;
  for (int kk = 0; kk < kt; ++kk) {
    uint32_t ah[4], al[4] = {0u, 0u, 0u, 0u};
    load_a<kATrans>(ah, A.hi, A.ld, am0, ak0 + 16 * kk, lane);
    if (a_lo) load_a<kATrans>(al, A.lo, A.ld, am0, ak0 + 16 * kk, lane);
    mma_ktile<NT, kB>(acc, ah, al, B, bk0 + 16 * kk, bn0, split, a_lo, lane);
  }
}

template <int NT>
__device__ __forceinline__ void zero(float (&acc)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
}

// Writes mul * acc (16 x 8NT) into rows [m0, m0+16) of a tile (hi, and lo when the tile has one).
template <int NT>
__device__ __forceinline__ void store_frag(const Tile& T, int m0, const float (&acc)[NT][4], float mul, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int col = nt * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int idx = (m0 + g + 8 * half) * T.ld + col;
      const float x = mul * acc[nt][2 * half], y = mul * acc[nt][2 * half + 1];
      if (T.lo) {
        uint32_t h, l;
        split_pack(x, y, h, l);
        *reinterpret_cast<uint32_t*>(T.hi + idx) = h;
        *reinterpret_cast<uint32_t*>(T.lo + idx) = l;
      } else {
        *reinterpret_cast<uint32_t*>(T.hi + idx) = pack_bf16(x, y);
      }
    }
  }
}

// dst[(m0 + row) * ld + col] += mul * acc, fp32 atomics. On sm_90 the lane pairs (t, t^1) swap
// halves so that each lane adds four consecutive floats of one row with one vector atomic.
template <int NT>
__device__ __forceinline__ void atomic_frag(float* dst, int64_t ld, int m0, const float (&acc)[NT][4], float mul,
                                            int lane) {
  const int g = lane >> 2, t = lane & 3;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = t & 1;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    // even t keeps row g and takes the partner's row-g pair; odd t keeps row g+8.
    const float s0 = odd ? acc[nt][0] : acc[nt][2], s1 = odd ? acc[nt][1] : acc[nt][3];
    const float q0 = __shfl_xor_sync(0xffffffffu, s0, 1), q1 = __shfl_xor_sync(0xffffffffu, s1, 1);
    const float4 v = odd ? make_float4(mul * q0, mul * q1, mul * acc[nt][2], mul * acc[nt][3])
                         : make_float4(mul * acc[nt][0], mul * acc[nt][1], mul * q0, mul * q1);
    const int row = odd ? g + 8 : g, col = nt * 8 + 2 * (t & 2);
    float* p = dst + static_cast<int64_t>(m0 + row) * ld + col;
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
  }
#else
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int col = nt * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float* p = dst + static_cast<int64_t>(m0 + g + 8 * half) * ld + col;
      atomicAdd(p, mul * acc[nt][2 * half]);
      atomicAdd(p + 1, mul * acc[nt][2 * half + 1]);
    }
  }
#endif
}

// Writes acc (16 x 8NT at rows m0 of a row-major [*, ld] matrix) as bf16 planes: hi, and lo =
// x - bf16(x) unless lo is null.
template <int NT>
__device__ __forceinline__ void store_frag_planes(uint16_t* hi, uint16_t* lo, int64_t ld, int m0,
                                                  const float (&acc)[NT][4], int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t idx = static_cast<int64_t>(m0 + g + 8 * half) * ld + nt * 8 + 2 * t;
      uint32_t h, l;
      split_pack(acc[nt][2 * half], acc[nt][2 * half + 1], h, l);
      *reinterpret_cast<uint32_t*>(hi + idx) = h;
      if (lo) *reinterpret_cast<uint32_t*>(lo + idx) = l;
    }
}

}  // namespace sb::cuda::detail
