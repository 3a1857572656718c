// test_cuda_attention.cpp: parity of the CUDA attention kernels (kernels/attention/attention.hpp) with
// the CPU reference ops run in double: PaTH (nn::path_attention_*, Blockwise form) and softmax
// attention (nn::softmax_attention_*; NoPE, RoPE-applied q/k or RoPE inside the short kernels, FoX
// gate). Forward output, lse and every gradient, over awkward shapes, fp32 and bf16, outputs poisoned
// before each run (the launch plans' host arithmetic is in test_attention_layout.cpp). The tests skip when built without CUDA
// or when no CUDA device is present.
#include <gtest/gtest.h>

#ifdef STATEBENCH_HAVE_CUDA
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/internal.hpp"
#include "kernels/common/device_buffer.hpp"
#include "kernels/ops/ops.hpp"
#include "nn/ops_attention.hpp"
#include "nn/path_attention.hpp"
#include "tests/cuda/attention_selftest.hpp"
#include "cuda_attention_test_util.hpp"
#include "path_test_util.hpp"

namespace sb::test {
namespace {

struct Shape {
  int64_t B, T, H, Dh;
  bool gate;
  double beta_lo = 0.05, beta_hi = 1.95;
  bool rope = false;  // softmax only: q, k rotated by RoPE first
  bool rope_inside = false;  // softmax only: un-rotated q, k and RoPE's table to the kernels (rope_cs)
};
std::string describe(const Shape& s, DType dt) {
  return "(B,T,H,Dh)=(" + std::to_string(s.B) + "," + std::to_string(s.T) + "," + std::to_string(s.H) + "," +
         std::to_string(s.Dh) + ") " + cuda::dtype_name(dt) + (s.gate ? " gate" : "") + (s.rope ? " rope" : "") +
         (s.rope_inside ? " rope inside" : "") +
         " beta in [" + std::to_string(s.beta_lo) + "," + std::to_string(s.beta_hi) + "]";
}

// One forward + backward on the device (with options `opt`) and in double on the CPU; checks every
// output. With keep_factors (PaTH) the forward hands its factors to the backward through a poisoned
// buffer, and both calls get a poisoned caller workspace sized without the factors.
void check_case(const Shape& s, DType dt, bool path, uint64_t seed, bool keep_factors = false,
                const AttentionOptions& opt = {}) {
  SCOPED_TRACE(describe(s, dt) + (path ? " PaTH" : " softmax") + (keep_factors ? " kept factors" : ""));
  PathInputs in = make_inputs(s.B, s.T, s.H, s.Dh, s.gate, seed, s.beta_lo, s.beta_hi);
  if (s.rope) {
    nn::rope_forward<double>(in.q.data(), in.q.data(), s.B, s.T, s.H, s.Dh);
    nn::rope_forward<double>(in.k.data(), in.k.data(), s.B, s.T, s.H, s.Dh);
  }
  Vec dout = randn(in.nx(), seed + 99);
  const size_t nx = static_cast<size_t>(in.nx()), ns = static_cast<size_t>(in.ns());
  const size_t esz = cuda::dtype_bytes(dt);
  DeviceBytes q = upload_rounded(in.q, dt), k = upload_rounded(in.k, dt), v = upload_rounded(in.v, dt);
  DeviceBytes dO = upload_rounded(dout, dt);
  DeviceBytes w = upload_f32(in.w), beta = upload_f32(in.beta), logf = upload_f32(in.log_f);
  DeviceBytes out = poisoned(nx * esz), lse = poisoned(ns * 4), dq = poisoned(nx * esz), dk = poisoned(nx * esz);
  DeviceBytes dv = poisoned(nx * esz), dw = poisoned(nx * 4), dbeta = poisoned(ns * 4), dlogf = poisoned(ns * 4);
  DeviceBytes cs;  // RoPE inside: the kernels rotate the uploaded q, k; the reference gets them rotated
  if (s.rope_inside) {
    cs = poisoned(static_cast<size_t>(s.T * s.Dh) * 4);
    cuda::rope_table_cuda(cs.as<float>(), s.T, s.Dh, 10000.0, nullptr);
    nn::rope_forward<double>(in.q.data(), in.q.data(), s.B, s.T, s.H, s.Dh);
    nn::rope_forward<double>(in.k.data(), in.k.data(), s.B, s.T, s.H, s.Dh);
    if (dt == DType::BF16)  // the bf16 kernels round the rotated q, k to bf16 once (as rope_forward_bf16_cuda does)
      for (Vec* x : {&in.q, &in.k})
        for (double& e : *x) e = bf16_value(bf16_bits(static_cast<float>(e)));
  }
  const float* rope_cs = s.rope_inside ? cs.as<float>() : nullptr;
  const cuda::AttnDims d{s.B, s.T, s.H, s.Dh};
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.Dh));
  const float* lf = s.gate ? logf.as<float>() : nullptr;
  if (path) {
    DeviceBytes factors, ws;
    if (keep_factors) {
      factors = poisoned(cuda::path_attention_factors_bytes(d, dt, opt));
      ws = poisoned(std::max(cuda::path_attention_forward_workspace_bytes(d, dt, true, opt),
                             cuda::path_attention_backward_workspace_bytes(d, dt, true, opt)));
    }
    cuda::path_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), w.as<float>(),
                                      beta.as<float>(), lf, d, static_cast<float>(scale), dt, ws.data(), ws.bytes(),
                                      nullptr, factors.data(), opt);
    cuda::path_attention_backward_cuda(dq.data(), dk.data(), dv.data(), dw.as<float>(), dbeta.as<float>(),
                                       s.gate ? dlogf.as<float>() : nullptr, dO.data(), q.data(), k.data(), v.data(),
                                       w.as<float>(), beta.as<float>(), lf, out.data(), lse.as<float>(), d,
                                       static_cast<float>(scale), dt, ws.data(), ws.bytes(), nullptr, factors.data(),
                                       opt);
  } else {
    cuda::softmax_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), lf, d,
                                         static_cast<float>(scale), dt, nullptr, 0, nullptr, opt, rope_cs);
    cuda::softmax_attention_backward_cuda(dq.data(), dk.data(), dv.data(), s.gate ? dlogf.as<float>() : nullptr,
                                          dO.data(), q.data(), k.data(), v.data(), lf, out.data(), lse.as<float>(), d,
                                          static_cast<float>(scale), dt, nullptr, 0, nullptr, opt, rope_cs);
  }
  CUDA_CHECK(cudaDeviceSynchronize());

  // Reference in double on the rounded inputs.
  Vec r_out(nx), r_lse(ns), r_dq(nx, 0.0), r_dk(nx, 0.0), r_dv(nx, 0.0), r_dw(nx, 0.0), r_db(ns, 0.0), r_df(ns, 0.0);
  const double* rlf = s.gate ? in.log_f.data() : nullptr;
  if (path) {
    const int64_t blk = nn::path_default_block(s.Dh);
    nn::path_attention_forward<double>(r_out.data(), r_lse.data(), in.q.data(), in.k.data(), in.v.data(),
                                       in.w.data(), in.beta.data(), rlf, s.B, s.T, s.H, s.Dh, scale,
                                       nn::PathForm::Blockwise, blk, nullptr);
    nn::path_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), r_dw.data(), r_db.data(), r_df.data(),
                                        dout.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(),
                                        in.beta.data(), rlf, r_out.data(), r_lse.data(), s.B, s.T, s.H, s.Dh, scale,
                                        nn::PathForm::Blockwise, blk, nullptr);
  } else {
    nn::softmax_attention_forward<double>(r_out.data(), r_lse.data(), in.q.data(), in.k.data(), in.v.data(), rlf,
                                          s.B, s.T, s.H, s.Dh, scale);
    nn::softmax_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), s.gate ? r_df.data() : nullptr,
                                           dout.data(), in.q.data(), in.k.data(), in.v.data(), rlf, r_out.data(),
                                           r_lse.data(), s.B, s.T, s.H, s.Dh, scale);
  }
  if (s.rope_inside)  // the kernels return the un-rotated q's and k's gradients
    for (Vec* g : {&r_dq, &r_dk}) {
      Vec un(nx, 0.0);
      nn::rope_backward<double>(un.data(), g->data(), s.B, s.T, s.H, s.Dh);
      *g = std::move(un);
    }

  const Tol tol = tolerance(dt);
  int64_t bad = 0;
  std::vector<Checked> items;
  items.push_back({"out", download(out, nx, dt, bad), &r_out, tol.out});
  items.push_back({"lse", download(lse, ns, DType::F32, bad), &r_lse, tol.lse});
  items.push_back({"dq", download(dq, nx, dt, bad), &r_dq, tol.grad});
  items.push_back({"dk", download(dk, nx, dt, bad), &r_dk, tol.grad});
  items.push_back({"dv", download(dv, nx, dt, bad), &r_dv, tol.grad});
  if (path) {
    items.push_back({"dw", download(dw, nx, DType::F32, bad), &r_dw, tol.grad});
    items.push_back({"dbeta", download(dbeta, ns, DType::F32, bad), &r_db, tol.grad});
  }
  if (s.gate) items.push_back({"dlog_f", download(dlogf, ns, DType::F32, bad), &r_df, tol.grad});
  EXPECT_EQ(bad, 0) << "outputs left unwritten (poison) or non-finite";
  expect_close(items, std::string(path ? "PaTH    " : "softmax ") + describe(s, dt));
}

const std::vector<Shape>& path_shapes() {
  static const std::vector<Shape> shapes = {
      {1, 1, 1, 16, true},
      {2, 7, 3, 32, false},
      {1, 64, 2, 64, true},
      {1, 113, 1, 128, true, 1.9, 1.999},
      {2, 257, 2, 16, false, 1.9, 1.999},
      {1, 257, 1, 128, false},
      {1, 200, 2, 128, true},
      {1, 1000, 1, 64, true},
      {1, 1000, 1, 32, false, 1.9, 1.999},
      {1, 1000, 1, 16, true},
      {512, 7, 8, 32, true},
      {64, 64, 4, 16, false},
      {3, 113, 5, 64, false},
      {16, 129, 2, 32, true},
  };
  return shapes;
}

const std::vector<Shape>& softmax_shapes() {
  static const std::vector<Shape> shapes = {
      {1, 1, 1, 16, true},      {2, 7, 3, 32, false},         {1, 113, 2, 64, true},
      {1, 257, 1, 128, false},  {512, 7, 8, 32, true},        {1, 1000, 1, 64, false, 0.05, 1.95, true},
      {2, 300, 2, 128, true, 0.05, 1.95, true},               {64, 64, 4, 16, false},
      {3, 64, 2, 64, false},    {1, 7, 2, 128, true},
  };
  return shapes;
}

// Options with superchunks of `sc` blocks and backward head groups of `group` heads (0: the plan's).
AttentionOptions small_plan(int sc, int64_t group = 0) {
  AttentionOptions o;
  o.path_superchunk = sc, o.path_bwd_group = group;
  return o;
}

TEST(CudaAttention, MmaBuildingBlocks) {
  SKIP_WITHOUT_DEVICE();
  const double plain = cuda::attention_mma_selftest(false), split = cuda::attention_mma_selftest(true);
  std::printf("mma self-test: plain %.2e, split %.2e\n", plain, split);
  EXPECT_LE(plain, 1e-5);  // exact bf16 inputs, fp32 accumulation
  EXPECT_LE(split, 1e-4);  // fp32 inputs through hi/lo splitting
}

TEST(CudaAttention, PathFp32) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 100;
  for (const Shape& s : path_shapes()) check_case(s, DType::F32, true, seed += 10);
}

TEST(CudaAttention, PathBf16) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 500;
  for (const Shape& s : path_shapes()) check_case(s, DType::BF16, true, seed += 10);
}

// The superchunk backward with superchunks of 2 and 3 blocks, so that short
// sequences have several (T = 257: 5 blocks; T = 1000: 16): every head dim, both transports,
// gate on and off, both precisions, kept and recomputed factors. The default (max(8, sqrt(nb))
// blocks) already applies to the T = 1000 shapes of PathFp32 / PathBf16.
TEST(CudaAttention, PathSuperchunks) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<Shape> shapes = {{1, 257, 2, 16, true},           {2, 257, 1, 32, false},
                                     {1, 1000, 1, 64, true},          {1, 257, 1, 128, true, 1.9, 1.999},
                                     {3, 129, 2, 64, false},          {1, 1000, 1, 128, false}};
  uint64_t seed = 4000;
  for (int sc : {2, 3}) {
    SCOPED_TRACE("superchunks of " + std::to_string(sc) + " blocks");
    for (const Shape& s : shapes)
      for (DType dt : {DType::F32, DType::BF16}) check_case(s, dt, true, seed += 10, dt == DType::BF16, small_plan(sc));
  }
}

// check_case (PaTH) over `shapes` in each of `dtypes`, with superchunks of 3 blocks and head groups
// of 3 (short sequences then have several of each).
void check_path_small_plan(const std::vector<Shape>& shapes, std::initializer_list<DType> dtypes, uint64_t seed) {
  for (const Shape& s : shapes)
    for (DType dt : dtypes) check_case(s, dt, true, seed += 10, false, small_plan(3, 3));
}

// With bf16 inputs PaTH's well-conditioned gradient chains (the superchunk backward, G's block
// transports in the pairs kernel) multiply one bf16 plane per operand with fp32 accumulation (fp32
// inputs split them): every head dim, dense (Dh <= 64) and factored transports, superchunks of 3
// (T = 257 and 300: several), and beta close to 2, where the block transports are reflections.
TEST(CudaAttention, PathBf16GradientChains) {
  SKIP_WITHOUT_DEVICE();
  check_path_small_plan({{2, 257, 1, 16, false}, {3, 113, 2, 32, true}, {1, 300, 2, 64, true},
                         {1, 257, 1, 64, false, 1.9, 1.999}, {2, 129, 1, 128, true, 1.9, 1.999}},
                        {DType::BF16}, 3000);
}

// The superchunk backward's rows split over sc_bwd's CTAs per (head, superchunk): 1 at Dh 32, 2 at
// Dh 64 and at Dh 128 in fp32, 4 at Dh 128 in bf16. The parts' shares of dP_m and dKt_m must add up
// to the CPU's gradients, in dense (Dh <= 64) and factored (Dh 128, through sc_dwdy) transports,
// both precisions, with a gate and two head groups.
TEST(CudaAttention, PathSuperchunkParts) {
  SKIP_WITHOUT_DEVICE();
  check_path_small_plan({{2, 257, 1, 32, false}, {1, 1000, 1, 64, true}, {1, 257, 1, 128, true, 1.9, 1.999},
                         {2, 449, 2, 128, false}},
                        {DType::F32, DType::BF16}, 4700);
}

// The forward's pairs between superchunks on wgmma (kernels/attention/path/path_fwd_inter_sm90.cu; bf16, Dh 64 / 128 on an
// H100; the other PaTH tests run it in one head group) in groups of 1 and 4 heads of B H = 6 (a short
// last group), the fused kernel at one and two pipeline stages (one or two tiles for Cs_b), with superchunks of 3 blocks (a 128-query CTA's two blocks then may lie in different
// superchunks), the gate on and off, T not a multiple of 64.
TEST(CudaAttention, PathForwardInterGroups) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<Shape> shapes = {{2, 1000, 3, 64, true}, {3, 449, 2, 128, false}, {1, 700, 1, 128, true}};
  uint64_t seed = 5300;
  for (int64_t group : {1, 4}) {
    SCOPED_TRACE("forward groups of " + std::to_string(group) + " heads");
    AttentionOptions o = small_plan(3);
    o.path_fwd_group = group;
    for (const Shape& s : shapes) check_case(s, DType::BF16, true, seed += 10, false, o);
  }
}

// The backward's states launch of each head group after the first on a side stream, overlapping
// the previous group's tail: B H = 4 and 5 in groups of 3 (two groups each), bf16 (the wgmma pass),
// recomputed factors (kept factors with kept states skip the states launch), Dh 64 and 128, gate on
// and off; the query blocks taken in the cost order (few items per CTA).
TEST(CudaAttention, PathStatesOverlap) {
  SKIP_WITHOUT_DEVICE();
  check_path_small_plan({{2, 449, 2, 128, false}, {1, 1000, 5, 64, true}}, {DType::BF16}, 5500);
}

// Where the forward's pass runs in one group of all heads, a caller's factor buffer keeps its states
// for the backward (which then skips its states launch; the kept-factor cases of PathSuperchunks,
// PathBackwardHeadGroups and PathBackwardReusesForwardFactors check the gradients through them): the
// buffer grows by B H xs_rows Dh bf16 values, the backward's workspace loses its group's states, and
// with the pass off (the mma.sync kernels) nothing is kept.
TEST(CudaAttention, PathKeptStates) {
  SKIP_WITHOUT_DEVICE();
  const cuda::AttnDims d{2, 1000, 2, 64};
  const auto dev = cuda::detail::device_limits(d.Dh, DType::BF16);
  if (!cuda::detail::path_states_kept(d, DType::BF16, dev, {})) GTEST_SKIP() << "no wgmma pass on this device";
  const auto with = cuda::detail::factor_layout(d, DType::BF16, true, true, dev, {});
  const auto without = cuda::detail::factor_layout(d, DType::BF16, true, false, dev, {});
  EXPECT_GT(with.xs_rows, 0);
  EXPECT_EQ(cuda::path_attention_factors_bytes(d, DType::BF16), with.total);
  EXPECT_EQ(with.total - without.total, static_cast<size_t>(4 * with.xs_rows * 64 * 2));
  // Recomputed factors: their region (no states) and the backward's own states of its one group.
  EXPECT_EQ(cuda::path_attention_backward_workspace_bytes(d, DType::BF16, false) -
                cuda::path_attention_backward_workspace_bytes(d, DType::BF16, true),
            without.total + static_cast<size_t>(4 * with.xs_rows * 64 * 2));
  AttentionOptions mma;
  mma.sm90 = false;
  EXPECT_FALSE(cuda::detail::path_states_kept(d, DType::BF16, dev, mma));
  EXPECT_LT(cuda::path_attention_factors_bytes(d, DType::BF16, mma), with.total);
}

// Where the inter-superchunk pairs run on wgmma (bf16, Dh 64 / 128 on an H100; PathSuperchunks and
// PathBackwardHeadGroups cover that path), the mma.sync path they replace must still agree with the
// CPU: it runs on other GPUs and in fp32.
TEST(CudaAttention, PathSuperchunksWithoutWgmma) {
  SKIP_WITHOUT_DEVICE();
  AttentionOptions o = small_plan(3);
  o.sm90 = false;
  const std::vector<Shape> shapes = {{1, 1000, 1, 64, true}, {3, 129, 2, 64, false}, {1, 1000, 1, 128, false}};
  uint64_t seed = 4500;
  for (const Shape& s : shapes) check_case(s, DType::BF16, true, seed += 10, false, o);
}

// The backward in groups of heads (plan.hpp, path_bwd_group), forced to 1 and 3
// heads per group. B H = 4 or 5 past T = 7, so that groups of 3 leave a short last group, and with
// B = 2, H = 2 straddle batch elements (heads (0,0) (0,1) (1,0), then (1,1)). T = 7 (one block),
// 129 (checkpoints) and 1000 (default superchunks of 8 blocks), every transport (Dh 16 / 64 dense,
// 128 factored), gate on and off (dlog_f from the global dg), both precisions, kept and recomputed
// factors (swapped between the two group sizes). The grouped workspace is smaller, and a bad value
// is refused.
TEST(CudaAttention, PathBackwardHeadGroups) {
  SKIP_WITHOUT_DEVICE();
  const cuda::AttnDims big{2, 1000, 2, 64};
  const size_t whole = cuda::path_attention_backward_workspace_bytes(big, DType::BF16, true);
  AttentionOptions bad;
  bad.path_bwd_group = -1;
  EXPECT_THROW(cuda::path_attention_backward_workspace_bytes(big, DType::BF16, true, bad), Error);
  AttentionOptions one;
  one.path_bwd_group = 1;
  EXPECT_LT(cuda::path_attention_backward_workspace_bytes(big, DType::BF16, true, one), whole);
  const std::vector<Shape> shapes = {
      {2, 7, 3, 16, true},    {2, 129, 2, 64, false},  {2, 129, 2, 128, true, 1.9, 1.999},
      {1, 1000, 5, 16, true}, {2, 1000, 2, 64, false}, {2, 1000, 2, 128, true}};
  uint64_t seed = 5000;
  for (int64_t group : {1, 3}) {
    SCOPED_TRACE("backward groups of " + std::to_string(group) + " heads");
    AttentionOptions o;
    o.path_bwd_group = group;
    const bool keep_bf16 = group == 1;
    for (const Shape& s : shapes)
      for (DType dt : {DType::F32, DType::BF16})
        check_case(s, dt, true, seed += 10, (dt == DType::BF16) == keep_bf16, o);
  }
}

// The backward with ~sqrt(n) checkpoints and segment recomputation (forced by a tiny budget,
// superchunks off).
TEST(CudaAttention, PathCheckpointSegments) {
  SKIP_WITHOUT_DEVICE();
  AttentionOptions o = small_plan(0);
  o.path_checkpoint_budget = 1;
  check_case({1, 1000, 2, 64, true}, DType::F32, true, 900, false, o);
  check_case({2, 700, 1, 128, false, 1.9, 1.999}, DType::BF16, true, 910, false, o);
  check_case({1, 600, 1, 16, true}, DType::F32, true, 920, false, o);
}

// The backward reading the forward's factors (the training path) instead of recomputing them:
// dense (Dh <= 64) and factored (Dh = 128) transports, with and without the gate, both precisions.
TEST(CudaAttention, PathBackwardReusesForwardFactors) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<Shape> shapes = {
      {2, 7, 3, 32, false}, {1, 257, 1, 128, true, 1.9, 1.999}, {1, 1000, 1, 64, true}, {16, 129, 2, 16, false}};
  uint64_t seed = 3000;
  for (const Shape& s : shapes)
    for (DType dt : {DType::F32, DType::BF16}) check_case(s, dt, true, seed += 10, true);
}

TEST(CudaAttention, SoftmaxFp32) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 1000;
  for (const Shape& s : softmax_shapes()) check_case(s, DType::F32, false, seed += 10);
}

TEST(CudaAttention, SoftmaxBf16) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 2000;
  for (const Shape& s : softmax_shapes()) check_case(s, DType::BF16, false, seed += 10);
}

// The short kernels at T <= 32 (the plan's default there; fp32: two warps a head, bf16: one) at
// awkward lengths, every head dim they take, gate and RoPE on and off; with softmax_short off, the
// blockwise kernels at some of the same shapes.
TEST(CudaAttention, SoftmaxShortKernels) {
  SKIP_WITHOUT_DEVICE();
  AttentionOptions blockwise;
  blockwise.softmax_short = false;
  EXPECT_TRUE(cuda::detail::softmax_short_warp({3, 32, 3, 64}, {}));
  EXPECT_FALSE(cuda::detail::softmax_short_warp({3, 32, 3, 64}, blockwise));
  uint64_t seed = 3000;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t Dh : {16, 32, 64})
      for (int64_t T : {1, 2, 7, 21, 31, 32})
        for (bool gate : {false, true}) check_case({3, T, 3, Dh, gate, 0.05, 1.95, T == 21}, dt, false, seed += 10);
    for (const Shape& s : {Shape{64, 32, 4, 32, false}, Shape{32, 21, 8, 64, true, 0.05, 1.95, true}})
      check_case(s, dt, false, seed += 10, false, blockwise);
  }
}

// RoPE inside the short kernels (rope_cs): un-rotated q and k in, their gradients out, against the
// reference on rotated ones; the call refuses a table where the blockwise kernels would run.
TEST(CudaAttention, SoftmaxShortRopeInside) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 3500;
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t Dh : {16, 32, 64})
      for (int64_t T : {1, 7, 21, 32}) {
        Shape s{3, T, 3, Dh, T == 7};
        s.rope_inside = true;
        check_case(s, dt, false, seed += 10);
      }
  EXPECT_TRUE(cuda::softmax_attention_takes_rope({2, 32, 2, 32}));
  EXPECT_FALSE(cuda::softmax_attention_takes_rope({2, 33, 2, 32}));
  AttentionOptions blockwise;
  blockwise.softmax_short = false;
  EXPECT_FALSE(cuda::softmax_attention_takes_rope({2, 32, 2, 32}, blockwise));
  DeviceBytes buf = poisoned(1 << 20);
  void* p = buf.data();
  float* f = buf.as<float>();
  try {
    cuda::softmax_attention_forward_cuda(p, f, p, p, p, nullptr, {1, 40, 2, 32}, 0.5f, DType::BF16, nullptr, 0,
                                         nullptr, {}, f);
    ADD_FAILURE() << "a RoPE table at T = 40 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope_cs"), std::string::npos) << e.what();
  }
}

TEST(CudaAttention, WgmmaBuildingBlocks) {
  SKIP_WITHOUT_DEVICE();
  const double err = cuda::attention_wgmma_selftest();
  if (err < 0) GTEST_SKIP() << "no sm_90 device with sm_90a code: the wgmma kernels are not used here";
  std::printf("wgmma self-test: %.2e\n", err);
  EXPECT_LE(err, 1e-5);  // exact bf16 inputs, fp32 accumulation
}

// Where the wgmma kernels are chosen (bf16, Dh 64 / 128 on an H100), the mma.sync kernels they
// replace must still agree with the CPU: they run on other GPUs.
TEST(CudaAttention, SoftmaxBf16WithoutWgmma) {
  SKIP_WITHOUT_DEVICE();
  AttentionOptions mma;
  mma.sm90 = false;
  EXPECT_FALSE(cuda::softmax_attention_uses_wgmma(64, DType::BF16, mma));
  uint64_t seed = 2500;
  for (const Shape& s : softmax_shapes())
    if (s.Dh == 64 || s.Dh == 128) check_case(s, DType::BF16, false, seed += 10, false, mma);
}

// The wgmma softmax backward and PaTH's inter pass load Q (the states), dO and the statistics by TMA
// where T is a multiple of 4, else by cp.async (SoftmaxBf16's shapes have both). PaTH at both: T =
// 1000 and 300 end in a partial block, whose padded state rows the TMA path loads as the states
// launch wrote them; T = 999 and 301 take cp.async.
TEST(CudaAttention, PathBf16LoadsByTmaAndCpAsync) {
  SKIP_WITHOUT_DEVICE();
  check_path_small_plan({{1, 1000, 1, 64, true}, {2, 300, 2, 128, false}, {1, 999, 1, 64, true},
                         {2, 301, 2, 128, false}},
                        {DType::BF16}, 2850);
}

// The shape on which the reference Triton kernel failed (illegal memory access in backward, head
// dim 32, T <= 128, large batch): full run, every output written and finite, and the first two
// batch elements compared with the CPU reference.
TEST(CudaAttention, PathReferenceFailureShape) {
  SKIP_WITHOUT_DEVICE();
  const Shape s{256, 128, 8, 32, true};
  const DType dt = DType::BF16;
  PathInputs in = make_inputs(s.B, s.T, s.H, s.Dh, s.gate, 4242);
  Vec dout = randn(in.nx(), 4243);
  const size_t nx = static_cast<size_t>(in.nx()), ns = static_cast<size_t>(in.ns());
  DeviceBytes q = upload_rounded(in.q, dt), k = upload_rounded(in.k, dt), v = upload_rounded(in.v, dt);
  DeviceBytes dO = upload_rounded(dout, dt), w = upload_f32(in.w), beta = upload_f32(in.beta);
  DeviceBytes logf = upload_f32(in.log_f);
  DeviceBytes out = poisoned(nx * 2), lse = poisoned(ns * 4), dq = poisoned(nx * 2), dk = poisoned(nx * 2);
  DeviceBytes dv = poisoned(nx * 2), dw = poisoned(nx * 4), dbeta = poisoned(ns * 4), dlogf = poisoned(ns * 4);
  const cuda::AttnDims d{s.B, s.T, s.H, s.Dh};
  const float scale = 1.f / std::sqrt(static_cast<float>(s.Dh));
  cuda::path_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), w.as<float>(),
                                    beta.as<float>(), logf.as<float>(), d, scale, dt, nullptr, 0, nullptr);
  cuda::path_attention_backward_cuda(dq.data(), dk.data(), dv.data(), dw.as<float>(), dbeta.as<float>(),
                                     dlogf.as<float>(), dO.data(), q.data(), k.data(), v.data(), w.as<float>(),
                                     beta.as<float>(), logf.as<float>(), out.data(), lse.as<float>(), d, scale, dt,
                                     nullptr, 0, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  int64_t bad = 0;
  const Vec g_out = download(out, nx, dt, bad), g_dq = download(dq, nx, dt, bad), g_dk = download(dk, nx, dt, bad);
  const Vec g_dv = download(dv, nx, dt, bad), g_dw = download(dw, nx, DType::F32, bad);
  const Vec g_db = download(dbeta, ns, DType::F32, bad), g_df = download(dlogf, ns, DType::F32, bad);
  download(lse, ns, DType::F32, bad);
  EXPECT_EQ(bad, 0) << "outputs left unwritten (poison) or non-finite";
  // Batch elements are independent and contiguous: check b = 0, 1 against the CPU.
  const int64_t B2 = 2, nx2 = B2 * s.T * s.H * s.Dh, ns2 = B2 * s.T * s.H;
  Vec r_out(nx2), r_lse(ns2), r_dq(nx2, 0.0), r_dk(nx2, 0.0), r_dv(nx2, 0.0), r_dw(nx2, 0.0), r_db(ns2, 0.0),
      r_df(ns2, 0.0);
  nn::path_attention_forward<double>(r_out.data(), r_lse.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(),
                                     in.beta.data(), in.log_f.data(), B2, s.T, s.H, s.Dh, scale,
                                     nn::PathForm::Blockwise, 32, nullptr);
  nn::path_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), r_dw.data(), r_db.data(), r_df.data(),
                                      dout.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(), in.beta.data(),
                                      in.log_f.data(), r_out.data(), r_lse.data(), B2, s.T, s.H, s.Dh, scale,
                                      nn::PathForm::Blockwise, 32, nullptr);
  auto head = [](const Vec& x, int64_t n) { return Vec(x.begin(), x.begin() + n); };
  const Tol tol = tolerance(dt);
  EXPECT_LE(rel_err(head(g_out, nx2), r_out), tol.out);
  EXPECT_LE(rel_err(head(g_dq, nx2), r_dq), tol.grad);
  EXPECT_LE(rel_err(head(g_dk, nx2), r_dk), tol.grad);
  EXPECT_LE(rel_err(head(g_dv, nx2), r_dv), tol.grad);
  EXPECT_LE(rel_err(head(g_dw, nx2), r_dw), tol.grad);
  EXPECT_LE(rel_err(head(g_db, ns2), r_db), tol.grad);
  EXPECT_LE(rel_err(head(g_df, ns2), r_df), tol.grad);
  std::printf("reference failure shape (256,128,8,32) bf16: out %.2e dq %.2e dk %.2e dv %.2e dw %.2e dbeta %.2e dlog_f %.2e\n",
              rel_err(head(g_out, nx2), r_out), rel_err(head(g_dq, nx2), r_dq), rel_err(head(g_dk, nx2), r_dk),
              rel_err(head(g_dv, nx2), r_dv), rel_err(head(g_dw, nx2), r_dw), rel_err(head(g_db, ns2), r_db),
              rel_err(head(g_df, ns2), r_df));
}

TEST(CudaAttention, RejectsBadArguments) {
  SKIP_WITHOUT_DEVICE();
  const cuda::AttnDims bad_dh{1, 8, 1, 48};
  EXPECT_THROW(cuda::path_attention_forward_workspace_bytes(bad_dh, DType::F32), Error);
  const cuda::AttnDims ok{1, 8, 1, 16};
  DeviceBytes small(16);
  DeviceBytes x(8 * 16 * 4), w(8 * 16 * 4), b(8 * 4), lse(8 * 4);
  EXPECT_THROW(cuda::path_attention_forward_cuda(x.data(), lse.as<float>(), x.data(), x.data(), x.data(), w.as<float>(),
                                                 b.as<float>(), nullptr, ok, 0.25f, DType::F32, small.data(), 16,
                                                 nullptr),
               Error);
  EXPECT_THROW(cuda::path_attention_forward_cuda(x.data(), lse.as<float>(), x.data(), x.data(), x.data(), nullptr,
                                                 b.as<float>(), nullptr, ok, 0.25f, DType::F32, nullptr, 0, nullptr),
               Error);
  const void* misaligned = static_cast<const unsigned char*>(x.data()) + 8;  // q must be 16-byte aligned
  EXPECT_THROW(cuda::softmax_attention_forward_cuda(x.data(), lse.as<float>(), misaligned, x.data(), x.data(), nullptr,
                                                    ok, 0.25f, DType::F32, nullptr, 0, nullptr),
               Error);
}

}  // namespace
}  // namespace sb::test

#else  // !STATEBENCH_HAVE_CUDA

TEST(CudaAttention, SkippedWithoutCuda) {
  GTEST_SKIP() << "statebench was built without CUDA (STATEBENCH_HAVE_CUDA undefined): CUDA attention tests skipped";
}

#endif
