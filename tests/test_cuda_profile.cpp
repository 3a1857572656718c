// test_cuda_profile.cpp: GpuEngine::profile_train_steps (bench train --profile): profiled steps give
// the same parameters as unprofiled ones (graphs on), the breakdown names the step's ops with one
// region per layer per step, the regions fit inside the step, and training goes on unprofiled after.
// Dense and sparse-label (rows tail) batches, PaTH and RoPE, fp32 and bf16. Skips without a device.
#include <gtest/gtest.h>

#ifndef STATEBENCH_HAVE_CUDA
TEST(CudaProfile, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#else
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_model_test_util.hpp"
#include "kernels/common/cuda_check.hpp"
#include "train/gpu_engine.hpp"

namespace sb {
namespace {

class CudaProfile : public ::testing::TestWithParam<std::tuple<Attention, Precision, bool>> {
 protected:
  void SetUp() override {
    if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  }
};

const OpTime* find(const StepProfile& p, const std::string& op) {
  for (const OpTime& o : p.ops)
    if (o.op == op) return &o;
  return nullptr;
}

TEST_P(CudaProfile, SameStepsAndABreakdownOfEveryOp) {
  const auto [kind, precision, sparse] = GetParam();
  ModelConfig cfg;
  cfg.d_model = 32, cfg.n_layers = 2, cfg.n_heads = 2, cfg.head_dim = 16, cfg.attention = kind, cfg.path.rank = 8;
  const int64_t V = 11, B = 4, T = 40, steps = 3;
  OptimConfig oc;
  GpuEngine plain(cfg, oc, V, precision), profiled(cfg, oc, V, precision);
  plain.model().init_params(3);
  profiled.model().init_params(3);
  std::vector<int32_t> ids, labels;
  test::batch(B, T, V, 9, sparse, ids, labels);
  for (int64_t s = 0; s < steps; ++s) plain.train_step(ids.data(), labels.data(), B, T, 1e-4, 1.0, false);
  const StepProfile p = profiled.profile_train_steps(ids.data(), labels.data(), B, T, steps);
  plain.train_step(ids.data(), labels.data(), B, T, 1e-4, 1.0, true);
  profiled.train_step(ids.data(), labels.data(), B, T, 1e-4, 1.0, true);  // unprofiled again (graphs)
  const ParamStore<float>& a = plain.model().params();
  const ParamStore<float>& b = profiled.model().params();
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.params()[i]) - b.params()[i];
    diff += d * d, ref += static_cast<double>(a.params()[i]) * a.params()[i];
  }
  EXPECT_LE(std::sqrt(diff), 1e-6 * std::sqrt(ref));
  EXPECT_EQ(profiled.optimizer().steps_taken(), plain.optimizer().steps_taken());

  EXPECT_EQ(p.steps, steps);
  EXPECT_GT(p.step_ms, 0.0);
  double covered = 0;
  for (const OpTime& o : p.ops) {
    EXPECT_GE(o.ms, 0.0) << o.op;
    EXPECT_GT(o.calls, 0) << o.op;
    covered += o.ms;
  }
  EXPECT_LE(covered, p.step_ms * 1.001 + 1e-3);
  for (const char* op : {"fwd.embedding", "fwd.qkv", "fwd.norm", "fwd.head", "fwd.loss", "bwd.loss", "bwd.head",
                         "bwd.qkv", "bwd.embedding", "zero_grads", "grad_norm", "clip_adamw"})
    EXPECT_NE(find(p, op), nullptr) << op;
  ASSERT_NE(find(p, "clip_adamw"), nullptr);
  EXPECT_EQ(find(p, "clip_adamw")->calls, steps);
  // The first layer's ops always run over every row: one region per layer and step; with a rows
  // tail the last layer's attention, projection and MLP are inside fwd.rows_tail.
  const int64_t layers_outside_tail = find(p, "fwd.rows_tail") ? cfg.n_layers - 1 : cfg.n_layers;
  ASSERT_NE(find(p, "fwd.mlp_in"), nullptr);
  EXPECT_EQ(find(p, "fwd.mlp_in")->calls, layers_outside_tail * steps);
  EXPECT_EQ(find(p, "bwd.qkv")->calls, cfg.n_layers * steps);
  EXPECT_EQ(find(p, "fwd.path_w_beta") != nullptr, kind == Attention::path);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CudaProfile,
                         ::testing::Combine(::testing::Values(Attention::path, Attention::rope),
                                            ::testing::Values(Precision::fp32, Precision::bf16),
                                            ::testing::Bool()));

}  // namespace
}  // namespace sb
#endif
