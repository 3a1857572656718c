// path_attention_bwd.cu: instantiates the fused attention backward kernel for PaTH (one
// instantiation per head dim) with its launcher, shared-memory size and occupancy query. The
// kernel is in path_bwd_kernel.cuh; attention_api.cpp sequences it with the factor kernels.
#include "kernels/path_bwd_kernel.cuh"

namespace sb::cuda::detail {

int path_bwd_smem_bytes(int64_t Dh, bool f32, bool dense, int warps, int stages) {
  return bwd_smem(nullptr, static_cast<int>(Dh), f32, dense, 16 * warps, stages).bytes;
}

int path_bwd_occupancy(int64_t Dh, bool f32, int warps, int smem) {
  int occ = 0;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = f32 ? path_bwd_kernel<D, true> : path_bwd_kernel<D, false>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 32 * warps, smem));
  });
  return occ;
}

template <>
void launch_bwd<true>(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream) {
  check_head_group(p.bh0, p.nbh, p.B * p.H, "PaTH attention backward: bad group of heads");
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? path_bwd_kernel<D, false> : path_bwd_kernel<D, true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg.smem));
    kernel<<<cfg.grid, 32 * cfg.warps, cfg.smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
