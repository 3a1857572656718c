// attention_selftest.hpp: device self-tests of the attention kernels' tensor-core building blocks
// (tests/cuda/attention_selftest.cu, compiled into test_cuda_attention with the kernels' archs).
#pragma once

namespace sb::cuda {

// The warp-level blocks (every operand layout, plain and split precision) against a double-precision
// host product: the largest relative error seen (norm-wise per case).
double attention_mma_selftest(bool split);

// The warpgroup (wgmma) blocks (swizzled tiles, K-major and MN-major descriptors, A from shared
// memory or registers, n64 and n32 products, two panels): the largest relative error of its four
// cases, or -1 where softmax_attention_uses_wgmma(64, bf16) is false.
double attention_wgmma_selftest();

}  // namespace sb::cuda
