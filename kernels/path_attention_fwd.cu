// path_attention_fwd.cu: instantiates the fused attention forward kernel for PaTH (one
// instantiation per head dim) and provides its launcher and shared-memory size. The kernel itself
// is in attn_fwd_kernel.cuh; the host API that sequences the launches is attention_api.cpp.
#include "kernels/attn_fwd_kernel.cuh"

namespace sb::cuda::detail {

int fwd_smem_bytes(int64_t Dh, bool f32, bool path, bool dense) {
  return fwd_smem(nullptr, static_cast<int>(Dh), f32, path, dense).bytes;
}

template <>
void launch_fwd<true>(const FwdParams& p, int64_t Dh, cudaStream_t stream) {
  const int smem = fwd_smem_bytes(Dh, !p.bf16, true, p.dense);
  const int64_t blocks = static_cast<int64_t>(p.nb) * p.B * p.H;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? attn_fwd_kernel<D, true, false> : attn_fwd_kernel<D, true, true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(blocks), 128, smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
