// test_cuda_ops.cpp: every CUDA op of kernels/ops/ops.hpp and model/cuda/blas.hpp (forward and
// backward) against the CPU reference op of src/nn/ on awkward shapes (T = 1, 7, 113, 257; head
// dims 16-128), plus grad-norm / clipping / AdamW against the CPU optimiser (the bf16 ops and the
// row gathers: test_cuda_ops_bf16.cpp). Skips with a message when built without CUDA or when no
// device is present. Independent of the attention kernels.
#include <fmt/format.h>
#include <gtest/gtest.h>

#ifndef STATEBENCH_HAVE_CUDA
TEST(CudaOps, RequiresCuda) { GTEST_SKIP() << "statebench was built without CUDA (-DSTATEBENCH_CUDA=OFF)"; }
#else
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda_ops_test_util.hpp"
#include "core/error.hpp"
#include "model/cuda/blas.hpp"
#include "model/cuda/gpu_runner.hpp"
#include "kernels/ops/ops.hpp"
#include "model/param_store.hpp"
#include "nn/ops_act.hpp"
#include "nn/ops_attention.hpp"
#include "nn/ops_basic.hpp"
#include "nn/ops_loss.hpp"
#include "nn/path_wpath.hpp"
#include "train/optimizer.hpp"

namespace sb {
namespace {

using namespace test_cuda;


// The embedding index (host): ids ascending, rows within an id in increasing n, an id with more
// rows than the segment length (here 80: 15 slot rows hold 2 N / 80 + 1) cut into segments that go
// through scratch slots.
TEST(CudaOpsHost, EmbeddingIndexGroupsAndSegmentsRowsById) {
  std::vector<int32_t> ids(600, 3);
  ids[1] = 0, ids[4] = 0, ids[5] = 7;
  const int64_t N = 600, D = 4, floats = 64;  // 15 slot rows: segments of 80 rows
  ASSERT_EQ(cuda::embedding_segment_rows(N, D, floats), 80);
  EXPECT_EQ(cuda::embedding_segment_rows(N, D, int64_t{1} << 20), 64);  // the shortest segment
  std::vector<int32_t> index(cuda::embedding_index_ints(N), -1), counts(8);
  cuda::embedding_index_build(index.data(), ids.data(), N, 8, D, counts.data(), floats);
  const int32_t *seg_id = index.data() + 2, *seg_begin = index.data() + 2 + N, *seg_slot = index.data() + 3 + 2 * N;
  const int32_t *order = index.data() + 3 + 3 * N, *multi_id = index.data() + 3 + 4 * N;
  const int32_t* multi_slot0 = index.data() + 3 + 5 * N;
  ASSERT_EQ(index[0], 10);  // id 0, id 3 in 8 segments (7 of 80 rows + 37), id 7
  ASSERT_EQ(index[1], 1);
  EXPECT_EQ(std::vector<int32_t>(seg_id, seg_id + 10), (std::vector<int32_t>{0, 3, 3, 3, 3, 3, 3, 3, 3, 7}));
  EXPECT_EQ(std::vector<int32_t>(seg_begin, seg_begin + 11),
            (std::vector<int32_t>{0, 2, 82, 162, 242, 322, 402, 482, 562, 599, 600}));
  EXPECT_EQ(std::vector<int32_t>(seg_slot, seg_slot + 10), (std::vector<int32_t>{-1, 0, 1, 2, 3, 4, 5, 6, 7, -1}));
  EXPECT_EQ(multi_id[0], 3);
  EXPECT_EQ(multi_slot0[0], 0);
  EXPECT_EQ(multi_slot0[1], 8);
  EXPECT_EQ(std::vector<int32_t>(order, order + 4), (std::vector<int32_t>{1, 4, 0, 2}));
  EXPECT_EQ(order[599], 5);
  // Without a scratch every id is one segment.
  cuda::embedding_index_build(index.data(), ids.data(), N, 8, D, counts.data(), 0);
  EXPECT_EQ(index[0], 3);
  EXPECT_EQ(index[1], 0);
}

// Large batches too: N = 6000 rows over a vocabulary of 8192 (most ids once) and of 3 (ids of ~2000
// rows, summed in segments through the scratch slots); small N runs without a scratch.
TEST_F(CudaOps, Embedding) {
  Dev<float> partials(static_cast<size_t>(64 * 256));
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{257}, int64_t{6000}})
    for (int64_t V : {3, 300, 8192})
      for (int64_t D : {16, 96, 256}) {
        std::mt19937 gen(static_cast<uint32_t>(N * V + D));
        std::vector<int32_t> ids(N);
        for (auto& i : ids) i = static_cast<int32_t>(gen() % V);
        const auto wte = randn(V * D, 1), dout = randn(N * D, 2);
        std::vector<float> out(N * D), dwte = randn(V * D, 3);
        std::vector<int32_t> index(cuda::embedding_index_ints(N)), counts(V);
        const cuda::ReduceScratch scratch = N > 1000 ? cuda::ReduceScratch{partials.p, 64 * 256} : cuda::ReduceScratch{};
        cuda::embedding_index_build(index.data(), ids.data(), N, V, D, counts.data(), scratch.floats);
        Dev<int32_t> d_ids(ids), d_index(index);
        Dev<float> d_wte(wte), d_out(N * D), d_dout(dout), d_dwte(dwte);
        cuda::embedding_forward_cuda(d_out.p, d_ids.p, d_wte.p, N, V, D, s);
        cuda::embedding_backward_cuda(d_dwte.p, d_dout.p, d_index.p, N, V, D, s, scratch);
        nn::embedding_forward(out.data(), ids.data(), wte.data(), N, V, D);
        nn::embedding_backward(dwte.data(), dout.data(), ids.data(), N, V, D);
        expect_close(d_out.host(), out, 0, 0, "embedding forward");
        expect_close(d_dwte.host(), dwte, 1e-5, N > 1000 ? 2e-3 : 1e-5, "embedding backward");
      }
}

// Learned positions in the GPU runner: add_bias_cuda over rows of T D is nn::position_forward, and
// bias_backward_cuda over them nn::position_backward (into the first T rows of a longer table); and
// scale_cuda (the scaled PaTH-FoX gate).
TEST_F(CudaOps, PositionsAndScale) {
  Dev<float> partials(static_cast<size_t>(64 * 256));
  for (int64_t B : {1, 3, 64})
    for (int64_t T : kTs) {
      const int64_t D = 48, rows = T + 3;
      const auto x = randn(B * T * D, 1), wpe = randn(rows * D, 2), dout = randn(B * T * D, 3);
      std::vector<float> out = x, dwpe = randn(rows * D, 4);
      Dev<float> d_x(x), d_wpe(wpe), d_dout(dout), d_dwpe(dwpe);
      cuda::add_bias_cuda(d_x.p, d_wpe.p, B, T * D, s);
      cuda::bias_backward_cuda(d_dwpe.p, d_dout.p, B, T * D, s, cuda::ReduceScratch{partials.p, 64 * 256});
      nn::position_forward(out.data(), wpe.data(), B, T, D);
      nn::position_backward(dwpe.data(), dout.data(), B, T, D);
      expect_close(d_x.host(), out, 1e-6, 1e-6, "position forward");
      expect_close(d_dwpe.host(), dwpe, 1e-5, 1e-5, "position backward");
    }
  const auto v = randn(1000, 5);
  Dev<float> d_v(v);
  cuda::scale_cuda(d_v.p, 0.125f, 1000, s);
  std::vector<float> want = v;
  for (auto& x : want) x *= 0.125f;
  expect_close(d_v.host(), want, 0, 0, "scale");
}

TEST_F(CudaOps, Bf16ConversionRoundsToNearestEven) {
  const float e = std::ldexp(1.f, -8);  // half the bf16 spacing at 1
  const std::vector<float> x = {1.f, 1.f + e, 1.f + 3 * e, 1.f + 1.5f * e, -2.5f, 0.f, 3.0e38f, 1e-30f};
  const std::vector<float> want = {1.f, 1.f, 1.f + 4 * e, 1.f + 2 * e, -2.5f, 0.f, 0, 0};
  const int64_t n = static_cast<int64_t>(x.size());
  Dev<float> d_x(x), d_y(n);
  cuda::DeviceBuffer<uint16_t> b(n);
  cuda::f32_to_bf16_cuda(b.data(), d_x.p, n, s);
  cuda::bf16_to_f32_cuda(d_y.p, b.data(), n, s);
  const auto y = d_y.host();
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y[i], want[i]) << "x = " << x[i];
  EXPECT_NEAR(y[6] / 3.0e38, 1.0, 4e-3);
  EXPECT_NEAR(y[7] / 1e-30, 1.0, 4e-3);
  // Long, odd-length and misaligned arrays (the four-element kernels, their tail and the scalar
  // fallback) round trip the same values.
  const auto r = randn(4099, 31);
  Dev<float> d_r(r), d_back(4099);
  cuda::DeviceBuffer<uint16_t> rb(4099);
  for (int64_t off : {0, 1}) {
    cuda::f32_to_bf16_cuda(rb.data() + off, d_r.p + off, 4099 - off, s);
    cuda::bf16_to_f32_cuda(d_back.p + off, rb.data() + off, 4099 - off, s);
    const auto back = d_back.host();
    for (int64_t i = off; i < 4099; ++i)
      ASSERT_EQ(back[i], __bfloat162float(__float2bfloat16_rn(r[i]))) << "offset " << off << " i " << i;
  }
}

TEST_F(CudaOps, LinearFp32Tf32AndBf16) {
  for (auto prec : {cuda::MatmulPrecision::fp32, cuda::MatmulPrecision::tf32, cuda::MatmulPrecision::bf16}) {
    cuda::Blas blas(prec, s);
    const double tol = prec == cuda::MatmulPrecision::fp32 ? 1e-5 : prec == cuda::MatmulPrecision::tf32 ? 3e-3 : 1.6e-2;
    for (int64_t N : kTs)
      for (auto [I, O] : {std::pair<int64_t, int64_t>{16, 48}, {130, 7}, {64, 257}}) {
        const auto x = randn(N * I, 4), w = randn(O * I, 5, 0.2f), b = randn(O, 6), dy = randn(N * O, 7);
        auto dx = randn(N * I, 8), dw = randn(O * I, 9), db = randn(O, 10);
        std::vector<float> y(N * O);
        Dev<float> d_x(x), d_w(w), d_b(b), d_dy(dy), d_dx(dx), d_dw(dw), d_db(db), d_y(N * O);
        cuda::linear_forward_cuda(blas, d_y.p, d_x.p, d_w.p, d_b.p, N, I, O);
        cuda::linear_backward_cuda(blas, d_dx.p, d_dw.p, d_db.p, d_dy.p, d_x.p, d_w.p, N, I, O, true);
        nn::linear_forward(y.data(), x.data(), w.data(), b.data(), N, I, O);
        nn::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, I, O);
        expect_close(d_y.host(), y, tol, tol * 10, "linear forward");
        expect_close(d_dx.host(), dx, tol, tol * 10, "linear dinp (accumulated)");
        expect_close(d_dw.host(), dw, tol, tol * 30, "linear dweight");
        expect_close(d_db.host(), db, 1e-5, 1e-4, "linear dbias");
        if (prec == cuda::MatmulPrecision::bf16) {  // the bf16 products really round (else this test proves nothing)
          double worst = 0;
          const auto got = d_y.host();
          for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - y[i]));
          if (N >= 7) EXPECT_GT(worst, 1e-5) << "bf16 forward equals fp32 exactly: not rounded?";
        }
        // Overwrite mode of dinp.
        std::vector<float> dx0(N * I, 0.f);
        nn::linear_backward(dx0.data(), static_cast<float*>(nullptr), static_cast<float*>(nullptr), dy.data(),
                            x.data(), w.data(), N, I, O);
        cuda::linear_backward_cuda(blas, d_dx.p, nullptr, nullptr, d_dy.p, d_x.p, d_w.p, N, I, O, false);
        expect_close(d_dx.host(), dx0, tol, tol * 10, "linear dinp (overwritten)");
      }
  }
}

// out = residual + x W^T in the product's epilogue (cuBLASLt) and through the fallback (residual copied,
// then cublasGemmEx with beta 1: a Blas made with use_lt = false), into a separate out and in place; a misaligned
// weight view (one float off) must find an algorithm for its alignment or fall back, never fault.
TEST_F(CudaOps, LinearResidualForward) {
  for (bool lt : {true, false})
    for (auto prec : {cuda::MatmulPrecision::fp32, cuda::MatmulPrecision::tf32}) {
      cuda::Blas blas(prec, s, lt);
      EXPECT_EQ(blas.uses_lt(), lt);
      const double tol = prec == cuda::MatmulPrecision::fp32 ? 1e-5 : 3e-3;
      for (int64_t N : kTs)
        for (auto [I, O] : {std::pair<int64_t, int64_t>{16, 48}, {130, 7}, {256, 256}})
          for (int64_t w_off : {0, 1}) {
            SCOPED_TRACE(fmt::format("lt {} N {} I {} O {} weight offset {}", lt, N, I, O, w_off));
            const auto x = randn(N * I, 4), w = randn(O * I + 1, 5, 0.2f), res = randn(N * O, 6, 3.f);
            std::vector<float> y(N * O);
            nn::linear_forward(y.data(), x.data(), w.data() + w_off, static_cast<const float*>(nullptr), N, I, O);
            for (int64_t i = 0; i < N * O; ++i) y[i] += res[i];
            Dev<float> d_x(x), d_w(w), d_res(res), d_y(N * O);
            const float* wp = d_w.p + w_off;
            cuda::linear_forward_residual_cuda(blas, d_y.p, cuda::f32_operand(d_x.p), cuda::f32_operand(wp), d_res.p,
                                               N, I, O);
            expect_close(d_y.host(), y, tol, tol * 10, "residual linear");
            EXPECT_EQ(d_res.host(), res) << "the residual was written";
            cuda::linear_forward_residual_cuda(blas, d_res.p, cuda::f32_operand(d_x.p), cuda::f32_operand(wp), d_res.p,
                                               N, I, O);
            expect_close(d_res.host(), y, tol, tol * 10, "residual linear in place");
          }
    }
}

// A norm backward's accumulate mode and bf16 copy: run(dinp, accumulate, dinp_bf16) must give
// pre + the overwritten result `over`, bit for bit, and the copy bf16 of that.
template <class Run>
void check_norm_accumulate(const std::vector<float>& over, Run run, const std::string& what) {
  const auto pre = randn(over.size(), 17);
  Dev<float> d_acc(pre);
  Dev<uint16_t> d_16(over.size());
  run(d_acc.p, true, d_16.p);
  const auto acc = d_acc.host();
  const auto b16 = d_16.host();
  for (size_t i = 0; i < over.size(); ++i) {
    ASSERT_EQ(acc[i], pre[i] + over[i]) << what << " accumulated, element " << i;
    ASSERT_EQ(b16[i], __bfloat16_as_ushort(__float2bfloat16_rn(acc[i]))) << what << " bf16 copy, element " << i;
  }
}

// Each shape runs twice: without a ReduceScratch (column sums in one pass, then the per-row kernel) and
// with one (the backward sums the parameter gradients itself, per chunk of rows, then in order; at
// D = 800 LayerNorm's two shared arrays exceed 48 KB, so it takes the column sums through the scratch).
TEST_F(CudaOps, Norms) {
  Dev<float> partials(static_cast<size_t>(cuda::kReduceChunks * 128));
  for (int64_t N : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{257}, int64_t{3001}})
    for (int64_t D : {16, 64, 100, 800})
    for (bool use_scratch : {false, true}) {
      SCOPED_TRACE(fmt::format("N {} D {} scratch {}", N, D, use_scratch));
      const cuda::ReduceScratch scratch = use_scratch ? cuda::ReduceScratch{partials.p, cuda::kReduceChunks * 128}
                                                      : cuda::ReduceScratch{};
      const double gatol = N > 1000 ? 2e-3 : 1e-4;  // parameter gradients: sums of N terms
      const auto x = randn(N * D, 11, 2.f), g = randn(D, 12), bias = randn(D, 13), dy = randn(N * D, 14);
      Dev<float> d_x(x), d_g(g), d_b(bias), d_dy(dy), d_out(N * D), d_mean(N), d_rstd(N), d_dx(N * D);
      // RMSNorm
      std::vector<float> out(N * D), rstd(N), dx(N * D, 0.f), dg = randn(D, 15), db = randn(D, 16);
      Dev<float> d_dg(dg), d_db(db);
      nn::rmsnorm_forward(out.data(), rstd.data(), x.data(), g.data(), N, D);
      nn::rmsnorm_backward(dx.data(), dg.data(), dy.data(), x.data(), g.data(), rstd.data(), N, D);
      cuda::rmsnorm_forward_cuda(d_out.p, d_rstd.p, d_x.p, d_g.p, N, D, 1e-6, s);
      cuda::rmsnorm_backward_cuda(d_dx.p, d_dg.p, d_dy.p, d_x.p, d_g.p, d_rstd.p, N, D, s, scratch);
      expect_close(d_out.host(), out, 1e-5, 1e-5, "rmsnorm forward");
      expect_close(d_rstd.host(), rstd, 1e-5, 0, "rmsnorm rstd");
      expect_close(d_dx.host(), dx, 1e-4, 1e-5, "rmsnorm dinp");
      expect_close(d_dg.host(), dg, 1e-4, gatol, "rmsnorm dweight");
      check_norm_accumulate(d_dx.host(), [&](float* dinp, bool acc, uint16_t* d16) {
        cuda::rmsnorm_backward_cuda(dinp, nullptr, d_dy.p, d_x.p, d_g.p, d_rstd.p, N, D, s, scratch, acc, d16);
      }, "rmsnorm dinp");
      // LayerNorm
      std::vector<float> mean(N), dx2(N * D, 0.f), dg2 = dg, db2 = db;
      Dev<float> d_dg2(dg2), d_db2(db2);
      nn::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), g.data(), bias.data(), N, D);
      nn::layernorm_backward(dx2.data(), dg2.data(), db2.data(), dy.data(), x.data(), g.data(), mean.data(),
                             rstd.data(), N, D);
      cuda::layernorm_forward_cuda(d_out.p, d_mean.p, d_rstd.p, d_x.p, d_g.p, d_b.p, N, D, 1e-5, s);
      cuda::layernorm_backward_cuda(d_dx.p, d_dg2.p, d_db2.p, d_dy.p, d_x.p, d_g.p, d_mean.p, d_rstd.p, N, D, s,
                                    scratch);
      expect_close(d_out.host(), out, 1e-5, 1e-5, "layernorm forward");
      expect_close(d_dx.host(), dx2, 1e-4, 1e-5, "layernorm dinp");
      expect_close(d_dg2.host(), dg2, 1e-4, gatol, "layernorm dweight");
      expect_close(d_db2.host(), db2, 1e-5, gatol, "layernorm dbias");
      check_norm_accumulate(d_dx.host(), [&](float* dinp, bool acc, uint16_t* d16) {
        cuda::layernorm_backward_cuda(dinp, nullptr, nullptr, d_dy.p, d_x.p, d_g.p, d_mean.p, d_rstd.p, N, D, s,
                                      scratch, acc, d16);
      }, "layernorm dinp");
    }
}

// n = 4099: the scalar kernels; 4096: four elements per thread.
TEST_F(CudaOps, Activations) {
  for (int64_t n : {int64_t{4099}, int64_t{4096}}) {
    auto x = randn(n, 17, 4.f);
    x[0] = 0.f, x[1] = 60.f, x[2] = -60.f, x[3] = 1e-3f;
    const auto dy = randn(n, 18);
    Dev<float> d_x(x), d_dy(dy), d_out(n), d_dx(n);
    using Fwd = void (*)(float*, const float*, int64_t);
    using Bwd = void (*)(float*, const float*, const float*, int64_t);
    struct Case {
      cuda::Act act;
      Fwd fwd;
      Bwd bwd;
      const char* name;
    };
    for (const Case& c : {Case{cuda::Act::silu, nn::silu_forward<float>, nn::silu_backward<float>, "silu"},
                          Case{cuda::Act::gelu, nn::gelu_forward<float>, nn::gelu_backward<float>, "gelu"},
                          Case{cuda::Act::sigmoid, nn::sigmoid_forward<float>, nn::sigmoid_backward<float>, "sigmoid"},
                          Case{cuda::Act::logsigmoid, nn::logsigmoid_forward<float>, nn::logsigmoid_backward<float>,
                               "logsigmoid"}}) {
      std::vector<float> out(n), dx(n, 0.f);
      c.fwd(out.data(), x.data(), n);
      c.bwd(dx.data(), dy.data(), x.data(), n);
      cuda::act_forward_cuda(c.act, d_out.p, d_x.p, n, s);
      cuda::act_backward_cuda(c.act, d_dx.p, d_dy.p, d_x.p, n, s);
      expect_close(d_out.host(), out, 1e-5, 1e-6, std::string(c.name) + " forward n " + std::to_string(n));
      expect_close(d_dx.host(), dx, 1e-5, 1e-6, std::string(c.name) + " backward n " + std::to_string(n));
    }
  }
  for (int64_t N : kTs)
    for (int64_t F : {37, 40}) {  // 40: the four-column kernels
    const auto g = randn(N * 2 * F, 19, 3.f), dyy = randn(N * F, 20);
    std::vector<float> out(N * F), dg(N * 2 * F, 0.f);
    nn::swiglu_forward(out.data(), g.data(), N, F);
    nn::swiglu_backward(dg.data(), dyy.data(), g.data(), N, F);
    Dev<float> d_g(g), d_dyy(dyy), d_o(N * F), d_dg(N * 2 * F);
    cuda::swiglu_forward_cuda(d_o.p, d_g.p, N, F, s);
    cuda::swiglu_backward_cuda(d_dg.p, d_dyy.p, d_g.p, N, F, s);
    expect_close(d_o.host(), out, 1e-5, 1e-6, "swiglu forward");
    expect_close(d_dg.host(), dg, 1e-5, 1e-6, "swiglu backward");
    }
}

TEST_F(CudaOps, Rope) {
  for (int64_t T : kTs)
    for (int64_t Dh : {12, 16, 32, 64, 128}) {  // 12: a pair a thread, else four
      const int64_t B = 2, H = 3, n = B * T * H * Dh;
      const auto x = randn(n, 23), dy = randn(n, 24);
      std::vector<float> out(n), dx(n, 0.f);
      nn::rope_forward(out.data(), x.data(), B, T, H, Dh, 10000.0);
      nn::rope_backward(dx.data(), dy.data(), B, T, H, Dh, 10000.0);
      Dev<float> d_x(x), d_dy(dy), d_out(n), d_dx(n), d_cs(T * Dh);
      cuda::rope_table_cuda(d_cs.p, T, Dh, 10000.0, s);
      cuda::rope_forward_cuda(d_out.p, d_x.p, d_cs.p, B, T, H, Dh, s);
      cuda::rope_backward_cuda(d_dx.p, d_dy.p, d_cs.p, B, T, H, Dh, s);
      expect_close(d_out.host(), out, 1e-5, 1e-5, "rope forward");
      expect_close(d_dx.host(), dx, 1e-5, 1e-5, "rope backward");
      cuda::rope_forward_cuda(d_x.p, d_x.p, d_cs.p, B, T, H, Dh, s);  // in place
      expect_close(d_x.host(), out, 1e-5, 1e-5, "rope forward in place");
    }
}

// T = 1500 (3000 rows) sums the w-path parameter gradients over row chunks (ReduceScratch).
TEST_F(CudaOps, PathWPathAndBeta) {
  Dev<float> partials(static_cast<size_t>(cuda::kReduceChunks * 4 * 256));
  for (int64_t T : {int64_t{1}, int64_t{7}, int64_t{113}, int64_t{257}, int64_t{1500}})
    for (int64_t Dh : {16, 32, 64, 128})
      for (bool bias : {false, true}) {
        const int64_t B = 2, H = 2, C = H * Dh, n = B * T * C;
        const cuda::ReduceScratch scratch = T > 1000 ? cuda::ReduceScratch{partials.p, cuda::kReduceChunks * 4 * 256}
                                                     : cuda::ReduceScratch{};
        const double gatol = T > 1000 ? 2e-3 : 1e-4;
        const auto u = randn(n, 25), wc = randn(C * 3, 26, 0.5f), cb = randn(C, 27, 0.3f), dw = randn(n, 28);
        std::vector<float> w(n), conv(n), du(n, 0.f), dwc = randn(C * 3, 29), dcb = randn(C, 30);
        nn::path_wpath_forward(w.data(), conv.data(), u.data(), wc.data(), bias ? cb.data() : nullptr, B, T, H, Dh,
                               1e-6f);
        nn::path_wpath_backward(du.data(), dwc.data(), bias ? dcb.data() : nullptr, dw.data(), conv.data(), u.data(),
                                wc.data(), B, T, H, Dh, 1e-6f);
        Dev<float> d_u(u), d_wc(wc), d_cb(cb), d_dw(dw), d_w(n), d_du(n), d_da(n);
        Dev<float> d_dwc(randn(C * 3, 29)), d_dcb(randn(C, 30));
        const float* cbp = bias ? d_cb.p : nullptr;
        cuda::path_wpath_forward_cuda(d_w.p, d_u.p, d_wc.p, cbp, B, T, H, Dh, 1e-6f, s);
        cuda::path_wpath_backward_cuda(d_du.p, d_dwc.p, bias ? d_dcb.p : nullptr, d_da.p, d_dw.p, d_u.p, d_wc.p, cbp, B,
                                       T, H, Dh, 1e-6f, s, scratch);
        expect_close(d_w.host(), w, 1e-5, 1e-5, "wpath w");
        expect_close(d_du.host(), du, 1e-4, 1e-4, "wpath du");
        // du as bf16 into a packed operand's columns (rows of C + 12; from column 4 the fused kernel's
        // 8-byte stores, from column 3 the per-row kernels): the same kernels' fp32 du (aligned, or one
        // float off), rounded, bit for bit.
        for (int64_t col : {4, 3}) {
          const int64_t ld = C + 12, N = B * T;
          Dev<float> d_f32(static_cast<size_t>(n + 1));
          Dev<uint16_t> d_packed(static_cast<size_t>(N * ld)), d_rounded(static_cast<size_t>(n));
          float* f32 = d_f32.p + (col == 4 ? 0 : 1);
          cuda::path_wpath_backward_cuda(f32, nullptr, nullptr, d_da.p, d_dw.p, d_u.p, d_wc.p, cbp, B, T, H, Dh, 1e-6f,
                                         s);
          cuda::f32_to_bf16_cuda(d_rounded.p, f32, n, s);
          cuda::path_wpath_backward_cuda(nullptr, nullptr, nullptr, d_da.p, d_dw.p, d_u.p, d_wc.p, cbp, B, T, H, Dh,
                                         1e-6f, s, {}, d_packed.p + col, ld);
          const std::vector<uint16_t> packed = d_packed.host(), rounded = d_rounded.host();
          int64_t differ = 0;
          for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < C; ++c) differ += packed[r * ld + col + c] != rounded[r * C + c];
          EXPECT_EQ(differ, 0) << "wpath du in bf16 at column " << col << ", T " << T << " Dh " << Dh;
        }
        expect_close(d_dwc.host(), dwc, 1e-4, gatol, "wpath dwconv");
        if (bias) expect_close(d_dcb.host(), dcb, 1e-4, gatol, "wpath dbias");
      }
  // beta over [N, H] with its bias: H = 4 sums the bias gradient in the same pass, H = 3 (not a
  // divisor of the block) by column sums afterwards; without a bias z is left alone.
  for (int64_t H : {4, 3})
    for (float bmax : {2.f, 1.5f})
      for (bool with_bias : {true, false}) {
        const int64_t N = 1001, n = N * H;
        auto z = randn(n, 31, 3.f);
        z[0] = 40.f, z[1] = -40.f;
        const auto db = randn(n, 32), bias = randn(H, 33);
        std::vector<float> zb = z, beta(n), dz(n, 0.f), dbias = randn(H, 34), dbias0 = dbias;
        if (with_bias)
          for (int64_t i = 0; i < n; ++i) zb[i] += bias[i % H];
        nn::path_beta_forward(beta.data(), zb.data(), n, bmax);
        nn::path_beta_backward(dz.data(), db.data(), zb.data(), n, bmax);
        for (int64_t i = 0; i < n; ++i) dbias[i % H] += dz[i];
        Dev<float> d_z(z), d_db(db), d_beta(n), d_dz(n), d_bias(bias), d_dbias(dbias0);
        cuda::path_beta_forward_cuda(d_beta.p, d_z.p, with_bias ? d_bias.p : nullptr, N, H, bmax, s);
        cuda::path_beta_backward_cuda(d_dz.p, with_bias ? d_dbias.p : nullptr, d_db.p, d_z.p, N, H, bmax, s,
                                      cuda::ReduceScratch{partials.p, cuda::kReduceChunks * 4 * 256});
        expect_close(d_z.host(), zb, 0, 0, "beta's z (bias added in place)");
        expect_close(d_beta.host(), beta, 1e-6, 1e-7, "beta forward");
        expect_close(d_dz.host(), dz, 1e-5, 1e-7, "beta backward");
        expect_close(d_dbias.host(), with_bias ? dbias : dbias0, 1e-5, 1e-5, "beta bias gradient");
      }
}

TEST_F(CudaOps, CrossEntropyAndArgmax) {
  for (int64_t M : kTs)
    for (int64_t V : {2, 37, 1000}) {
      auto logits = randn(M * V, 33, 3.f);
      std::mt19937 gen(static_cast<uint32_t>(M + V));
      std::vector<int32_t> labels(M);
      for (auto& l : labels) l = static_cast<int32_t>(gen() % V);
      if (V > 2) logits[V - 1] = logits[1] = 50.f;  // a tie in row 0: argmax must be index 1
      std::vector<float> losses(M), dl(M * V, 0.f);
      const nn::LossSum ls = nn::crossentropy_forward(losses.data(), static_cast<float*>(nullptr), logits.data(),
                                                      labels.data(), M, V);
      nn::crossentropy_backward(dl.data(), static_cast<const float*>(nullptr), logits.data(), labels.data(), M, V,
                                0.25);
      Dev<float> d_logits(logits), d_losses(M), d_dl(M * V);
      Dev<int32_t> d_labels(labels), d_arg(M);
      Dev<double> d_sum(cuda::crossentropy_sum_doubles(M));
      cuda::crossentropy_forward_cuda(d_losses.p, d_sum.p, d_logits.p, d_labels.p, M, V, s);
      cuda::crossentropy_backward_cuda(d_dl.p, d_logits.p, d_labels.p, M, V, 0.25f, s);
      cuda::argmax_rows_cuda(d_arg.p, d_logits.p, M, V, s);
      expect_close(d_losses.host(), losses, 1e-5, 1e-5, "crossentropy losses");
      EXPECT_NEAR(d_sum.host()[0], ls.loss_sum, 1e-5 * (1 + std::fabs(ls.loss_sum)));
      expect_close(d_dl.host(), dl, 1e-5, 1e-7, "crossentropy backward");
      const auto arg = d_arg.host();
      for (int64_t m = 0; m < M; ++m) {
        const float* row = logits.data() + m * V;
        EXPECT_EQ(arg[m], std::max_element(row, row + V) - row) << "argmax row " << m;
      }
    }
  // Padding rows (label -1) after 4 labelled ones: the labelled rows as the reference's, the padding
  // rows' loss and gradient 0 (warp and block kernels).
  for (int64_t V : {37, 1000}) {
    const int64_t M = 7, labelled = 4;
    const auto logits = randn(M * V, 35, 3.f);
    std::vector<int32_t> labels = {3, 0, 11, 36, -1, -1, -1};
    std::vector<float> losses(labelled), dl(M * V, 0.f);
    const nn::LossSum ls = nn::crossentropy_forward(losses.data(), static_cast<float*>(nullptr), logits.data(),
                                                    labels.data(), labelled, V);
    nn::crossentropy_backward(dl.data(), static_cast<const float*>(nullptr), logits.data(), labels.data(), labelled,
                              V, 0.25);
    losses.resize(M, 0.f);
    Dev<float> d_logits(logits), d_losses(std::vector<float>(M, 7.f)), d_dl(std::vector<float>(M * V, 7.f));
    Dev<int32_t> d_labels(labels);
    Dev<double> d_sum(cuda::crossentropy_sum_doubles(M));
    cuda::crossentropy_forward_cuda(d_losses.p, d_sum.p, d_logits.p, d_labels.p, M, V, s);
    cuda::crossentropy_backward_cuda(d_dl.p, d_logits.p, d_labels.p, M, V, 0.25f, s);
    expect_close(d_losses.host(), losses, 1e-5, 1e-5, "crossentropy losses with padding rows");
    EXPECT_NEAR(d_sum.host()[0], ls.loss_sum, 1e-5 * (1 + std::fabs(ls.loss_sum)));
    expect_close(d_dl.host(), dl, 1e-5, 1e-7, "crossentropy backward with padding rows");
  }
}

// Over many blocks (n = 3e6 + 1: 1024 partials, summed by whichever block finishes last), twice in a
// row: the same bits, the host's double sum to rounding.
TEST_F(CudaOps, GradNormOverManyBlocks) {
  const int64_t n = 3000001;
  const auto g = randn(n, 77);
  double sum = 0;
  for (float x : g) sum += static_cast<double>(x) * x;
  Dev<float> d_g(g);
  Dev<double> d_norm(1), d_part(cuda::grad_norm_partials(n));
  cuda::grad_norm_cuda(d_norm.p, d_part.p, d_g.p, n, s);
  const double first = d_norm.host()[0];
  EXPECT_NEAR(first, std::sqrt(sum), 1e-12 * std::sqrt(sum));
  cuda::grad_norm_cuda(d_norm.p, d_part.p, d_g.p, n, s);
  EXPECT_EQ(d_norm.host()[0], first);
  EXPECT_EQ(d_part.host().back(), 0.0);
}

TEST_F(CudaOps, GradNormClipAndAdamW) {
  ParamStore<float> store;
  store.add("a.weight", {37, 5}, true);
  store.add("a.bias", {7}, false);
  store.add("b.weight", {3, 129}, true);
  store.finalize();
  const int64_t n = store.size();
  std::vector<uint8_t> mask(n, 2);
  for (const ParamView& v : store.views()) std::fill_n(mask.begin() + v.offset, v.numel, v.decay ? 1 : 0);
  OptimConfig oc;
  oc.lr = 1e-2, oc.weight_decay = 0.1;
  AdamW<float> opt(oc, store);
  for (const ParamView& v : store.views()) {
    const auto init = randn(v.numel, 35 + static_cast<uint32_t>(v.offset));
    std::copy(init.begin(), init.end(), store.param(v.name));
  }
  Dev<float> d_p(std::vector<float>(store.params(), store.params() + n)), d_m(n), d_v(n), d_g(n);
  Dev<uint8_t> d_mask(mask);
  Dev<double> d_norm(1), d_part(cuda::grad_norm_partials(n));
  for (int step = 0; step < 3; ++step) {
    for (const ParamView& v : store.views()) {
      const auto g = randn(v.numel, 100 + step * 7 + static_cast<uint32_t>(v.offset), step == 1 ? 10.f : 0.01f);
      std::copy(g.begin(), g.end(), store.grad(v.name));
    }
    CUDA_CHECK(cudaMemcpy(d_g.p, store.grads(), n * sizeof(float), cudaMemcpyHostToDevice));
    const double norm = clip_grad_norm(store, 1.0);
    const auto unclipped = d_g.host();
    cuda::grad_norm_cuda(d_norm.p, d_part.p, d_g.p, n, s);
    EXPECT_NEAR(d_norm.host()[0], norm, 1e-9 * norm);
    EXPECT_EQ(d_part.host().back(), 0.0);  // the blocks' count is left at 0 for the next call
    cuda::grad_norm_cuda(d_norm.p, d_part.p, d_g.p, n, s);
    EXPECT_NEAR(d_norm.host()[0], norm, 1e-9 * norm);
    opt.step(store, 1e-2);
    const int64_t t = opt.steps_taken();
    const cuda::AdamWArgs args{1e-2, oc.betas[0], oc.betas[1], oc.eps, oc.weight_decay,
                               1.0 - std::pow(oc.betas[0], t), std::sqrt(1.0 - std::pow(oc.betas[1], t))};
    // Clipped on the way in (step 1's gradient is 1000 times the others: clipped; the rest are not).
    cuda::adamw_step_cuda(d_p.p, d_m.p, d_v.p, d_g.p, d_mask.p, d_norm.p, nullptr, d_norm.p, 1.0, n, args, s);
    expect_close(d_g.host(), unclipped, 0, 0, "gradient left as it was");
    expect_close(d_p.host(), std::vector<float>(store.params(), store.params() + n), 1e-5, 1e-7, "adamw params");
    expect_close(d_m.host(), std::vector<float>(opt.m(), opt.m() + n), 1e-5, 1e-9, "adamw m");
    expect_close(d_v.host(), std::vector<float>(opt.v(), opt.v() + n), 1e-5, 1e-12, "adamw v");
  }
  // A non-finite norm skips the update.
  const auto before = d_p.host();
  const double inf = INFINITY;
  CUDA_CHECK(cudaMemcpy(d_norm.p, &inf, sizeof(double), cudaMemcpyHostToDevice));
  cuda::adamw_step_cuda(d_p.p, d_m.p, d_v.p, d_g.p, d_mask.p, nullptr, d_norm.p, d_norm.p, 1.0, n,
                        cuda::AdamWArgs{1e-2, 0.9, 0.999, 1e-8, 0.1, 0.5, 0.5}, s);
  expect_close(d_p.host(), before, 0, 0, "skipped update");
}

}  // namespace
}  // namespace sb
#endif
