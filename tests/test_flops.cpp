// test_flops.cpp: model/flops.hpp: train_flops_per_token against hand-counted small configs (every
// product kind: q k v o, SwiGLU / GELU MLPs, PaTH's w1 w2 wbeta, FoX's wf, attention, the head on
// labelled tokens), and the device peak table's lookup (order, precisions, unknown devices).
#include <gtest/gtest.h>

#include <cstdint>

#include "model/flops.hpp"

namespace sb {
namespace {

ModelConfig small(std::vector<Attention> layers, MlpKind mlp) {
  ModelConfig m;
  m.d_model = 16, m.n_heads = 2, m.head_dim = 8, m.mlp = mlp, m.mlp_ratio = 2.0, m.path.rank = 4;
  m.n_layers = static_cast<int64_t>(layers.size());
  m.layers = std::move(layers);
  return m;
}

TEST(Flops, HandCountedPathAndRopeSwiglu) {
  // D 16, H 2, Dh 8, F 32, R 4, T 10, V 7, half the tokens labelled.
  // path layer: q k v 3*16*16 + o 16*16 + w1 16*4 + w2 4*16 + wbeta 16*2 + gate_up 16*64 + down 32*16 = 2720
  // rope layer: 768 + 256 + 1024 + 512 = 2560; x 6 each. Attention: 6 * 16 * 10 per layer.
  // Head: 6 * 16 * 7 * 0.5.
  const FlopCount f = train_flops_per_token(small({Attention::path, Attention::rope}, MlpKind::swiglu), 10, 7, 0.5);
  EXPECT_DOUBLE_EQ(f.matmul, 6.0 * (2720 + 2560));
  EXPECT_DOUBLE_EQ(f.attention, 2 * 6.0 * 16 * 10);
  EXPECT_DOUBLE_EQ(f.head, 336.0);
  EXPECT_DOUBLE_EQ(f.total(), 31680.0 + 1920.0 + 336.0);
}

TEST(Flops, HandCountedGeluFoxAndNoMlp) {
  // fox with GELU: q k v o 1024 + wf 16*2 + w_in 16*32 + w_out 32*16 = 2080; x 6 = 12480.
  const FlopCount gelu = train_flops_per_token(small({Attention::fox}, MlpKind::gelu), 5, 3);
  EXPECT_DOUBLE_EQ(gelu.matmul, 12480.0);
  EXPECT_DOUBLE_EQ(gelu.attention, 6.0 * 16 * 5);
  EXPECT_DOUBLE_EQ(gelu.head, 6.0 * 16 * 3);
  const FlopCount none = train_flops_per_token(small({Attention::nope}, MlpKind::none), 5, 3);
  EXPECT_DOUBLE_EQ(none.matmul, 6.0 * 1024);
  // path_fox has both the PaTH and the gate products; sba and nope the plain attention ones.
  const double pf = train_flops_per_token(small({Attention::path_fox}, MlpKind::none), 5, 3).matmul;
  EXPECT_DOUBLE_EQ(pf, 6.0 * (1024 + 64 + 64 + 32 + 32));
  EXPECT_DOUBLE_EQ(train_flops_per_token(small({Attention::sba}, MlpKind::none), 5, 3).total(), none.total());
}

TEST(Flops, HeadDimDefaultsToWidthOverHeads) {
  ModelConfig m = small({Attention::rope}, MlpKind::none);
  m.head_dim = 0;  // unresolved: d_model / n_heads = 8, as resolved
  EXPECT_DOUBLE_EQ(train_flops_per_token(m, 10, 7).total(), train_flops_per_token(small({Attention::rope}, MlpKind::none), 10, 7).total());
}

TEST(Flops, PeakLookup) {
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA H100 80GB HBM3 (bf16)", "bf16"), 989.4e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA H100 80GB HBM3 (tf32)", "tf32"), 494.7e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA H100 80GB HBM3", "fp32"), 66.9e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA H100 PCIe", "bf16"), 756e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA H200", "bf16"), 989.4e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA GH200 480GB", "tf32"), 494.7e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA A100-SXM4-80GB", "fp32"), 19.5e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA L40S", "bf16"), 362.05e12);
  EXPECT_DOUBLE_EQ(*peak_flops("NVIDIA L40", "bf16"), 181.05e12);
  EXPECT_FALSE(peak_flops("cpu (2 threads)", "fp32").has_value());
  EXPECT_FALSE(peak_flops("NVIDIA GeForce GTX 1080", "fp32").has_value());
  EXPECT_FALSE(peak_flops("NVIDIA H100 80GB HBM3", "fp8").has_value());
}

TEST(Flops, EveryPeakEntryIsReachable) {  // no earlier, more general match shadows a later entry
  int64_t n = 0;
  const DevicePeak* peaks = device_peaks(&n);
  ASSERT_GT(n, 5);
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = std::string("NVIDIA ") + peaks[i].match;
    EXPECT_DOUBLE_EQ(*peak_flops(name, "bf16"), peaks[i].bf16 * 1e12) << name;
    EXPECT_DOUBLE_EQ(*peak_flops(name, "tf32"), peaks[i].tf32 * 1e12) << name;
    EXPECT_DOUBLE_EQ(*peak_flops(name, "fp32"), peaks[i].fp32 * 1e12) << name;
    EXPECT_GE(peaks[i].bf16, peaks[i].tf32) << name;
  }
}

}  // namespace
}  // namespace sb
