// pack.cu: pack_columns_cuda and add_segments_cuda (declarations and contracts: kernels/ops/pack.hpp).
// Both are bandwidth-bound copies: eight columns a thread where the rows allow (else one), rows across
// the grid's x and, for wide rows, columns across its y.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/ops/launch.cuh"
#include "kernels/ops/pack.hpp"

namespace sb::cuda {
namespace {

struct Parts {  // kernel argument: the parts by value, with their first columns; part n is the zero pad
  const void* data[kMaxPackParts + 1];
  int64_t begin[kMaxPackParts + 2];
  bool f32[kMaxPackParts + 1];
  bool vec8[kMaxPackParts + 1];  // eight columns a thread: 16-byte aligned rows, columns a multiple of 8
  bool skip[kMaxPackParts + 1];  // in place: nothing to copy
  int n;
};

__device__ __forceinline__ uint32_t bf16x2_bits(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Columns [c, c + v) of part p (v = 8: a 16-byte aligned group; else 1) from src into dst at out:
// converted to bf16 (round to nearest even) for a bf16 dst; zeros for the pad (p == parts.n).
template <bool DstF32>
__device__ __forceinline__ void copy_group(void* dst, const Parts& parts, int p, int64_t src, int64_t out, int v) {
  const bool pad = p == parts.n, f32 = parts.f32[p];
  if (v == 8) {
    float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (!pad && f32) {
      lo = reinterpret_cast<const float4*>(static_cast<const float*>(parts.data[p]) + src)[0];
      hi = reinterpret_cast<const float4*>(static_cast<const float*>(parts.data[p]) + src)[1];
      raw = make_uint4(bf16x2_bits(lo.x, lo.y), bf16x2_bits(lo.z, lo.w), bf16x2_bits(hi.x, hi.y),
                       bf16x2_bits(hi.z, hi.w));
    } else if (!pad) {
      raw = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(parts.data[p]) + src);
    }
    if constexpr (DstF32) {
      reinterpret_cast<float4*>(static_cast<float*>(dst) + out)[0] = lo;
      reinterpret_cast<float4*>(static_cast<float*>(dst) + out)[1] = hi;
    } else {
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(dst) + out) = raw;
    }
  } else {
    float x = 0.f;
    uint16_t bits = 0;
    if (!pad && f32)
      x = static_cast<const float*>(parts.data[p])[src], bits = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    else if (!pad) bits = static_cast<const uint16_t*>(parts.data[p])[src];
    if constexpr (DstF32) static_cast<float*>(dst)[out] = x;
    else static_cast<uint16_t*>(dst)[out] = bits;
  }
}

// Part p's columns of rows [r0, r1): element (or group of 8) t of the part's rows-by-groups grid.
template <bool DstF32>
__device__ __forceinline__ void pack_part(void* dst, int64_t ld, const Parts& parts, int p, int64_t r0, int64_t r1) {
  // 32-bit element indices within the CTA's rows (the host keeps ld and a CTA's elements below 2^31)
  const int64_t begin = parts.begin[p], cols = parts.begin[p + 1] - begin;
  const int v = parts.vec8[p] ? 8 : 1;
  const int groups = static_cast<int>(cols / v), total = static_cast<int>(r1 - r0) * groups;
  for (int t = blockIdx.y * blockDim.x + threadIdx.x; t < total; t += gridDim.y * blockDim.x) {
    const int q = t / groups, c = (t - q * groups) * v;
    const int64_t r = r0 + q;
    copy_group<DstF32>(dst, parts, p, r * cols + c, r * ld + begin + c, v);
  }
}

// One row (the weights' pack): group g of V columns (every part's columns in whole groups) a thread,
// its part found by its first column, so that every part's loads are in flight at once.
template <bool DstF32, int V>
__global__ void pack_row_kernel(void* dst, Parts parts, int64_t ld) {
  const int64_t c = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * V;
  if (c >= ld) return;
  int p = 0;
  while (c >= parts.begin[p + 1]) ++p;  // begin[n + 1] = ld: p <= n (the pad)
  if (!parts.skip[p]) copy_group<DstF32>(dst, parts, p, c - parts.begin[p], c, V);
}

// CTA (x, y) packs rows [x rows_per_cta, (x + 1) rows_per_cta), its y-th share of each part's elements.
template <bool DstF32>
__global__ void pack_columns_kernel(void* dst, int64_t ld, Parts parts, int64_t rows, int64_t rows_per_cta) {
  const int64_t r0 = blockIdx.x * rows_per_cta, r1 = min(rows, r0 + rows_per_cta);
  for (int p = 0; p <= parts.n; ++p)
    if (!parts.skip[p]) pack_part<DstF32>(dst, ld, parts, p, r0, r1);
}

struct Segs {
  float* data[kMaxPackParts];
  int64_t begin[kMaxPackParts + 1];
  int n;
};

__global__ void add_segments_kernel(const float* src, Segs segs) {
  const int64_t total = segs.begin[segs.n];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int s = 0;
    while (i >= segs.begin[s + 1]) ++s;
    if (segs.data[s]) segs.data[s][i - segs.begin[s]] += src[i];
  }
}

}  // namespace

void pack_columns_cuda(void* dst, bool dst_f32, int64_t ld, const PackPart* parts, int n_parts, int64_t rows,
                       cudaStream_t stream) {
  if (n_parts < 1 || n_parts > kMaxPackParts) throw_error("pack_columns: 1 to kMaxPackParts parts");
  Parts a{};
  a.n = n_parts;
  const bool rows16 = ops_detail::aligned_to(dst, 16) && ld % 8 == 0;
  for (int p = 0; p < n_parts; ++p) {
    if (dst_f32 && !parts[p].f32) throw_error("pack_columns: a bf16 part into an fp32 destination");
    a.data[p] = parts[p].data, a.f32[p] = parts[p].f32, a.begin[p + 1] = a.begin[p] + parts[p].cols;
    a.skip[p] = parts[p].in_place;
    a.vec8[p] = rows16 && a.begin[p] % 8 == 0 && parts[p].cols % 8 == 0 && ops_detail::aligned_to(parts[p].data, 16);
  }
  if (a.begin[n_parts] > ld) throw_error("pack_columns: the parts' columns exceed the row length");
  a.begin[n_parts + 1] = ld, a.f32[n_parts] = true;
  a.vec8[n_parts] = rows16 && a.begin[n_parts] % 8 == 0;
  if (rows <= 0 || ld <= 0) return;
  if (ld >= (int64_t{1} << 31) / 2) throw_error("pack_columns: rows of 2^30 or more columns");
  const int threads = ops_detail::kThreads;
  if (rows == 1) {  // a group a thread over the whole row
    bool vec8 = true;
    for (int p = 0; p <= n_parts; ++p) vec8 = vec8 && a.vec8[p];
    const int v = vec8 ? 8 : 1;
    const unsigned ctas = static_cast<unsigned>((ld / v + threads - 1) / threads);
    if (dst_f32)
      vec8 ? pack_row_kernel<true, 8><<<ctas, threads, 0, stream>>>(dst, a, ld)
           : pack_row_kernel<true, 1><<<ctas, threads, 0, stream>>>(dst, a, ld);
    else
      vec8 ? pack_row_kernel<false, 8><<<ctas, threads, 0, stream>>>(dst, a, ld)
           : pack_row_kernel<false, 1><<<ctas, threads, 0, stream>>>(dst, a, ld);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  // About 8192 columns a CTA: many rows of a narrow matrix, or one wide row split across grid.y.
  const int64_t rows_per_cta = std::max<int64_t>(1, 8192 / ld);
  const int64_t ctas = (rows + rows_per_cta - 1) / rows_per_cta;
  if (ctas > 2147483647) throw_error("pack_columns: too many rows");
  const dim3 grid(static_cast<unsigned>(ctas), static_cast<unsigned>(std::clamp<int64_t>(ld / 8192, 1, 256)));
  if (dst_f32)
    pack_columns_kernel<true><<<grid, threads, 0, stream>>>(dst, ld, a, rows, rows_per_cta);
  else
    pack_columns_kernel<false><<<grid, threads, 0, stream>>>(dst, ld, a, rows, rows_per_cta);
  CUDA_CHECK(cudaGetLastError());
}

void add_segments_cuda(const float* src, const AddSegment* segs, int n_segs, cudaStream_t stream) {
  if (n_segs < 1 || n_segs > kMaxPackParts) throw_error("add_segments: 1 to kMaxPackParts segments");
  Segs s{};
  s.n = n_segs;
  for (int j = 0; j < n_segs; ++j) s.data[j] = segs[j].data, s.begin[j + 1] = s.begin[j] + segs[j].count;
  const int64_t total = s.begin[n_segs];
  if (total <= 0) return;
  const int threads = ops_detail::kThreads;
  add_segments_kernel<<<static_cast<unsigned>(std::min<int64_t>((total + threads - 1) / threads, 65535)), threads, 0,
                        stream>>>(src, s);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sb::cuda
