// test_cuda_model.cpp: whole-model parity of the CUDA path. For a 2-layer model of every attention
// kind (stick-breaking included): loss and every parameter gradient of GpuRunner against
// TransformerRunner<double> (fp32 and bf16 precision), CUDA-graph replays against eager launches,
// the losses of 20 GpuEngine training steps (graphs on) against CpuEngine, and evaluation with
// padded short batches. Post-norm and learned positions: test_cuda_model_options.cpp. Skips
// without CUDA or without a device.
#include <gtest/gtest.h>

#ifndef STATEBENCH_HAVE_CUDA
TEST(CudaModel, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#else
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "model/cuda/gpu_runner.hpp"
#include "kernels/ops/ops.hpp"
#include "model/transformer.hpp"
#include "train/cpu_engine.hpp"
#include "train/gpu_engine.hpp"
#include "cuda_model_test_util.hpp"

namespace sb {
namespace {

using test::batch;
using test::check_bf16_model;
using test::device_params;
using test::GpuResult;
using test::keep_label_pattern;
using test::run_gpu;
using test::run_pairs;
using test::TwinModels;
using test::view_error;

ModelConfig two_layer(Attention kind, bool variant) {
  ModelConfig c;
  c.d_model = 32, c.n_layers = 2, c.n_heads = 2, c.head_dim = 16, c.attention = kind;
  c.mlp_ratio = 2.0, c.path.rank = 8, c.init.std = 0.2;
  if (variant) c.mlp = MlpKind::gelu, c.norm = NormKind::layernorm, c.tied_embeddings = true, c.path.conv_bias = true;
  return c;
}

class CudaModel : public ::testing::TestWithParam<Attention> {
 protected:
  void SetUp() override {
    if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  }
};

TEST_P(CudaModel, LossAndGradientsMatchDoubleCpu) {
  const int64_t V = 11;
  for (bool variant : {false, true})
    for (int64_t T : {7, 33}) {
      const ModelConfig cfg = two_layer(GetParam(), variant);
      TwinModels m(cfg, V, 3);
      const Transformer<float>& mf = m.f;
      const int64_t n = mf.params().size();
      const int64_t B = 2;
      std::vector<int32_t> ids, labels;
      batch(B, T, V, static_cast<uint32_t>(T), variant, ids, labels);
      TransformerRunner<double> cpu(m.d, B, T);
      const nn::LossSum ls = cpu.forward(ids.data(), labels.data());
      std::vector<double> g_cpu(n, 0.0);
      cpu.backward(1.0 / static_cast<double>(ls.count), g_cpu.data());

      cuda::DeviceBuffer<float> params = device_params(mf), grads(n);
      cuda::GpuRunner gpu(mf, B, T, cuda::MatmulPrecision::fp32, nullptr, true, true, PathRows::on);
      const int64_t M = gpu.forward(params.data(), ids.data(), labels.data());
      ASSERT_EQ(M, ls.count);
      gpu.backward(params.data(), grads.data(), 1.0f / static_cast<float>(M));
      double loss_sum = 0;
      std::vector<float> g_gpu(n);
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaMemcpy(&loss_sum, gpu.loss_sum_device(), sizeof(double), cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(g_gpu.data(), grads.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
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

// Sparse-label batches end the last layer on the labelled rows (model/cuda/gpu_runner_layers.cpp):
// with PaTH there through the rows attention while no sequence has more than kPathRowsMaxPerSeq
// labelled rows (and PathRows allows it), else through the whole-sequence kernels. Loss and every
// gradient must still match the double CPU runner, for label patterns that take each path: the last
// rows of one sequence and none in the other (with a 1-layer model: the tail is the whole layer),
// position 0 alone, 50 labelled rows per sequence (the tail, but not the rows attention) and 80 (no
// tail: more than half the rows); PathRows on and off.
TEST_P(CudaModel, RowsTailMatchesDoubleCpu) {
  const int64_t V = 11, B = 2, T = 100;
  for (PathRows rows : {PathRows::on, PathRows::off})
    for (bool variant : {false, true})
      for (int pattern = 0; pattern < 4; ++pattern) {
        SCOPED_TRACE(rows == PathRows::on ? "path_rows on" : "path_rows off");
        ModelConfig cfg = two_layer(GetParam(), variant);
        if (pattern == 0) cfg.n_layers = 1;
        TwinModels m(cfg, V, 5);
        const int64_t n = m.f.params().size();
        std::vector<int32_t> ids, labels;
        batch(B, T, V, 200 + static_cast<uint32_t>(pattern), false, ids, labels);
        keep_label_pattern(pattern, B, T, labels);
        TransformerRunner<double> cpu(m.d, B, T);
        const nn::LossSum ls = cpu.forward(ids.data(), labels.data());
        std::vector<double> g_cpu(n, 0.0);
        cpu.backward(1.0 / static_cast<double>(ls.count), g_cpu.data());
        cuda::DeviceBuffer<float> params = device_params(m.f), grads(n);
        cuda::GpuRunner gpu(m.f, B, T, cuda::MatmulPrecision::fp32, nullptr, true, true, rows);
        const GpuResult r = run_gpu(gpu, params, grads, ids, labels, nullptr);
        ASSERT_EQ(r.M, ls.count);
        EXPECT_NEAR(r.loss_sum / r.M, ls.loss_sum / ls.count, 1e-4) << "pattern " << pattern << " variant " << variant;
        for (const ParamView& v : m.f.params().views()) {
          double ref = 0;
          const double e = view_error(v, r.grads, g_cpu, &ref);
          // + 1e-4: with position 0 alone labelled, dq and dk are exactly 0 (one key, dS = 0) and the
          // device leaves a softmax cancellation residue ~3e-5 (as test_cuda_attention's T = 1 floor).
          EXPECT_LE(e * ref, 1e-3 * ref + 1e-4) << v.name << " pattern " << pattern << " variant " << variant;
        }
      }
}

// The head's logit buffers are sized to the labelled rows seen so far: a dense batch after a sparse
// one (more rows than the buffers hold) must still match the double CPU runner.
TEST_P(CudaModel, HeadBuffersGrowFromSparseToDenseBatches) {
  const int64_t V = 11, B = 3, T = 29;
  const ModelConfig cfg = two_layer(GetParam(), false);
  TwinModels m(cfg, V, 4);
  const int64_t n = m.f.params().size();
  cuda::DeviceBuffer<float> params = device_params(m.f), grads(n);
  cuda::GpuRunner gpu(m.f, B, T, cuda::MatmulPrecision::fp32, nullptr, true, true, PathRows::on);
  TransformerRunner<double> cpu(m.d, B, T);
  for (bool sparse : {true, false}) {
    std::vector<int32_t> ids, labels;
    batch(B, T, V, sparse ? 31u : 32u, sparse, ids, labels);
    const nn::LossSum ls = cpu.forward(ids.data(), labels.data());
    std::vector<double> g_cpu(n, 0.0);
    cpu.backward(1.0 / static_cast<double>(ls.count), g_cpu.data());
    const GpuResult r = run_gpu(gpu, params, grads, ids, labels, nullptr);
    ASSERT_EQ(r.M, ls.count);
    EXPECT_NEAR(r.loss_sum / r.M, ls.loss_sum / ls.count, 1e-4) << "sparse " << sparse;
    for (const ParamView& v : m.f.params().views())
      EXPECT_LE(view_error(v, r.grads, g_cpu, nullptr), 1e-3) << v.name << " sparse " << sparse;
  }
}

// The layer stacks (with a sparse batch's rows tail, one graph per padded row count) are recorded
// into CUDA graphs on the second call of a kind and replayed after: every call (dense and sparse in
// turn, each a new batch and labelled-row count; calls 4 and 5 replay) must equal the eager runner's. Not bit for bit: the FoX gate
// gradient is summed by fp32 atomics in no fixed order, and a view whose gradient nearly cancels
// shows that relative to its own norm (path_fox, layer 0's bbeta, call 0: 1.0-1.24e-5 in 16 of 160
// runs on an H100, 2026-11-22). A replay of wrong buffers or a stale batch is off by O(1).
TEST_P(CudaModel, GraphReplaysEqualEagerLaunches) {
  const int64_t V = 11, B = 3, T = 40;
  const ModelConfig cfg = two_layer(GetParam(), false);
  Transformer<float> mf(cfg, V);
  mf.init_params(7);
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    cuda::DeviceBuffer<float> params = device_params(mf);
    cuda::GpuRunner eager(mf, B, T, cuda::MatmulPrecision::fp32, s, false, true, PathRows::on);
    cuda::GpuRunner graphed(mf, B, T, cuda::MatmulPrecision::fp32, s, true, true, PathRows::on);
    run_pairs(eager, graphed, params, B, T, V, 50, 6, s, [&](const GpuResult& a, const GpuResult& b, int call) {
      EXPECT_NEAR(b.loss_sum, a.loss_sum, 1e-6 * (1 + std::fabs(a.loss_sum))) << "call " << call;
      const std::vector<double> want(a.grads.begin(), a.grads.end());
      for (const ParamView& v : mf.params().views())
        EXPECT_LE(view_error(v, b.grads, want, nullptr), 1e-4) << v.name << " call " << call;
    });
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

// An evaluation runner (train = false) has no gradient buffers: its forward equals the training
// runner's, and backward() is an error, not a write through null buffers.
TEST_P(CudaModel, EvaluationRunnerMatchesForwardAndRefusesBackward) {
  const int64_t V = 11, B = 3, T = 37;
  const ModelConfig cfg = two_layer(GetParam(), false);
  Transformer<float> mf(cfg, V);
  mf.init_params(9);
  const int64_t n = mf.params().size();
  cuda::DeviceBuffer<float> params = device_params(mf), grads(n);
  cuda::GpuRunner train(mf, B, T, cuda::MatmulPrecision::fp32, nullptr, true, true, PathRows::on);
  cuda::GpuRunner eval(mf, B, T, cuda::MatmulPrecision::fp32, nullptr, true, false, PathRows::on);
  for (int call = 0; call < 3; ++call) {  // the third call replays the recorded graph
    std::vector<int32_t> ids, labels;
    batch(B, T, V, 70 + static_cast<uint32_t>(call), call == 1, ids, labels);
    const int64_t Mt = train.forward(params.data(), ids.data(), labels.data());
    const int64_t Me = eval.forward(params.data(), ids.data(), labels.data());
    ASSERT_EQ(Mt, Me);
    double lt = 0, le = 0;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(&lt, train.loss_sum_device(), sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&le, eval.loss_sum_device(), sizeof(double), cudaMemcpyDeviceToHost));
    EXPECT_NEAR(le, lt, 1e-9 * (1 + std::fabs(lt))) << "call " << call;
    std::vector<int32_t> pt(B * T), pe(B * T);
    train.argmax(pt.data());
    eval.argmax(pe.data());
    EXPECT_EQ(pt, pe) << "call " << call;
  }
  EXPECT_THROW(eval.backward(params.data(), grads.data(), 1.0f), Error);
}

TEST_P(CudaModel, Bf16LossAndGradientsTrackDoubleCpu) { check_bf16_model(two_layer(GetParam(), false)); }
// The variant's ops in bf16 activations: GELU MLP, LayerNorm, tied embeddings, the conv bias.
TEST_P(CudaModel, Bf16VariantTracksDoubleCpu) { check_bf16_model(two_layer(GetParam(), true)); }
// T <= 32: the short kernels read q, k, v from one product, apply RoPE themselves and store dq, dk,
// dv into the packed gradient; a sparse batch ends in the rows tail (PaTH's rows kernels read dense
// q, k, v and write dense gradients there).
TEST_P(CudaModel, Bf16ShortSequencesTrackDoubleCpu) {
  for (bool sparse : {false, true}) {
    SCOPED_TRACE(sparse ? "sparse labels" : "dense labels");
    check_bf16_model(two_layer(GetParam(), false), 21, sparse);
  }
}

// Head dim 64 (width 128, 2 heads): on an H100 the softmax kinds run the wgmma attention kernels.
// The init std is halved with the 4x width, so activations and scores have the width-32 model's
// scale: at std 0.2 the scores' spread is 4x larger (5 against 1.3) and the gradients of the
// near-one-hot attention amplify bf16's rounding to 7-13% (1.1-2.1x this tolerance; measured when
// bf16 precision went from TF32 products on fp32 activations to bf16 activations).
TEST_P(CudaModel, Bf16WideHeadsTrackDoubleCpu) {
  ModelConfig cfg = two_layer(GetParam(), false);
  cfg.d_model = 128, cfg.head_dim = 64, cfg.init.std = 0.1;
  check_bf16_model(cfg);
}

// Evaluation batches of other shapes get their own runner; a short last chunk is padded with
// unlabelled rows (in the training runner once one exists, trained = true): the counts must equal
// the CPU engine's over the same chunks.
class CudaModelEval : public ::testing::TestWithParam<std::tuple<Attention, bool>> {
 protected:
  void SetUp() override {
    if (!cuda::cuda_device_available()) GTEST_SKIP() << "no CUDA device available";
  }
};

TEST_P(CudaModelEval, PaddedChunksMatchCpu) {
  const int64_t V = 11, T = 24;
  const auto [kind, trained] = GetParam();
  const ModelConfig cfg = two_layer(kind, false);
  OptimConfig oc;
  CpuEngine cpu(cfg, oc, V, 1);
  GpuEngine gpu(cfg, oc, V, Precision::fp32);
  cpu.model().init_params(11);
  gpu.model().init_params(11);
  std::vector<int32_t> ids, labels;
  batch(13, T, V, 77, true, ids, labels);
  if (trained) {  // one step of batch 5: the engines now hold a training runner of 5 x T
    const StepResult rc = cpu.train_step(ids.data(), labels.data(), 5, T, 1e-3, 1.0);
    const StepResult rg = gpu.train_step(ids.data(), labels.data(), 5, T, 1e-3, 1.0);
    ASSERT_EQ(rc.labelled, rg.labelled);
  }
  std::vector<uint8_t> mask(ids.size());
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = labels[i] != -100;
  EvalCounts c_cpu, c_gpu;
  for (int64_t first = 0; first < 13; first += 5) {  // chunks of 5, 5, 3
    const int64_t nb = std::min<int64_t>(5, 13 - first);
    cpu.evaluate(ids.data() + first * T, labels.data() + first * T, mask.data() + first * T, nb, T, c_cpu);
    gpu.evaluate(ids.data() + first * T, labels.data() + first * T, mask.data() + first * T, nb, T, c_gpu);
  }
  EXPECT_EQ(c_gpu.scored, c_cpu.scored);
  EXPECT_EQ(c_gpu.sequences, c_cpu.sequences);
  EXPECT_EQ(c_gpu.loss_tokens, c_cpu.loss_tokens);
  EXPECT_NEAR(c_gpu.loss_sum, c_cpu.loss_sum, 1e-3 * c_cpu.loss_sum);
  // Argmax ties aside, predictions agree; allow one flipped position.
  EXPECT_NEAR(static_cast<double>(c_gpu.correct), static_cast<double>(c_cpu.correct), 1.0);
}

// 20 training steps of a CPU and a GPU engine from the same init on the same batches; the GPU
// engine's losses must track the CPU's within loss_tol (relative to 1 + loss), and its gradient
// norms within norm_tol (0 = unchecked). Leaves both engines trained, for further checks.
void twenty_steps(CpuEngine& cpu, GpuEngine& gpu, const OptimConfig& oc, double loss_tol, double norm_tol) {
  const int64_t V = 11, B = 4, T = 24;
  cpu.model().init_params(5);
  gpu.model().init_params(5);
  double worst = 0;  // largest |loss difference| / (1 + loss) over the steps, printed for the margin
  for (int step = 0; step < 20; ++step) {
    std::vector<int32_t> ids, labels;
    batch(B, T, V, 100 + static_cast<uint32_t>(step), true, ids, labels);
    const double lr = scheduled_lr(oc, 20, step);
    const StepResult rc = cpu.train_step(ids.data(), labels.data(), B, T, lr, 1.0);
    const StepResult rg = gpu.train_step(ids.data(), labels.data(), B, T, lr, 1.0);
    ASSERT_EQ(rc.labelled, rg.labelled);
    worst = std::max(worst, std::abs(rg.loss - rc.loss) / (1 + rc.loss));
    EXPECT_NEAR(rg.loss, rc.loss, loss_tol * (1 + rc.loss)) << "step " << step;
    if (norm_tol > 0) EXPECT_NEAR(rg.grad_norm, rc.grad_norm, norm_tol * (1e-3 + rc.grad_norm)) << "step " << step;
  }
  std::printf("20 steps: largest loss deviation %.2e x (1 + loss) (tolerance %.0e)\n", worst, loss_tol);
}

OptimConfig twenty_step_optim() {
  OptimConfig oc;
  oc.lr = 3e-3;
  return oc;
}

TEST_P(CudaModel, TwentyTrainingStepsMatchCpuEngine) {
  const ModelConfig cfg = two_layer(GetParam(), false);
  const OptimConfig oc = twenty_step_optim();
  CpuEngine cpu(cfg, oc, 11, 1);
  GpuEngine gpu(cfg, oc, 11, Precision::fp32);
  twenty_steps(cpu, gpu, oc, 2e-3, 1e-2);
  EXPECT_EQ(gpu.optimizer().steps_taken(), cpu.optimizer().steps_taken());
  // The host mirror carries the trained parameters back.
  const ParamStore<float>& pc = cpu.model().params();
  const ParamStore<float>& pg = gpu.model().params();
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < pc.size(); ++i)
    diff += (pg.params()[i] - pc.params()[i]) * (pg.params()[i] - pc.params()[i]), ref += pc.params()[i] * pc.params()[i];
  EXPECT_LE(std::sqrt(diff), 1e-2 * std::sqrt(ref));
}

TEST_P(CudaModel, TwentyBf16TrainingStepsTrackCpuEngine) {
  const ModelConfig cfg = two_layer(GetParam(), false);
  const OptimConfig oc = twenty_step_optim();
  CpuEngine cpu(cfg, oc, 11, 1);
  GpuEngine gpu(cfg, oc, 11, Precision::bf16);
  twenty_steps(cpu, gpu, oc, 3e-2, 0);
  EXPECT_NE(gpu.device_name().find("(bf16)"), std::string::npos) << gpu.device_name();
}

INSTANTIATE_TEST_SUITE_P(Kinds, CudaModel,
                         ::testing::Values(Attention::path, Attention::rope, Attention::nope, Attention::fox,
                                           Attention::path_fox, Attention::sba),
                         [](const auto& info) { return std::string(to_string(info.param)); });

INSTANTIATE_TEST_SUITE_P(Kinds, CudaModelEval,
                         ::testing::Combine(::testing::Values(Attention::path, Attention::rope, Attention::path_fox,
                                                              Attention::sba),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(to_string(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_after_training" : "_untrained");
                         });

}  // namespace
}  // namespace sb
#endif
