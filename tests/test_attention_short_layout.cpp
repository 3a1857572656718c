// test_attention_short_layout.cpp: the short-sequence attention kernels' choice and shared-memory
// layouts (kernels/attention/plan.hpp), host functions of the shapes, device limits and options: the
// PaTH CTA and two-warps-per-head kernels and softmax's short (warp) kernels. Built only with
// CUDA (the plan is part of the kernels library).
#include <gtest/gtest.h>

#ifdef STATEBENCH_HAVE_CUDA

#include <cstdint>

#include "attention_plan_test_util.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/internal.hpp"

namespace sb::test {
namespace {

using cuda::AttentionOptions;
using cuda::detail::DeviceLimits;

// The short-T PaTH kernels: chosen up to T = 64 (one UT block) where the backward's shared memory
// fits the device (at Dh 128 up to T = 48 on 227 KiB), never with path_short off; the layout's
// regions follow one another without overlap and the forward's are a prefix of the backward's.
TEST(AttentionShortLayout, PathShortChoice) {
  using cuda::detail::path_short;
  using cuda::detail::path_short_layout;
  const DeviceLimits dev = h100();
  for (int64_t Dh : {16, 32, 64})
    for (int64_t T : {1, 7, 21, 22, 32, 33, 63, 64}) EXPECT_TRUE(path_short({1024, T, 4, Dh}, dev, {})) << T << " " << Dh;
  for (int64_t T : {1, 32, 48}) EXPECT_TRUE(path_short({8, T, 2, 128}, dev, {})) << T;
  for (int64_t T : {52, 64}) EXPECT_FALSE(path_short({8, T, 2, 128}, dev, {})) << T;
  for (int64_t T : {65, 113, 128, 257, 2048}) EXPECT_FALSE(path_short({8, T, 2, 32}, dev, {})) << T;
  cuda::AttentionOptions off;
  off.path_short = false;
  EXPECT_FALSE(path_short({1024, 32, 4, 32}, dev, off));
  DeviceLimits small = dev;
  small.max_smem = 48 * 1024;  // a device without opt-in shared memory
  EXPECT_TRUE(path_short({1, 16, 4, 32}, small, {}));
  EXPECT_FALSE(path_short({1, 64, 4, 64}, small, {}));
  // a5_l32 (T 32, Dh 32): 4 CTAs per SM fit in shared memory.
  EXPECT_LE(path_short_layout(32, 32).bwd_floats * 4 * 4, 228 * 1024);
  for (int64_t Dh : {16, 32, 64, 128})
    for (int64_t T : {1, 7, 32, 64}) {
      const auto L = path_short_layout(T, Dh);
      EXPECT_EQ(L.Tp % 4, 0);
      EXPECT_GE(L.Tp, T);
      EXPECT_GE(L.qs, 2 * L.Tp + 4 * L.Tp);  // the double prefix sums and four float vectors first
      const int64_t x = L.Tp * (Dh + 1), t = L.Tp * (L.Tp + 1);
      EXPECT_EQ(L.k - L.qs, x);
      EXPECT_EQ(L.w - L.k, x);
      EXPECT_EQ(L.v - L.w, x);
      EXPECT_EQ(L.m1 - L.v, x);
      EXPECT_EQ(L.m2 - L.m1, t);
      EXPECT_EQ(L.m3 - L.m2, t);
      EXPECT_EQ(L.m4 - L.m3, t);
      EXPECT_EQ(L.fwd_floats - L.m4, t);
      EXPECT_EQ(L.dout, L.fwd_floats);
      EXPECT_EQ(L.m5 - L.dout, x);
      EXPECT_EQ(L.dk - L.m5, t);
      EXPECT_EQ(L.dw - L.dk, x);
      EXPECT_EQ(L.bwd_floats - L.dw, x);
    }
}

// The two-warps-per-head short kernels: chosen at T <= 32 and Dh 16, 32 or 64 on the short path (with
// path_short_warp on and one head's backward region within the device's shared memory), the CTA
// kernels otherwise, also where only the warp kernels fit; never with path_short off. A head's
// regions: float4-aligned, strides 4 mod 32 in floats with an odd number of float4s (a lane's own
// row in float4s is free of bank conflicts), v over s1..s2 only in the forward, and in the
// backward v and dout apart and dout past s4 (read together); as many heads resident per SM as the
// kernels' launch bounds assume.
TEST(AttentionShortLayout, PathShortWarpChoice) {
  using cuda::detail::path_short;
  using cuda::detail::path_short_warp;
  using cuda::detail::path_short_warp_layout;
  const DeviceLimits dev = h100();
  for (int64_t Dh : {16, 32, 64})
    for (int64_t T : {1, 2, 7, 16, 21, 22, 31, 32}) {
      EXPECT_TRUE(path_short_warp({1024, T, 4, Dh}, dev, {})) << T << " " << Dh;
      EXPECT_TRUE(path_short({1024, T, 4, Dh}, dev, {})) << T << " " << Dh;
    }
  for (int64_t T : {33, 48, 64}) {
    EXPECT_FALSE(path_short_warp({8, T, 2, 32}, dev, {})) << T;
    EXPECT_TRUE(path_short({8, T, 2, 32}, dev, {})) << T;  // the CTA kernels
  }
  for (int64_t T : {1, 32}) {
    EXPECT_FALSE(path_short_warp({8, T, 2, 128}, dev, {})) << T;
    EXPECT_TRUE(path_short({8, T, 2, 128}, dev, {})) << T;
  }
  AttentionOptions cta;
  cta.path_short_warp = false;
  EXPECT_FALSE(path_short_warp({1024, 32, 4, 32}, dev, cta));
  EXPECT_TRUE(path_short({1024, 32, 4, 32}, dev, cta));
  AttentionOptions off;
  off.path_short = false;
  EXPECT_FALSE(path_short_warp({1024, 32, 4, 32}, dev, off));
  EXPECT_FALSE(path_short({1024, 32, 4, 32}, dev, off));
  DeviceLimits small = dev;
  small.max_smem = 48 * 1024;  // the CTA kernel's backward at (32, 32) needs 50 KiB, a head's 36 KiB
  EXPECT_TRUE(path_short_warp({1, 32, 4, 32}, small, {}));
  EXPECT_TRUE(path_short({1, 32, 4, 32}, small, {}));
  EXPECT_FALSE(path_short({1, 32, 4, 32}, small, cta));
  EXPECT_FALSE(path_short_warp({1, 32, 4, 64}, small, {}));  // 56 KiB
  EXPECT_FALSE(path_short({1, 32, 4, 64}, small, {}));
  for (int64_t Dh : {16, 32, 64}) {
    const auto L = path_short_warp_layout(Dh);
    const int64_t x = 32 * (Dh + 4), t = 32 * 36;
    for (int64_t ld : {L.ldx, L.ldt}) {
      EXPECT_EQ(ld % 4, 0) << Dh;
      EXPECT_EQ((ld / 4) % 2, 1) << Dh;
    }
    for (int64_t off : {L.beta, L.qs, L.k, L.w, L.s1, L.s2, L.s3, L.fwd_v, L.fwd_floats, L.v, L.dout, L.s4, L.s5,
                        L.bwd_floats})
      EXPECT_EQ(off % 4, 0) << Dh;
    EXPECT_EQ(L.g, 0);
    EXPECT_EQ(L.beta, 64);  // 32 doubles first
    EXPECT_EQ(L.qs, 96);
    EXPECT_EQ(L.k - L.qs, x);
    EXPECT_EQ(L.w - L.k, x);
    EXPECT_EQ(L.s1 - L.w, x);
    EXPECT_EQ(L.s2 - L.s1, t);
    EXPECT_EQ(L.s3 - L.s2, t);
    EXPECT_EQ(L.fwd_floats, L.s3 + t);
    EXPECT_EQ(L.fwd_v, L.s1);
    EXPECT_LE(L.fwd_v + x, L.s3);
    EXPECT_EQ(L.v, L.fwd_floats);
    EXPECT_EQ(L.s4, L.v);
    EXPECT_EQ(L.s5, L.s4 + t);
    EXPECT_GE(L.dout, L.v + x);
    EXPECT_GE(L.dout, L.s4 + t);
    EXPECT_GE(L.bwd_floats, L.dout + x);
    EXPECT_GE(L.bwd_floats, L.s5 + t);
  }
  // a5_l32 (Dh 32): 6 backward and 8 forward heads (12 and 16 warps) resident per SM in CTAs of one
  // head, 1 KiB reserved a CTA.
  EXPECT_LE(6 * (path_short_warp_layout(32).bwd_floats * 4 + 1024), dev.max_smem + 1024);
  EXPECT_GT(7 * (path_short_warp_layout(32).bwd_floats * 4 + 1024), dev.max_smem + 1024);
  EXPECT_LE(8 * (path_short_warp_layout(32).fwd_floats * 4 + 1024), dev.max_smem + 1024);
  // merrill_a5 (Dh 64): 3 backward and 5 forward heads.
  EXPECT_LE(3 * (path_short_warp_layout(64).bwd_floats * 4 + 1024), dev.max_smem + 1024);
  EXPECT_GT(4 * (path_short_warp_layout(64).bwd_floats * 4 + 1024), dev.max_smem + 1024);
  EXPECT_LE(5 * (path_short_warp_layout(64).fwd_floats * 4 + 1024), dev.max_smem + 1024);
  EXPECT_GT(6 * (path_short_warp_layout(64).fwd_floats * 4 + 1024), dev.max_smem + 1024);
}

// Softmax's short kernels (two warps a head in fp32, one in bf16): T <= 32 and Dh 16, 32 or 64
// with softmax_short on; the blockwise kernels otherwise.
TEST(AttentionShortLayout, SoftmaxShortWarpChoice) {
  using cuda::detail::softmax_short_warp;
  for (int64_t Dh : {16, 32, 64})
    for (int64_t T : {1, 7, 21, 32}) EXPECT_TRUE(softmax_short_warp({1024, T, 4, Dh}, {})) << T << " " << Dh;
  for (int64_t T : {33, 64, 512}) EXPECT_FALSE(softmax_short_warp({8, T, 4, 32}, {})) << T;
  EXPECT_FALSE(softmax_short_warp({8, 32, 2, 128}, {}));
  EXPECT_FALSE(softmax_short_warp({8, 32, 2, 8}, {}));
  AttentionOptions off;
  off.softmax_short = false;
  EXPECT_FALSE(softmax_short_warp({1024, 32, 4, 32}, off));
}

}  // namespace
}  // namespace sb::test

#else  // !STATEBENCH_HAVE_CUDA

TEST(AttentionShortLayout, SkippedWithoutCuda) {
  GTEST_SKIP() << "statebench was built without CUDA (STATEBENCH_HAVE_CUDA undefined): attention layout tests skipped";
}

#endif
