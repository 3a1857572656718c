// test_cuda_model_options.cpp: GPU-runner parity for the model options (post-norm blocks, learned
// positions, stick-breaking without its remainder, the scaled PaTH-FoX gate): loss and every
// gradient against TransformerRunner<double> in fp32 (dense, sparse, the rows tail) and bf16, graph
// replays against eager launches, the work overlapped on the side stream against the same work in
// order, bf16 with the fused SwiGLU kernels against fp32, and refusing sequences beyond
// model.max_len. Skips without CUDA.
#include <gtest/gtest.h>

#ifndef STATEBENCH_HAVE_CUDA
TEST(CudaModelOptions, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#else
#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "cuda_model_test_util.hpp"
#include "kernels/ops/ops_bf16.hpp"
#include "model/cuda/gpu_runner.hpp"
#include "model/cuda/step_profiler.hpp"
#include "model/transformer.hpp"

namespace sb {
namespace {

using namespace test;

// A 2-layer model of `kind` with one option set: 0 post-norm (SwiGLU, RMSNorm), 1 post-norm with
// learned positions (GELU, LayerNorm, tied head), 2 post-norm attention-only blocks with positions,
// 3 learned positions in pre-norm blocks, 4 stick-breaking without its remainder, 5 PaTH-FoX with the
// scaled gate (model.path.scale_gate) in a hybrid with `kind` (4, 5: kind ignored or second).
ModelConfig with_option(Attention kind, int option, int64_t T) {
  ModelConfig c;
  c.d_model = 32, c.n_layers = 2, c.n_heads = 2, c.head_dim = 16, c.attention = kind;
  c.mlp_ratio = 2.0, c.path.rank = 8, c.init.std = 0.2;
  c.norm_position = option <= 2 ? NormPosition::post : NormPosition::pre;
  if (option >= 1 && option <= 3) c.position = PositionKind::learned, c.max_len = T + 5;
  if (option == 1) c.mlp = MlpKind::gelu, c.norm = NormKind::layernorm, c.tied_embeddings = true;
  if (option == 2) c.mlp = MlpKind::none;
  if (option == 4) c.attention = Attention::sba, c.sba.remainder = SbaRemainder::none;
  if (option == 5) c.layers = {Attention::path_fox, kind}, c.path.scale_gate = true;
  return c;
}
const int kOptions = 6;

class CudaModelOptions : public ::testing::TestWithParam<Attention> {
 protected:
  void SetUp() override {
    if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  }
};

// One fp32 forward + backward of B x T against the double CPU runner: the loss and every view's
// gradient (1e-3 of its norm, + abs_floor for views whose exact gradient is 0).
void expect_fp32_parity(const ModelConfig& cfg, int64_t B, int64_t T, const std::vector<int32_t>& ids,
                        const std::vector<int32_t>& labels, const std::string& tag, double abs_floor = 1e-7) {
  const int64_t V = 11;
  TwinModels m(cfg, V, 3);
  const int64_t n = m.f.params().size();
  TransformerRunner<double> cpu(m.d, B, T);
  const nn::LossSum ls = cpu.forward(ids.data(), labels.data());
  std::vector<double> g_cpu(n, 0.0);
  cpu.backward(1.0 / static_cast<double>(ls.count), g_cpu.data());
  cuda::DeviceBuffer<float> params = device_params(m.f), grads(n);
  cuda::GpuRunner gpu(m.f, B, T, cuda::MatmulPrecision::fp32, nullptr, true, true, PathRows::on);
  const GpuResult r = run_gpu(gpu, params, grads, ids, labels, nullptr);
  ASSERT_EQ(r.M, ls.count) << tag;
  EXPECT_NEAR(r.loss_sum / r.M, ls.loss_sum / ls.count, 1e-4) << tag;
  for (const ParamView& v : m.f.params().views()) {
    double ref = 0;
    const double e = view_error(v, r.grads, g_cpu, &ref);
    EXPECT_LE(e * ref, 1e-3 * ref + abs_floor) << v.name << " " << tag << " |g| " << ref;
  }
}

TEST_P(CudaModelOptions, LossAndGradientsMatchDoubleCpu) {
  const int64_t V = 11, B = 2;
  for (int option = 0; option < kOptions; ++option)
    for (int64_t T : {7, 33})
      for (bool sparse : {false, true}) {
        std::vector<int32_t> ids, labels;
        batch(B, T, V, static_cast<uint32_t>(T + 10 * option), sparse, ids, labels);
        expect_fp32_parity(with_option(GetParam(), option, T), B, T, ids, labels,
                           "option " + std::to_string(option) + " T " + std::to_string(T) + " sparse " +
                               std::to_string(sparse));
      }
}

// The rows tail of sparse-label batches (the last layer on the labelled rows only) in post-norm
// blocks: the label patterns of test_cuda_model's RowsTailMatchesDoubleCpu (tail of one sequence
// with a 1-layer model, position 0 alone, every other row, 4 of 5 rows).
TEST_P(CudaModelOptions, RowsTailMatchesDoubleCpu) {
  const int64_t V = 11, B = 2, T = 100;
  for (int option : {0, 1, 2})
    for (int pattern = 0; pattern < 4; ++pattern) {
      ModelConfig cfg = with_option(GetParam(), option, T);
      if (pattern == 0) cfg.n_layers = 1;
      std::vector<int32_t> ids, labels;
      batch(B, T, V, 200 + static_cast<uint32_t>(pattern), false, ids, labels);
      keep_label_pattern(pattern, B, T, labels);
      // + 1e-4 absolute: with position 0 alone labelled, dq and dk are exactly 0 (as in test_cuda_model).
      expect_fp32_parity(cfg, B, T, ids, labels,
                         "option " + std::to_string(option) + " pattern " + std::to_string(pattern), 1e-4);
    }
}

TEST_P(CudaModelOptions, Bf16TracksDoubleCpu) {
  for (int option = 0; option < kOptions; ++option) {
    SCOPED_TRACE("option " + std::to_string(option));
    check_bf16_model(with_option(GetParam(), option, 33));
  }
}

// Recorded CUDA graphs replay the new ops (position add and its column sums, post-norm copies and
// adds) on new batches: equal to the eager runner's losses and gradients.
TEST_P(CudaModelOptions, GraphReplaysEqualEagerLaunches) {
  const int64_t V = 11, B = 3, T = 40;
  Transformer<float> mf(with_option(GetParam(), 1, T), V);
  mf.init_params(7);
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    cuda::DeviceBuffer<float> params = device_params(mf);
    cuda::GpuRunner eager(mf, B, T, cuda::MatmulPrecision::fp32, s, false, true, PathRows::on);
    cuda::GpuRunner graphed(mf, B, T, cuda::MatmulPrecision::fp32, s, true, true, PathRows::on);
    run_pairs(eager, graphed, params, B, T, V, 50, 4, s, [&](const GpuResult& a, const GpuResult& b, int call) {
      EXPECT_NEAR(b.loss_sum, a.loss_sum, 1e-6 * (1 + std::fabs(a.loss_sum))) << "call " << call;
      const std::vector<double> want(a.grads.begin(), a.grads.end());
      for (const ParamView& v : mf.params().views())
        EXPECT_LE(view_error(v, b.grads, want, nullptr), 1e-4) << v.name << " call " << call;
    });
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

// The weight-gradient products and the gate's and PaTH's attention inputs run on a side stream
// (graph-replayed, overlapping the chain that reuses their buffers); with a profiler attached they
// run in order on the main stream.
// Both give the same losses and gradients bit for bit, over dense and sparse batches (the rows
// tail) of a 4-layer hybrid that packs every kind of input projection, in bf16 and fp32 (T = 32:
// the short attention kernels, which sum in a fixed order, unlike the long kernels' atomics).
TEST(CudaModelOverlap, SideStreamWeightGradientsEqualInOrderOnes) {
  if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  ModelConfig c;
  c.d_model = 64, c.n_layers = 4, c.n_heads = 2, c.head_dim = 32, c.path.rank = 16, c.init.std = 0.1;
  c.layers = {Attention::path, Attention::rope, Attention::fox, Attention::path_fox};
  const int64_t V = 13, B = 96, T = 32;
  Transformer<float> mf(c, V);
  mf.init_params(5);
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (auto prec : {cuda::MatmulPrecision::bf16, cuda::MatmulPrecision::fp32}) {
    cuda::DeviceBuffer<float> params = device_params(mf);
    cuda::GpuRunner overlapped(mf, B, T, prec, s, true);
    cuda::GpuRunner in_order(mf, B, T, prec, s, true);
    cuda::StepProfiler profiler(s);
    in_order.set_profiler(&profiler);
    run_pairs(overlapped, in_order, params, B, T, V, 70, 5, s, [&](const GpuResult& a, const GpuResult& b, int call) {
      EXPECT_EQ(a.loss_sum, b.loss_sum) << "call " << call;
      for (const ParamView& v : mf.params().views())
        for (int64_t i = 0; i < v.numel; ++i)
          if (a.grads[v.offset + i] != b.grads[v.offset + i]) {
            ADD_FAILURE() << v.name << "[" << i << "] call " << call << ": " << a.grads[v.offset + i] << " vs "
                          << b.grads[v.offset + i];
            break;
          }
    });
    in_order.set_profiler(nullptr);
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

// Batches with enough rows for the fused SwiGLU forward and down backward (swiglu_up_forward_pays,
// swiglu_down_backward_pays: a wave of their tiles on this device; width 128): bf16 runners of RoPE
// and PaTH against fp32 ones (which the tests above hold to the double CPU model), per view within
// check_bf16_model's tolerance, dense (fused in both layers) and sparse (the rows tail's Mt rows below
// a wave: unfused there).
TEST(CudaModelSwigluFused, FusedKernelsTrackFp32Runner) {
  if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t V = 13, T = 32, B = (96 * sms + T - 1) / T;  // 1.5 waves of 64-row tiles at F = 256
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (Attention kind : {Attention::rope, Attention::path}) {
    ModelConfig c;
    c.d_model = 128, c.n_layers = 2, c.n_heads = 4, c.head_dim = 32, c.mlp_ratio = 2.0, c.attention = kind;
    c.init.std = 0.1;
    ASSERT_TRUE(cuda::swiglu_down_backward_pays(B * T, c.d_model, c.mlp_hidden(), sms));
    ASSERT_TRUE(cuda::swiglu_up_forward_pays(B * T, c.d_model, c.mlp_hidden(), sms));
    ASSERT_FALSE(cuda::swiglu_down_backward_pays(B * T / 2, c.d_model, c.mlp_hidden(), sms));
    Transformer<float> mf(c, V);
    mf.init_params(9);
    cuda::DeviceBuffer<float> params = device_params(mf);
    cuda::GpuRunner bf(mf, B, T, cuda::MatmulPrecision::bf16, s, true);
    cuda::GpuRunner f32(mf, B, T, cuda::MatmulPrecision::fp32, s, true);
    run_pairs(bf, f32, params, B, T, V, 40, 2, s, [&](const GpuResult& a, const GpuResult& b, int call) {
      const std::string what = std::string(to_string(kind)) + (call % 2 ? " sparse" : " dense");
      EXPECT_NEAR(a.loss_sum, b.loss_sum, 2e-2 * std::fabs(b.loss_sum)) << what;
      double total = 0;
      for (float g : b.grads) total += double(g) * g;
      total = std::sqrt(total);
      const std::vector<double> ref(b.grads.begin(), b.grads.end());
      for (const ParamView& v : mf.params().views()) {
        double norm = 0;
        const double err = view_error(v, a.grads, ref, &norm) * norm;
        EXPECT_LE(err, 6e-2 * norm + 5e-3 * total) << what << " " << v.name << " |g| " << norm;
      }
    });
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(CudaModelOptionsLength, RunnerRefusesSequencesBeyondMaxLen) {
  if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  const Transformer<float> mf(with_option(Attention::sba, 1, 10), 11);  // max_len 15
  cuda::GpuRunner ok(mf, 2, 15, cuda::MatmulPrecision::fp32, nullptr);
  try {
    cuda::GpuRunner too_long(mf, 2, 16, cuda::MatmulPrecision::fp32, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "model.max_len: sequences of 16 tokens exceed the 15 learned positions");
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CudaModelOptions, ::testing::Values(Attention::sba, Attention::rope, Attention::path_fox),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace sb
#endif
