// cuda_model_test_util.hpp: what the whole-model CUDA parity tests share (test_cuda_model.cpp,
// test_cuda_model_options.cpp): random batches, a float model with a double twin (same parameters),
// device parameter uploads, one GPU forward + backward (and pairs of runners on the same batches),
// per-view gradient errors, and the bf16 model check against the double CPU runner.
#pragma once
#ifdef STATEBENCH_HAVE_CUDA
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/device_buffer.hpp"
#include "model/cuda/gpu_runner.hpp"
#include "model/transformer.hpp"

namespace sb::test {

inline void batch(int64_t B, int64_t T, int64_t V, uint32_t seed, bool sparse, std::vector<int32_t>& ids,
           std::vector<int32_t>& labels) {
  std::mt19937 gen(seed);
  ids.resize(B * T), labels.resize(B * T);
  for (int64_t i = 0; i < B * T; ++i) {
    ids[i] = static_cast<int32_t>(gen() % V);
    labels[i] = sparse && gen() % 3 != 0 ? -100 : static_cast<int32_t>(gen() % V);
  }
}

// The rows tail tests' label patterns (the rest set to -100): 0 the last 5 rows of the first
// sequence only, 1 position 0 of the first alone, 2 every other row, 3 four rows of five.
inline void keep_label_pattern(int pattern, int64_t B, int64_t T, std::vector<int32_t>& labels) {
  for (int64_t i = 0; i < B * T; ++i) {
    const int64_t t = i % T;
    const bool keep = pattern == 0   ? (i < T && t >= T - 5)
                      : pattern == 1 ? (i == 0)
                      : pattern == 2 ? (t % 2 == 0)
                                     : (t % 5 != 0);
    if (!keep) labels[i] = -100;
  }
}

// Norm-wise relative difference of one parameter view.
inline double view_error(const ParamView& v, const std::vector<float>& got, const std::vector<double>& want, double* ref_norm) {
  double diff = 0, ref = 0;
  for (int64_t i = v.offset; i < v.offset + v.numel; ++i)
    diff += (got[i] - want[i]) * (got[i] - want[i]), ref += want[i] * want[i];
  if (ref_norm) *ref_norm = std::sqrt(ref);
  return std::sqrt(diff) / (std::sqrt(ref) + 1e-30);
}

// A float model (run on the GPU) and a double copy with the same parameters (the CPU reference).
struct TwinModels {
  Transformer<float> f;
  Transformer<double> d;
  TwinModels(const ModelConfig& cfg, int64_t V, uint64_t seed) : f(cfg, V), d(cfg, V) {
    f.init_params(seed);
    for (int64_t i = 0; i < f.params().size(); ++i) d.params().params()[i] = f.params().params()[i];
  }
};

// The model's parameters as a device buffer.
inline cuda::DeviceBuffer<float> device_params(const Transformer<float>& m) {
  cuda::DeviceBuffer<float> params(m.params().size());
  CUDA_CHECK(cudaMemcpy(params.data(), m.params().params(), m.params().size() * sizeof(float), cudaMemcpyHostToDevice));
  return params;
}

struct GpuResult {
  double loss_sum = 0;
  int64_t M = 0;
  std::vector<float> grads;
};

// One forward + backward of `gpu` on device params; grads zeroed first.
inline GpuResult run_gpu(cuda::GpuRunner& gpu, const cuda::DeviceBuffer<float>& params, cuda::DeviceBuffer<float>& grads,
                  const std::vector<int32_t>& ids, const std::vector<int32_t>& labels, cudaStream_t s) {
  GpuResult r;
  const int64_t n = grads.size();
  CUDA_CHECK(cudaMemsetAsync(grads.data(), 0, n * sizeof(float), s));
  r.M = gpu.forward(params.data(), ids.data(), labels.data());
  gpu.backward(params.data(), grads.data(), 1.0f / static_cast<float>(std::max<int64_t>(1, r.M)));
  r.grads.resize(n);
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaMemcpy(&r.loss_sum, gpu.loss_sum_device(), sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(r.grads.data(), grads.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return r;
}

// Forward + backward of two runners on the same `calls` batches (seeds seed0 + call, odd calls
// sparse), each pair of results handed to check(a, b, call).
template <class Check>
void run_pairs(cuda::GpuRunner& ra, cuda::GpuRunner& rb, const cuda::DeviceBuffer<float>& params, int64_t B,
               int64_t T, int64_t V, uint32_t seed0, int calls, cudaStream_t s, Check&& check) {
  cuda::DeviceBuffer<float> grads_a(params.size()), grads_b(params.size());
  for (int call = 0; call < calls; ++call) {
    std::vector<int32_t> ids, labels;
    batch(B, T, V, seed0 + static_cast<uint32_t>(call), call % 2 == 1, ids, labels);
    const GpuResult a = run_gpu(ra, params, grads_a, ids, labels, s);
    const GpuResult b = run_gpu(rb, params, grads_b, ids, labels, s);
    ASSERT_EQ(a.M, b.M);
    check(a, b, call);
  }
}

// bf16 precision (bf16 activations, products and attention; fp32 master weights) against the double
// CPU model: its loss and gradients, on a batch of length T (sparse: about a third of it labelled).
inline void check_bf16_model(const ModelConfig& cfg, int64_t T = 33, bool sparse = false) {
  const int64_t V = 11, B = 2;
  TwinModels m(cfg, V, 3);
  const Transformer<float>& mf = m.f;
  const int64_t n = mf.params().size();
  std::vector<int32_t> ids, labels;
  batch(B, T, V, 9, sparse, ids, labels);
  TransformerRunner<double> cpu(m.d, B, T);
  const nn::LossSum ls = cpu.forward(ids.data(), labels.data());
  std::vector<double> g_cpu(n, 0.0);
  cpu.backward(1.0 / static_cast<double>(ls.count), g_cpu.data());
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    cuda::DeviceBuffer<float> params = device_params(mf), grads(n);
    cuda::GpuRunner gpu(mf, B, T, cuda::MatmulPrecision::bf16, s, true, true, PathRows::on);
    const GpuResult r = run_gpu(gpu, params, grads, ids, labels, s);
    ASSERT_EQ(r.M, ls.count);
    EXPECT_NEAR(r.loss_sum / r.M, ls.loss_sum / ls.count, 2e-2 * (ls.loss_sum / ls.count));
    // Per view: 6% of its own norm, or 0.5% of the whole gradient's for views whose gradient is a
    // small sum of cancelling terms (e.g. the beta bias: 0.0013 against a total near 1).
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += g_cpu[i] * g_cpu[i];
    total = std::sqrt(total);
    double worst = 0;
    std::string worst_name;
    for (const ParamView& v : mf.params().views()) {
      double ref = 0;
      const double err = view_error(v, r.grads, g_cpu, &ref) * ref;
      EXPECT_LE(err, 6e-2 * ref + 5e-3 * total) << v.name << " |g| " << ref << " total " << total;
      if (err / (6e-2 * ref + 5e-3 * total) > worst) worst = err / (6e-2 * ref + 5e-3 * total), worst_name = v.name;
    }
    std::printf("bf16 gradients: largest error %.2f of its tolerance (%s); loss %.2e relative\n", worst,
                worst_name.c_str(), std::fabs(r.loss_sum / r.M - ls.loss_sum / ls.count) / (ls.loss_sum / ls.count));
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace sb::test
#endif
