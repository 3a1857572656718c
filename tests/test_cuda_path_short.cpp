// test_cuda_path_short.cpp: parity of PaTH attention at short T (the one-CTA-per-head kernels,
// kernels/attention/path/path_short_sm80.cu, which the plan picks for T <= 64 where shared memory
// allows, and the two-warps-per-head kernels, path_short_warp_sm80.cu, which it picks at T <= 32 and
// Dh 16, 32 or 64) with the CPU reference in double (nn::path_attention_*, Blockwise form): out, lse, dq,
// dk, dv, dw, dbeta and dlog_f each checked and printed separately, per shape, fp32 and bf16, gate
// on and off, beta up to 2; the CTA kernels also at the warp kernels' shapes
// (AttentionOptions::path_short_warp = false), longer T checked to fall back to the blockwise
// pipeline (and still match), and the pipeline itself at short T (path_short = false); the warp
// kernels with a kept factors buffer. Skips without a device.
#include <gtest/gtest.h>

#ifdef STATEBENCH_HAVE_CUDA
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_attention_test_util.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/plan.hpp"
#include "nn/path_attention.hpp"
#include "path_test_util.hpp"

namespace sb::test {
namespace {

struct Case {
  int64_t B, T, H, Dh;
  bool gate;
  double beta_lo = 0.05, beta_hi = 1.95;
};

// Which kernels run a PaTH call.
enum class Kernel { Pipeline, Cta, Warp };
const char* kernel_name(Kernel k) { return k == Kernel::Warp ? " warp" : k == Kernel::Cta ? " cta" : " pipeline"; }

std::string describe(const Case& c, DType dt, Kernel k) {
  return "(B,T,H,Dh)=(" + std::to_string(c.B) + "," + std::to_string(c.T) + "," + std::to_string(c.H) + "," +
         std::to_string(c.Dh) + ") " + cuda::dtype_name(dt) + (c.gate ? " gate" : "") + " beta in [" +
         std::to_string(c.beta_lo) + "," + std::to_string(c.beta_hi) + "]" + kernel_name(k);
}

Kernel planned(const Case& c, DType dt, const AttentionOptions& opt) {
  const cuda::AttnDims d{c.B, c.T, c.H, c.Dh};
  const cuda::detail::DeviceLimits dev = cuda::detail::device_limits(c.Dh, dt);
  if (cuda::detail::path_short_warp(d, dev, opt)) return Kernel::Warp;
  return cuda::detail::path_short(d, dev, opt) ? Kernel::Cta : Kernel::Pipeline;
}

// What the plan should pick with the default options: the warp kernels at T <= 32, Dh <= 64, else
// the CTA kernels up to T = 64 where their backward's shared memory fits, else the pipeline.
Kernel expected(const Case& c, DType dt) {
  const int64_t smem = cuda::detail::device_limits(c.Dh, dt).max_smem;
  if (c.T <= 32 && c.Dh <= 64 && cuda::detail::path_short_warp_layout(c.Dh).bwd_floats * 4 <= smem)
    return Kernel::Warp;
  if (c.T <= 64 && cuda::detail::path_short_layout(c.T, c.Dh).bwd_floats * 4 <= smem) return Kernel::Cta;
  return Kernel::Pipeline;
}

// The device's outputs of one forward + backward through the public API (poisoned outputs, the
// call's own workspace; with `factors`, a kept factors buffer shared by the two calls): out, lse, dq,
// dk, dv, dw, dbeta and (with a gate) dlog_f; bad counts unwritten (poison) or non-finite values.
std::vector<Vec> run_device(const Case& c, DType dt, PathInputs& in, Vec& dout, const AttentionOptions& opt,
                            bool factors, int64_t& bad) {
  const size_t nx = static_cast<size_t>(in.nx()), ns = static_cast<size_t>(in.ns()), esz = cuda::dtype_bytes(dt);
  DeviceBytes q = upload_rounded(in.q, dt), k = upload_rounded(in.k, dt), v = upload_rounded(in.v, dt);
  DeviceBytes dO = upload_rounded(dout, dt);
  DeviceBytes w = upload_f32(in.w), beta = upload_f32(in.beta), logf = upload_f32(in.log_f);
  DeviceBytes out = poisoned(nx * esz), lse = poisoned(ns * 4), dq = poisoned(nx * esz), dk = poisoned(nx * esz);
  DeviceBytes dv = poisoned(nx * esz), dw = poisoned(nx * 4), dbeta = poisoned(ns * 4), dlogf = poisoned(ns * 4);
  const cuda::AttnDims d{c.B, c.T, c.H, c.Dh};
  DeviceBytes kept = poisoned(factors ? cuda::path_attention_factors_bytes(d, dt, opt) : 0);
  void* fac = factors ? kept.data() : nullptr;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.Dh)));
  const float* lf = c.gate ? logf.as<float>() : nullptr;
  cuda::path_attention_forward_cuda(out.data(), lse.as<float>(), q.data(), k.data(), v.data(), w.as<float>(),
                                    beta.as<float>(), lf, d, scale, dt, nullptr, 0, nullptr, fac, opt);
  cuda::path_attention_backward_cuda(dq.data(), dk.data(), dv.data(), dw.as<float>(), dbeta.as<float>(),
                                     c.gate ? dlogf.as<float>() : nullptr, dO.data(), q.data(), k.data(), v.data(),
                                     w.as<float>(), beta.as<float>(), lf, out.data(), lse.as<float>(), d, scale, dt,
                                     nullptr, 0, nullptr, fac, opt);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<Vec> got = {download(out, nx, dt, bad),          download(lse, ns, DType::F32, bad),
                          download(dq, nx, dt, bad),           download(dk, nx, dt, bad),
                          download(dv, nx, dt, bad),           download(dw, nx, DType::F32, bad),
                          download(dbeta, ns, DType::F32, bad)};
  if (c.gate) got.push_back(download(dlogf, ns, DType::F32, bad));
  return got;
}

// run_device and the CPU reference in double, on the same rounded inputs; expects the plan to pick `want`.
void check(const Case& c, DType dt, Kernel want, uint64_t seed, const AttentionOptions& opt = {},
           bool factors = false) {
  const Kernel kernel = planned(c, dt, opt);
  const std::string what = describe(c, dt, kernel) + (factors ? " kept factors" : "");
  SCOPED_TRACE(what);
  EXPECT_EQ(kernel, want) << "the plan's kernel choice";
  PathInputs in = make_inputs(c.B, c.T, c.H, c.Dh, c.gate, seed, c.beta_lo, c.beta_hi);
  Vec dout = randn(in.nx(), seed + 99);
  const size_t nx = static_cast<size_t>(in.nx()), ns = static_cast<size_t>(in.ns());
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dh));
  int64_t bad = 0;
  std::vector<Vec> got = run_device(c, dt, in, dout, opt, factors, bad);

  Vec r_out(nx), r_lse(ns), r_dq(nx, 0.0), r_dk(nx, 0.0), r_dv(nx, 0.0), r_dw(nx, 0.0), r_db(ns, 0.0), r_df(ns, 0.0);
  const double* rlf = c.gate ? in.log_f.data() : nullptr;
  const int64_t blk = nn::path_default_block(c.Dh);
  nn::path_attention_forward<double>(r_out.data(), r_lse.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(),
                                     in.beta.data(), rlf, c.B, c.T, c.H, c.Dh, scale, nn::PathForm::Blockwise, blk,
                                     nullptr);
  nn::path_attention_backward<double>(r_dq.data(), r_dk.data(), r_dv.data(), r_dw.data(), r_db.data(), r_df.data(),
                                      dout.data(), in.q.data(), in.k.data(), in.v.data(), in.w.data(), in.beta.data(),
                                      rlf, r_out.data(), r_lse.data(), c.B, c.T, c.H, c.Dh, scale,
                                      nn::PathForm::Blockwise, blk, nullptr);

  const Tol tol = tolerance(dt);
  std::vector<Checked> items;
  items.push_back({"out", std::move(got[0]), &r_out, tol.out});
  items.push_back({"lse", std::move(got[1]), &r_lse, tol.lse});
  items.push_back({"dq", std::move(got[2]), &r_dq, tol.grad});
  items.push_back({"dk", std::move(got[3]), &r_dk, tol.grad});
  items.push_back({"dv", std::move(got[4]), &r_dv, tol.grad});
  items.push_back({"dw", std::move(got[5]), &r_dw, tol.grad});
  items.push_back({"dbeta", std::move(got[6]), &r_db, tol.grad});
  if (c.gate) {
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h) EXPECT_EQ(got[7][b * c.T * c.H + h], 0.0) << "dlog_f at position 0";
    items.push_back({"dlog_f", std::move(got[7]), &r_df, tol.grad});
  }
  EXPECT_EQ(bad, 0) << "outputs left unwritten (poison) or non-finite";
  expect_close(items, "PaTH short " + what);
}

// Every supported head dim at T from 1 to 64: odd T (padding rows), T not a multiple of 4, the
// study cells' lengths (21, 22, 32), the largest T whose backward fits at Dh 128 (48) and the limit.
const std::vector<int64_t>& short_lengths() {
  static const std::vector<int64_t> t = {1, 2, 7, 21, 32, 33, 48, 64};
  return t;
}

void check_short_grid(DType dt, uint64_t seed) {
  for (int64_t Dh : {16, 32, 64, 128})
    for (int64_t T : short_lengths())
      for (bool gate : {false, true}) {
        const Case c{2, T, 3, Dh, gate};
        check(c, dt, expected(c, dt), seed += 7);
      }
}

TEST(CudaPathShort, MatchesDoubleCpuFp32) {
  SKIP_WITHOUT_DEVICE();
  check_short_grid(DType::F32, 1000);
}

TEST(CudaPathShort, MatchesDoubleCpuBf16) {
  SKIP_WITHOUT_DEVICE();
  check_short_grid(DType::BF16, 2000);
}

// The warp kernels at awkward lengths (one row, two, odd, the 4-row chunks' edges, the lane limit)
// and every head dim they take, gate on and off; 9 heads, so that a CTA of several warps has idle
// warps at the end. With path_short_warp off, the CTA kernels at the same
// shapes.
void check_warp_grid(DType dt, uint64_t seed, bool warp) {
  AttentionOptions opt;
  opt.path_short_warp = warp;
  for (int64_t Dh : {16, 32, 64})
    for (int64_t T : {1, 2, 7, 16, 31, 32})
      for (bool gate : {false, true}) check({3, T, 3, Dh, gate}, dt, warp ? Kernel::Warp : Kernel::Cta, seed += 7, opt);
}

TEST(CudaPathShort, WarpKernelsFp32) {
  SKIP_WITHOUT_DEVICE();
  check_warp_grid(DType::F32, 7000, true);
}

TEST(CudaPathShort, WarpKernelsBf16) {
  SKIP_WITHOUT_DEVICE();
  check_warp_grid(DType::BF16, 8000, true);
}

TEST(CudaPathShort, CtaKernelsAtWarpShapes) {
  SKIP_WITHOUT_DEVICE();
  check_warp_grid(DType::F32, 9000, false);
  check_warp_grid(DType::BF16, 9500, false);
}

// A factors buffer shared by the forward and the backward: the warp kernels keep each head's Tinv and
// Z in it and the backward starts from them. At the warp grid's shapes and the a5_l32 study's (with
// beta near 2), the results match the reference and equal the backward that solves again, bit for bit.
TEST(CudaPathShort, WarpKernelsFromKeptFactors) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 9900;
  for (DType dt : {DType::F32, DType::BF16}) {
    std::vector<Case> cases = {Case{16, 32, 4, 32, true}, Case{2, 32, 2, 16, false, 1.9, 1.999}};
    for (int64_t Dh : {16, 32, 64})
      for (int64_t T : {1, 7, 21, 32}) cases.push_back(Case{3, T, 3, Dh, T == 7});
    for (const Case& c : cases) {
      check(c, dt, Kernel::Warp, seed += 7, {}, true);
      PathInputs in = make_inputs(c.B, c.T, c.H, c.Dh, c.gate, seed, c.beta_lo, c.beta_hi);
      Vec dout = randn(in.nx(), seed + 99);
      int64_t bad = 0;
      const std::vector<Vec> solved = run_device(c, dt, in, dout, {}, false, bad);
      const std::vector<Vec> kept = run_device(c, dt, in, dout, {}, true, bad);
      EXPECT_EQ(bad, 0);
      for (size_t i = 0; i < solved.size(); ++i)
        EXPECT_EQ(solved[i], kept[i]) << describe(c, dt, Kernel::Warp) << ": output " << i << " differs";
    }
  }
}

// beta near 2 (reflections, the ill-conditioned UT inverse) at the block-length limit and below, on
// both short kernels.
TEST(CudaPathShort, BetaNearTwo) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 3000;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const Case& c : {Case{2, 64, 2, 16, true, 1.9, 1.999}, Case{2, 64, 2, 32, false, 1.9, 1.999},
                          Case{1, 64, 2, 64, true, 1.9, 1.999}, Case{3, 33, 2, 128, true, 1.9, 1.999},
                          Case{2, 64, 1, 16, false, 0.0, 2.0}})
      check(c, dt, Kernel::Cta, seed += 7);
    for (const Case& c : {Case{2, 32, 2, 16, true, 1.9, 1.999}, Case{2, 32, 2, 32, false, 1.9, 1.999},
                          Case{1, 32, 3, 64, true, 1.9, 1.999}, Case{2, 31, 1, 16, false, 0.0, 2.0}})
      check(c, dt, Kernel::Warp, seed += 7);
  }
}

// The study cells' shapes, with fewer sequences (the reference runs in double on the CPU): word
// problem A5 at length 32 (H 4, Dh 32) and Merrill's A5 (T 22, H 8, Dh 64), gate on and off; the
// planned kernels (the warp kernels), and the CTA kernels with path_short_warp off.
TEST(CudaPathShort, StudyShapes) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 4000;
  AttentionOptions cta;
  cta.path_short_warp = false;
  for (DType dt : {DType::BF16, DType::F32})
    for (const Case& c : {Case{64, 32, 4, 32, false}, Case{64, 32, 4, 32, true}, Case{32, 22, 8, 64, false},
                          Case{32, 21, 8, 64, true}}) {
      check(c, dt, Kernel::Warp, seed += 7);
      check(c, dt, Kernel::Cta, seed += 7, cta);
    }
}

// Past the limit (T > 64, or the backward's shared memory over the device's) the plan keeps the
// blockwise pipeline, which still matches.
TEST(CudaPathShort, LongerSequencesFallBack) {
  SKIP_WITHOUT_DEVICE();
  uint64_t seed = 5000;
  for (DType dt : {DType::F32, DType::BF16})
    for (const Case& c : {Case{1, 65, 2, 32, true}, Case{1, 113, 2, 16, false}, Case{2, 128, 1, 64, true},
                          Case{1, 257, 1, 32, false}, Case{1, 64, 2, 128, true}})
      check(c, dt, Kernel::Pipeline, seed += 7);
}

// The blockwise pipeline at short T (path_short off), which the short kernels otherwise replace.
TEST(CudaPathShort, PipelineAtShortLengths) {
  SKIP_WITHOUT_DEVICE();
  AttentionOptions opt;
  opt.path_short = false;
  uint64_t seed = 6000;
  for (DType dt : {DType::F32, DType::BF16})
    for (const Case& c : {Case{1, 1, 1, 16, true}, Case{2, 7, 3, 32, false}, Case{1, 64, 2, 64, true},
                          Case{4, 32, 2, 128, false}})
      check(c, dt, Kernel::Pipeline, seed += 7, opt);
}

}  // namespace
}  // namespace sb::test
#else
TEST(CudaPathShort, SkippedWithoutCuda) {
  GTEST_SKIP() << "statebench was built without CUDA (STATEBENCH_HAVE_CUDA undefined): PaTH short tests skipped";
}
#endif
