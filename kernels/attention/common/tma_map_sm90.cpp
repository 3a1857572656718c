// tma_map_sm90.cpp: encodes the TMA tensor maps of the wgmma softmax backward (its dQ reductions,
// with_dq_map; its Q / dO / statistics loads, with_load_maps; kernels/attention/internal.hpp) through the
// driver's cuTensorMapEncodeTiled, found at run time by the runtime's entry-point query (no link
// against libcuda).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "kernels/attention/internal.hpp"

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

// A tiled map of rank R over src (dims innermost first; strides[i] the byte stride of dim i, strides[0]
// unused: the driver takes dims 1..R-1), unit element strides, out-of-bounds elements zero. False
// where the driver cannot encode it.
template <int R>
bool encode_map(TmaMap* map, CUtensorMapDataType type, const void* src, const cuuint64_t (&dims)[R],
                const cuuint64_t (&strides)[R], const cuuint32_t (&box)[R], CUtensorMapSwizzle swizzle,
                CUtensorMapL2promotion l2) {
  static_assert(sizeof(TmaMap) == sizeof(CUtensorMap) && alignof(TmaMap) == alignof(CUtensorMap));
  const EncodeTiled encode = encode_tiled();
  cuuint32_t elem[R];
  for (int i = 0; i < R; ++i) elem[i] = 1;
  return encode != nullptr &&
         encode(reinterpret_cast<CUtensorMap*>(map), type, R, const_cast<void*>(src), dims, strides + 1, box, elem,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

BwdParams with_dq_map(const BwdParams& p0, float* dst, int64_t rows, int64_t Dh) {
  BwdParams p = p0;
  // The kernel's row coordinates are int32; its boxes are whole 16-row groups.
  if (!p.dq_bulk || dst == nullptr || rows <= 0 || rows % 16 != 0 || rows > std::numeric_limits<int32_t>::max()) {
    p.dq_bulk = false;
    return p;
  }
  // [rows, Dh] as (column, row / 8 % 2, row % 8, row / 16): a box (32, 2, 8, 1) lands in shared
  // memory with row r at staging row 2 (r % 8) + r / 8 % 2 (tma_add_frag's conflict-free order).
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(Dh) * sizeof(float);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(Dh), 2, 8, static_cast<cuuint64_t>(rows / 16)};
  const cuuint64_t strides[4] = {0, 8 * row_bytes, row_bytes, 16 * row_bytes};
  p.dq_bulk = encode_map<4>(&p.dq_map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, dst, dims, strides, {32, 2, 8, 1},
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE);
  return p;
}

BwdParams with_load_maps(const BwdParams& p0, int64_t Dh, bool states) {
  BwdParams p = p0;
  const int64_t rows = p.B * p.H * p.T;
  // A TMA box must start on a 16-byte boundary of its innermost dimension: the statistics' boxes
  // start at element bh T + i0, so T must be a multiple of 4 (an illegal instruction otherwise).
  if (!p.load_tma || (Dh != 64 && Dh != 128) || p.T % 4 != 0 ||
      !aligned16(states ? static_cast<const void*>(p.xs) : p.q) || !aligned16(p.dout) || !aligned16(p.lse) ||
      !aligned16(p.delta) || rows <= 0 || rows > std::numeric_limits<int32_t>::max() ||
      (states && p.nbh * p.xs_rows > std::numeric_limits<int32_t>::max())) {
    p.load_tma = false;
    return p;
  }
  const cuuint64_t D = static_cast<cuuint64_t>(Dh), e = 2;  // bf16 bytes
  auto encode_qkv = [&](TmaMap* map, const void* src) {  // (Dh, T, H, B) bf16, boxes of 64 x 64
    const cuuint64_t T = static_cast<cuuint64_t>(p.T), H = static_cast<cuuint64_t>(p.H);
    return encode_map<4>(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, src, {D, T, H, static_cast<cuuint64_t>(p.B)},
                         {0, H * D * e, D * e, T * H * D * e}, {64, 64, 1, 1}, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  };
  auto encode_states = [&](TmaMap* map, const void* src) {  // [xs rows, Dh] bf16, boxes of 64 x 64
    return encode_map<2>(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, src, {D, static_cast<cuuint64_t>(p.nbh * p.xs_rows)},
                         {0, D * e}, {64, 64}, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  };
  auto encode_rows = [&](TmaMap* map, const float* src) {  // [B H T] fp32 flattened, boxes of 64
    return encode_map<1>(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, src, {static_cast<cuuint64_t>(rows)}, {0}, {64},
                         CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE);
  };
  p.load_tma = (states ? encode_states(&p.q_map, p.xs) : encode_qkv(&p.q_map, p.q)) &&
               encode_qkv(&p.do_map, p.dout) && encode_rows(&p.lse_map, p.lse) && encode_rows(&p.delta_map, p.delta);
  return p;
}

}  // namespace sb::cuda::detail
