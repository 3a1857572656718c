// path_fwd.cu: instantiates the fused attention forward kernel for PaTH (one
// instantiation per head dim) and provides its launcher and shared-memory size. The kernel itself
// is in kernels/attention/common/fused_fwd_sm80.cuh; the host API that sequences the launches is kernels/attention/attention.cpp.
#include "kernels/attention/common/fused_fwd_sm80.cuh"

namespace sb::cuda::detail {

int fwd_smem_bytes(int64_t Dh, bool f32, bool path, bool dense, int stages) {
  return fwd_smem(nullptr, static_cast<int>(Dh), f32, path, dense, stages).bytes;
}

template <>
void launch_fwd<true>(const FwdParams& params, int64_t Dh, cudaStream_t stream) {
  FwdParams p = params;
  const int64_t blocks = static_cast<int64_t>(p.nb) * (p.nbh > 0 ? p.nbh : p.B * p.H);  // a head group with p.inter
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? attn_fwd_kernel<D, true, false> : attn_fwd_kernel<D, true, true>;
    // Two pipeline stages where they fit, unless one lets more CTAs share an SM; one at Dh 128, where
    // it measured faster at the same occupancy (forward 4.49 -> 4.34 ms at (2,8192,16,128)).
    auto occupancy = [&](int stages) {
      int occ = 0;
      const int smem = fwd_smem_bytes(Dh, !p.bf16, true, p.dense, stages);
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, 128, smem));
      return occ;
    };
    const bool two_fit = fwd_smem_bytes(Dh, !p.bf16, true, p.dense, 2) <= device_max_smem();
    p.stages = D < 128 && two_fit && occupancy(2) >= occupancy(1) ? 2 : 1;
    const int smem = fwd_smem_bytes(Dh, !p.bf16, true, p.dense, p.stages);
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(blocks), 128, smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
