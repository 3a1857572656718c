// softmax.cu: the flash causal softmax attention (NoPE / RoPE-applied q, k / FoX gate):
// instantiates the shared fused forward kernel without the PaTH transports and the key-centric
// backward kernel (kernels/attention/softmax/softmax_bwd_sm80.cuh), one instantiation per head dim each, and on Hopper the
// wgmma kernels (kernels/attention/softmax/softmax_sm90.cuh, bf16 at Dh 64 / 128); chooses between them and provides the
// launchers and shared-memory sizes (the plan picks the kernel: FwdParams::wgmma, BwdConfig::wgmma).
// Host API: kernels/attention/attention.cpp.
#include "kernels/attention/attention.hpp"
#include "kernels/attention/softmax/softmax_sm90.cuh"

namespace sb::cuda::detail {

template <>
void launch_fwd<false>(const FwdParams& params, int64_t Dh, cudaStream_t stream) {
  if (params.wgmma) {
    launch_wgmma(softmax_fwd_wgmma_kernel<64>, softmax_fwd_wgmma_kernel<128>, wg_fwd_smem_bytes(64),
                 wg_fwd_smem_bytes(128), params, Dh, static_cast<int64_t>((params.nb + 1) / 2) * params.B * params.H,
                 stream);  // 128-query blocks
    return;
  }
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
  if (cfg.wgmma) {  // 128-key blocks
    BwdParams pm = p;
    pm.head_chunk = kWgBwdHeadChunk;
    launch_bwd_wgmma<false>(pm, p.dq_acc, p.B * p.H * p.nb * int64_t{kL}, Dh,
                            static_cast<int64_t>((p.nb + 1) / 2) * p.B * p.H, stream);
    return;
  }
  with_dh(Dh, [&](auto dh) {
    constexpr int D = decltype(dh)::value;
    auto* kernel = p.bf16 ? softmax_bwd_kv_kernel<D, false> : softmax_bwd_kv_kernel<D, true>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg.smem));
    kernel<<<cfg.grid, 32 * cfg.warps, cfg.smem, stream>>>(p);
    SB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace sb::cuda::detail
