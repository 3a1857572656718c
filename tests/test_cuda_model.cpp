// pending_test_cuda_model.cpp: whole-model parity of the CUDA path. Rename to test_cuda_model.cpp
// once the attention kernels (kernels/attention_*.cu, gpu-attn branch) are merged: it links against
// them through GpuRunner / GpuEngine. Checks, for a 2-layer model of every attention kind, the loss
// and every parameter gradient of GpuRunner against TransformerRunner<double>, and the losses of
// 20 GpuEngine training steps against CpuEngine. Skips without CUDA or without a device.
#include <gtest/gtest.h>

#ifndef STATEBENCH_HAVE_CUDA
TEST(CudaModel, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#else
#include <cmath>
#include <random>
#include <vector>

#include "kernels/gpu_runner.hpp"
#include "kernels/ops_cuda.hpp"
#include "model/transformer.hpp"
#include "train/cpu_engine.hpp"
#include "train/gpu_engine.hpp"

namespace sb {
namespace {

ModelConfig two_layer(Attention kind, bool variant) {
  ModelConfig c;
  c.d_model = 32, c.n_layers = 2, c.n_heads = 2, c.head_dim = 16, c.attention = kind;
  c.mlp_ratio = 2.0, c.path.rank = 8, c.init.std = 0.2;
  if (variant) c.mlp = MlpKind::gelu, c.norm = NormKind::layernorm, c.tied_embeddings = true, c.path.conv_bias = true;
  return c;
}

void batch(int64_t B, int64_t T, int64_t V, uint32_t seed, bool sparse, std::vector<int32_t>& ids,
           std::vector<int32_t>& labels) {
  std::mt19937 gen(seed);
  ids.resize(B * T), labels.resize(B * T);
  for (int64_t i = 0; i < B * T; ++i) {
    ids[i] = static_cast<int32_t>(gen() % V);
    labels[i] = sparse && gen() % 3 != 0 ? -100 : static_cast<int32_t>(gen() % V);
  }
}

class CudaModel : public ::testing::TestWithParam<Attention> {
 protected:
  void SetUp() override {
    if (!cuda::ops_device_available()) GTEST_SKIP() << "no CUDA device available";
  }
};

TEST_P(CudaModel, LossAndGradientsMatchDoubleCpu) {
  const int64_t V = 11;
  for (bool variant : {false, true})
    for (int64_t T : {7, 33}) {
      const ModelConfig cfg = two_layer(GetParam(), variant);
      Transformer<float> mf(cfg, V);
      mf.init_params(3);
      Transformer<double> md(cfg, V);
      const int64_t n = mf.params().size();
      for (int64_t i = 0; i < n; ++i) md.params().params()[i] = mf.params().params()[i];
      const int64_t B = 2;
      std::vector<int32_t> ids, labels;
      batch(B, T, V, static_cast<uint32_t>(T), variant, ids, labels);
      TransformerRunner<double> cpu(md, B, T);
      const nn::LossSum ls = cpu.forward(ids.data(), labels.data());
      std::vector<double> g_cpu(n, 0.0);
      cpu.backward(1.0 / static_cast<double>(ls.count), g_cpu.data());

      cuda::DeviceArray<float> params(n), grads(n);
      SB_OPS_CUDA_CHECK(cudaMemcpy(params.data(), mf.params().params(), n * sizeof(float), cudaMemcpyHostToDevice));
      cuda::GpuRunner gpu(mf, B, T, cuda::MatmulPrecision::fp32, nullptr);
      const int64_t M = gpu.forward(params.data(), ids.data(), labels.data());
      ASSERT_EQ(M, ls.count);
      gpu.backward(params.data(), grads.data(), 1.0f / static_cast<float>(M));
      double loss_sum = 0;
      std::vector<float> g_gpu(n);
      SB_OPS_CUDA_CHECK(cudaDeviceSynchronize());
      SB_OPS_CUDA_CHECK(cudaMemcpy(&loss_sum, gpu.loss_sum_device(), sizeof(double), cudaMemcpyDeviceToHost));
      SB_OPS_CUDA_CHECK(cudaMemcpy(g_gpu.data(), grads.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
      EXPECT_NEAR(loss_sum / M, ls.loss_sum / ls.count, 1e-4) << "T " << T << " variant " << variant;
      for (const ParamView& v : mf.params().views()) {
        double diff = 0, ref = 0;
        for (int64_t i = v.offset; i < v.offset + v.numel; ++i)
          diff += (g_gpu[i] - g_cpu[i]) * (g_gpu[i] - g_cpu[i]), ref += g_cpu[i] * g_cpu[i];
        EXPECT_LE(std::sqrt(diff), 1e-3 * std::sqrt(ref) + 1e-7)
            << v.name << " T " << T << " variant " << variant << " |g| " << std::sqrt(ref);
      }
    }
}

TEST_P(CudaModel, TwentyTrainingStepsMatchCpuEngine) {
  const int64_t V = 11, B = 4, T = 24;
  const ModelConfig cfg = two_layer(GetParam(), false);
  OptimConfig oc;
  oc.lr = 3e-3;
  CpuEngine cpu(cfg, oc, V, 1);
  GpuEngine gpu(cfg, oc, V, Precision::fp32);
  cpu.model().init_params(5);
  gpu.model().init_params(5);
  for (int step = 0; step < 20; ++step) {
    std::vector<int32_t> ids, labels;
    batch(B, T, V, 100 + static_cast<uint32_t>(step), true, ids, labels);
    const double lr = scheduled_lr(oc, 20, step);
    const StepResult rc = cpu.train_step(ids.data(), labels.data(), B, T, lr, 1.0);
    const StepResult rg = gpu.train_step(ids.data(), labels.data(), B, T, lr, 1.0);
    ASSERT_EQ(rc.labelled, rg.labelled);
    EXPECT_NEAR(rg.loss, rc.loss, 2e-3 * (1 + rc.loss)) << "step " << step;
    EXPECT_NEAR(rg.grad_norm, rc.grad_norm, 1e-2 * (1e-3 + rc.grad_norm)) << "step " << step;
  }
  EXPECT_EQ(gpu.optimizer().steps_taken(), cpu.optimizer().steps_taken());
  // The host mirror carries the trained parameters back.
  const ParamStore<float>& pc = cpu.model().params();
  const ParamStore<float>& pg = gpu.model().params();
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < pc.size(); ++i)
    diff += (pg.params()[i] - pc.params()[i]) * (pg.params()[i] - pc.params()[i]), ref += pc.params()[i] * pc.params()[i];
  EXPECT_LE(std::sqrt(diff), 1e-2 * std::sqrt(ref));
}

INSTANTIATE_TEST_SUITE_P(Kinds, CudaModel,
                         ::testing::Values(Attention::path, Attention::rope, Attention::nope, Attention::fox,
                                           Attention::path_fox),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace sb
#endif
