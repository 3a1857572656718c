// tma_map.cpp: encodes the TMA tensor map of the wgmma softmax backward's dQ reductions
// (with_dq_map, attn_internal.hpp) through the driver's cuTensorMapEncodeTiled, found at run time
// by the runtime's entry-point query (no link against libcuda).
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

}  // namespace

BwdParams with_dq_map(const BwdParams& p0, float* dst, int64_t rows, int64_t Dh) {
  BwdParams p = p0;
  static_assert(sizeof(TmaMap) == sizeof(CUtensorMap) && alignof(TmaMap) == alignof(CUtensorMap));
  const EncodeTiled encode = encode_tiled();
  // The kernel's row coordinates are int32.
  if (!p.dq_bulk || encode == nullptr || dst == nullptr || rows <= 0 || rows > std::numeric_limits<int32_t>::max()) {
    p.dq_bulk = false;
    return p;
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(Dh), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(Dh) * sizeof(float)};
  const cuuint32_t box[2] = {32, 16}, elem[2] = {1, 1};
  const CUresult r = encode(reinterpret_cast<CUtensorMap*>(&p.dq_map), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, dst, dims,
                            strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  p.dq_bulk = r == CUDA_SUCCESS;
  return p;
}

}  // namespace sb::cuda::detail
