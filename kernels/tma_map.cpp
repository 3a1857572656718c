// tma_map.cpp: encodes the TMA tensor maps of the wgmma softmax backward (its dQ reductions,
// with_dq_map; its Q / dO / statistics loads, with_load_maps; attn_internal.hpp) through the
// driver's cuTensorMapEncodeTiled, found at run time by the runtime's entry-point query (no link
// against libcuda).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "kernels/attn_internal.hpp"

namespace sb::cuda::detail {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // not sticky; leave no error behind for the next check
      f = nullptr;
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

bool aligned16(const void* ptr) { return ptr != nullptr && reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

BwdParams with_dq_map(const BwdParams& p0, float* dst, int64_t rows, int64_t Dh) {
  BwdParams p = p0;
  static_assert(sizeof(TmaMap) == sizeof(CUtensorMap) && alignof(TmaMap) == alignof(CUtensorMap));
  const EncodeTiled encode = encode_tiled();
  // The kernel's row coordinates are int32; its boxes are whole 16-row groups.
  if (!p.dq_bulk || encode == nullptr || dst == nullptr || rows <= 0 || rows % 16 != 0 ||
      rows > std::numeric_limits<int32_t>::max()) {
    p.dq_bulk = false;
    return p;
  }
  // [rows, Dh] as (column, row / 8 % 2, row % 8, row / 16): a box (32, 2, 8, 1) lands in shared
  // memory with row r at staging row 2 (r % 8) + r / 8 % 2 (tma_add_frag's conflict-free order).
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(Dh) * sizeof(float);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(Dh), 2, 8, static_cast<cuuint64_t>(rows / 16)};
  const cuuint64_t strides[3] = {8 * row_bytes, row_bytes, 16 * row_bytes};
  const cuuint32_t box[4] = {32, 2, 8, 1}, elem[4] = {1, 1, 1, 1};
  const CUresult r = encode(reinterpret_cast<CUtensorMap*>(&p.dq_map), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, dst, dims,
                            strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  p.dq_bulk = r == CUDA_SUCCESS;
  return p;
}

BwdParams with_load_maps(const BwdParams& p0, int64_t Dh, bool states) {
  BwdParams p = p0;
  const EncodeTiled encode = encode_tiled();
  const int64_t rows = p.B * p.H * p.T;
  // A TMA box must start on a 16-byte boundary of its innermost dimension: the statistics' boxes
  // start at element bh T + i0, so T must be a multiple of 4 (an illegal instruction otherwise).
  if (!p.load_tma || encode == nullptr || (Dh != 64 && Dh != 128) || p.T % 4 != 0 ||
      !aligned16(states ? static_cast<const void*>(p.xs) : p.q) || !aligned16(p.dout) || !aligned16(p.lse) ||
      !aligned16(p.delta) || rows <= 0 || rows > std::numeric_limits<int32_t>::max() ||
      (states && p.nbh * p.xs_rows > std::numeric_limits<int32_t>::max())) {
    p.load_tma = false;
    return p;
  }
  auto encode_qkv = [&](TmaMap* map, const void* src) {  // (Dh, T, H, B) bf16
    const cuuint64_t e = 2;
    const cuuint64_t dims[4] = {static_cast<cuuint64_t>(Dh), static_cast<cuuint64_t>(p.T),
                                static_cast<cuuint64_t>(p.H), static_cast<cuuint64_t>(p.B)};
    const cuuint64_t strides[3] = {static_cast<cuuint64_t>(p.H * Dh) * e, static_cast<cuuint64_t>(Dh) * e,
                                   static_cast<cuuint64_t>(p.T * p.H * Dh) * e};
    const cuuint32_t box[4] = {64, 64, 1, 1}, elem[4] = {1, 1, 1, 1};
    return encode(reinterpret_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(src),
                  dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  auto encode_states = [&](TmaMap* map, const void* src) {  // [xs rows, Dh] bf16, boxes of 64 x 64
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(Dh), static_cast<cuuint64_t>(p.nbh * p.xs_rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(Dh) * 2};
    const cuuint32_t box[2] = {64, 64}, elem[2] = {1, 1};
    return encode(reinterpret_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(src),
                  dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  auto encode_rows = [&](TmaMap* map, const float* src) {  // [B H T] fp32 flattened, boxes of 64
    const cuuint64_t dims[1] = {static_cast<cuuint64_t>(rows)}, unused_strides[1] = {0};
    const cuuint32_t box[1] = {64}, elem[1] = {1};
    return encode(reinterpret_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, const_cast<float*>(src),
                  dims, unused_strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  p.load_tma = (states ? encode_states(&p.q_map, p.xs) : encode_qkv(&p.q_map, p.q)) &&
               encode_qkv(&p.do_map, p.dout) && encode_rows(&p.lse_map, p.lse) && encode_rows(&p.delta_map, p.delta);
  return p;
}

}  // namespace sb::cuda::detail
