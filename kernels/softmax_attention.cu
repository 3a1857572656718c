// softmax_attention.cu: the flash causal softmax attention (NoPE / RoPE-applied q, k / FoX gate):
// instantiates the shared fused forward kernel without the PaTH transports and the key-centric
// backward kernel (softmax_bwd_kernel.cuh), one instantiation per head dim each, and provides their
// launchers, shared-memory sizes and occupancy query. Host API: attention_api.cpp.
#include "kernels/attn_fwd_kernel.cuh"
#include "kernels/softmax_bwd_kernel.cuh"

namespace sb::cuda::detail {

template <>
void launch_fwd<false>(const FwdParams& params, int64_t Dh, cudaStream_t stream) {
  FwdParams p = params;
  p.stages = fwd_smem_bytes(Dh, !p.bf16, false, false, 2) <= device_max_smem() ? 2 : 1;
  const int smem = fwd_smem_bytes(Dh, !p.bf16, false, false, p.stages);
  const int64_t blocks = static_cast<int64_t>(p.nb) * p.B * p.H;
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? attn_fwd_kernel<D, false, false> : attn_fwd_kernel<D, false, true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kernel<<<static_cast<unsigned>(blocks), 128, smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

int softmax_bwd_smem_bytes(int64_t Dh, bool f32, int stages) {
  return kv_bwd_smem(nullptr, static_cast<int>(Dh), f32, stages).bytes;
}

template <>
void launch_bwd<false>(const BwdParams& p, const BwdConfig& cfg, int64_t Dh, cudaStream_t stream) {
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? softmax_bwd_kv_kernel<D, false> : softmax_bwd_kv_kernel<D, true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg.smem));
    kernel<<<cfg.grid, 32 * cfg.warps, cfg.smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
