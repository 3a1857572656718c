// test_attention_layout.cpp: the CUDA attention backend's plan (kernels/attention/plan.hpp), pure
// functions of the shapes, dtype, device limits and options, so no GPU is needed: the PaTH
// backward's head groups, the superchunk plan, the backward's launch shape, the factor layout and
// the options' checks (the short-sequence kernels' choice: test_attention_short_layout.cpp). Built
// only with CUDA (the plan is part of the kernels library).
#include <gtest/gtest.h>

#ifdef STATEBENCH_HAVE_CUDA

#include <cstddef>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_plan_test_util.hpp"
#include "core/error.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/internal.hpp"

namespace sb::test {
namespace {

using cuda::AttentionOptions;
using cuda::DType;
using cuda::detail::DeviceLimits;

// The wgmma kernels' CTA order: every (head, job) exactly once; within a chunk, job-major over
// its heads (the heaviest job of each head first); chunk 0 (or one larger than the heads): one chunk.
TEST(AttentionLayout, HeadOrderCoversEveryItemOnce) {
  for (const auto& [nheads, njobs, chunk] : {std::tuple<int64_t, int64_t, int64_t>{128, 16, 16}, {37, 5, 16},
                                             {7, 3, 0}, {7, 3, 100}, {1, 64, 16}, {100, 1, 16}, {5, 4, 1}}) {
    std::vector<int> seen(static_cast<size_t>(nheads * njobs), 0);
    const int64_t c = chunk <= 0 || chunk > nheads ? nheads : chunk;
    int64_t prev_job = -1, prev_chunk = 0;
    for (int64_t item = 0; item < nheads * njobs; ++item) {
      int64_t bh = -1, job = -1;
      cuda::detail::head_order(item, nheads, njobs, chunk, bh, job);
      ASSERT_TRUE(bh >= 0 && bh < nheads && job >= 0 && job < njobs) << item;
      ++seen[static_cast<size_t>(bh * njobs + job)];
      const int64_t cur = bh / c;
      EXPECT_GE(cur, prev_chunk) << "chunks in order (item " << item << ")";
      if (cur != prev_chunk) prev_job = -1, prev_chunk = cur;
      EXPECT_GE(job, prev_job) << "job-major within a chunk (item " << item << ")";
      prev_job = job;
    }
    for (int n : seen) EXPECT_EQ(n, 1);
  }
  int64_t bh = 0, job = 0;
  cuda::detail::head_order(17, 128, 16, 16, bh, job);  // chunk 0: heads 0-15, item 17 = job 1 of head 1
  EXPECT_EQ(bh, 1);
  EXPECT_EQ(job, 1);
  cuda::detail::head_order(17, 128, 16, 0, bh, job);  // one chunk: item 17 = job 0 of head 17
  EXPECT_EQ(bh, 17);
  EXPECT_EQ(job, 0);
}

// The inter pass's query ranges: for every superchunk b < nsc - 1, its ranges are consecutive,
// non-empty, at most qchunk long (qchunk > 0) and cover the query blocks after it exactly once;
// superchunks in order.
TEST(AttentionLayout, InterRangesCoverEachQueryBlockOnce) {
  using cuda::detail::inter_range;
  using cuda::detail::inter_ranges;
  for (const auto& [nb, sc] : {std::pair{128, 12}, {32, 6}, {12, 3}, {9, 3}, {7, 2}, {2, 1}}) {
    const int nsc = (nb + sc - 1) / sc;
    for (int qchunk : {0, 1, 3, 4, 7, 29, 1000}) {
      SCOPED_TRACE(testing::Message() << "nb " << nb << ", sc " << sc << ", qchunk " << qchunk);
      const int64_t n = inter_ranges(nb, sc, nsc, qchunk);
      int prev_sb = 0, next = sc;  // the next query block expected (superchunk prev_sb)
      for (int64_t r = 0; r < n; ++r) {
        int sb = -1, q0 = -1, q1 = -1;
        inter_range(r, nb, sc, nsc, qchunk, sb, q0, q1);
        ASSERT_TRUE(sb >= 0 && sb + 1 < nsc) << r;
        ASSERT_GE(sb, prev_sb) << r;
        if (sb != prev_sb) {
          EXPECT_EQ(next, nb) << "superchunk " << prev_sb << " covered to the end";
          prev_sb = sb, next = (sb + 1) * sc;
        }
        EXPECT_EQ(q0, next) << r;
        EXPECT_LT(q0, q1) << r;
        if (qchunk > 0) EXPECT_LE(q1 - q0, qchunk) << r;
        next = q1;
      }
      EXPECT_EQ(prev_sb, nsc - 2);
      EXPECT_EQ(next, nb);
      if (qchunk == 0) EXPECT_EQ(n, nsc - 1);
    }
  }
}

// Their length: where superchunk 0's range is more than 1.5 times one SM's share of the launch's
// query-block visits, about half that share, at least 4; else 0 (whole ranges), and 0 without
// superchunks.
TEST(AttentionLayout, InterQueryChunk) {
  using cuda::detail::inter_qchunk;
  // (2,8192,16,128) in groups of 2 heads: superchunks of 12 blocks, 11 of them; 620 query blocks
  // after the first 10, 6 key-block pairs each, 2 heads: 7440 visits, 57 per SM of 132, against
  // 116 query blocks after superchunk 0.
  EXPECT_EQ(inter_qchunk(128, 12, 11, 2, 132), 29);
  EXPECT_EQ(inter_qchunk(12, 3, 4, 1, 132), 4);  // 18 x 2 visits: the minimum
  // (4,4096,16,64) in groups of 8 heads: 310 x 3 x 8 visits, 57 per SM, 58 after superchunk 0
  // (split, it measured 2.5% slower); at 16 heads 113 per SM.
  EXPECT_EQ(inter_qchunk(64, 6, 11, 8, 132), 0);
  EXPECT_EQ(inter_qchunk(64, 6, 11, 16, 132), 0);
  EXPECT_EQ(inter_qchunk(128, 12, 11, 4, 132), 0);  // 116 against 113 per SM
  EXPECT_EQ(inter_qchunk(12, 0, 0, 1, 132), 0);
}

// Options out of range are errors naming the field; the defaults pass.
TEST(AttentionLayout, OptionsAreChecked) {
  EXPECT_NO_THROW(cuda::detail::check_options(AttentionOptions{}));
  auto rejected = [](const AttentionOptions& o, const char* field) {
    try {
      cuda::detail::check_options(o);
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  for (int sc : {1, -2}) {
    AttentionOptions o;
    o.path_superchunk = sc;
    rejected(o, "path_superchunk");
  }
  AttentionOptions o;
  o.path_bwd_group = -1;
  rejected(o, "path_bwd_group");
  o = {};
  o.path_fwd_group = -3;
  rejected(o, "path_fwd_group");
  o = {};
  o.path_checkpoint_budget = -1;
  rejected(o, "path_checkpoint_budget");
}

// The wgmma kernels run only with bf16 at Dh 64 or 128 on an sm_90 device, and not with sm90 off.
TEST(AttentionLayout, WgmmaChoice) {
  using cuda::detail::uses_wgmma;
  const DeviceLimits hopper = h100();
  DeviceLimits other = hopper;
  other.sm90 = false;
  AttentionOptions off;
  off.sm90 = false;
  EXPECT_TRUE(uses_wgmma(64, DType::BF16, hopper, {}));
  EXPECT_TRUE(uses_wgmma(128, DType::BF16, hopper, {}));
  EXPECT_FALSE(uses_wgmma(32, DType::BF16, hopper, {}));
  EXPECT_FALSE(uses_wgmma(64, DType::F32, hopper, {}));
  EXPECT_FALSE(uses_wgmma(64, DType::BF16, other, {}));
  EXPECT_FALSE(uses_wgmma(64, DType::BF16, hopper, off));
}

// The PaTH pairs kernel's launch shape: two pipeline stages unless one lets more CTAs share an SM,
// its persistent grid = SMs x residency; the widest query block whose shared memory fits; none
// fitting is an error naming the shared memory.
TEST(AttentionLayout, BackwardShapeFollowsOccupancy) {
  const cuda::AttnDims d{8, 2048, 16, 64};
  auto cfg = cuda::detail::bwd_config(d, DType::BF16, true, h100(1, 2), {});
  EXPECT_EQ(cfg.warps, 4);
  EXPECT_EQ(cfg.stages, 1);
  EXPECT_EQ(cfg.grid, 264);  // 132 SMs x 2, fewer than the group's query blocks
  cfg = cuda::detail::bwd_config(d, DType::BF16, true, h100(2, 2), {});
  EXPECT_EQ(cfg.stages, 2);
  DeviceLimits narrow = h100();
  narrow.path_bwd_occupancy[0][0] = narrow.path_bwd_occupancy[0][1] = 0;  // 4 warps do not fit
  cfg = cuda::detail::bwd_config(d, DType::BF16, true, narrow, {});
  EXPECT_EQ(cfg.warps, 2);
  DeviceLimits none = h100();
  for (auto& w : none.path_bwd_occupancy) w[0] = w[1] = 0;
  try {
    cuda::detail::bwd_config(d, DType::BF16, true, none, {});
    ADD_FAILURE() << "no fitting query block accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
  // fp32 splits the gradient chains; bf16 takes one plane (and 4 sc_bwd parts at Dh 128).
  const cuda::AttnDims big{2, 8192, 16, 128};
  EXPECT_TRUE(cuda::detail::bwd_config(big, DType::F32, true, h100(), {}).split_grads);
  cfg = cuda::detail::bwd_config(big, DType::BF16, true, h100(), {});
  EXPECT_FALSE(cfg.split_grads);
  EXPECT_EQ(cfg.sc_parts, 4);
  // The checkpoint budget: below one segment per item, ~sqrt(nb) segments.
  const cuda::AttnDims plain{1, 640, 1, 32};  // 10 blocks, superchunks off
  AttentionOptions no_sc;
  no_sc.path_superchunk = 0;
  EXPECT_EQ(cuda::detail::bwd_config(plain, DType::F32, true, h100(), no_sc).seg, 9);
  no_sc.path_checkpoint_budget = 1;
  EXPECT_EQ(cuda::detail::bwd_config(plain, DType::F32, true, h100(), no_sc).seg, 3);
}

// The split PaTH backward's occupancy by design (bf16, 4-warp query blocks): at Dh 64 the own-block
// kernel, and the pairs kernel at one pipeline stage, each fit twice in an H100 SM's 228 KiB of shared
// memory (1 KiB reserved per CTA), two stages of the pairs kernel do not; at Dh 32 the own-block
// kernel fits three times.
TEST(AttentionLayout, SplitBackwardFitsTwoCtasPerSm) {
  using cuda::detail::path_bwd_smem_bytes;
  using cuda::detail::path_own_smem_bytes;
  constexpr int two_per_sm = (228 - 2) * 1024 / 2, three_per_sm = (228 - 3) * 1024 / 3;
  EXPECT_LE(path_own_smem_bytes(32, false, 4), three_per_sm);
  EXPECT_LE(path_own_smem_bytes(64, false, 4), two_per_sm);
  EXPECT_LE(path_bwd_smem_bytes(64, false, true, 4, 1), two_per_sm);
  EXPECT_GT(path_bwd_smem_bytes(64, false, true, 4, 2), two_per_sm);
  // fp32 (split planes everywhere) needs more than bf16 at every head dim and query block
  for (int Dh : {16, 32, 64, 128})
    for (int warps : {1, 2, 4}) EXPECT_GT(path_own_smem_bytes(Dh, true, warps), path_own_smem_bytes(Dh, false, warps));
}

// sc_bwd's CTAs per (head, superchunk): 4 at Dh 128 in bf16, 2 at Dh >= 64, 1 below. Every part
// size of 16-64 rows fits an H100 SM's shared memory (a part of 128 rows would not), and the
// factored transports' dP buffer is the group's (nsc - 1) sc blocks of Dh x Dh (dense: none).
TEST(AttentionLayout, SuperchunkBackwardParts) {
  using cuda::detail::sc_bwd_parts;
  using cuda::detail::sc_bwd_smem_bytes;
  EXPECT_EQ(sc_bwd_parts(128, false), 4);
  EXPECT_EQ(sc_bwd_parts(128, true), 2);
  for (bool f32 : {false, true}) {
    EXPECT_EQ(sc_bwd_parts(64, f32), 2);
    EXPECT_EQ(sc_bwd_parts(32, f32), 1);
    EXPECT_EQ(sc_bwd_parts(16, f32), 1);
  }
  constexpr int one_per_sm = 227 * 1024;
  for (int Dh : {16, 32, 64, 128})
    for (int parts : {1, 2, 4})
      if (Dh / parts >= 16 && Dh / parts <= 64)
        for (bool f32 : {false, true}) EXPECT_LE(sc_bwd_smem_bytes(Dh, f32, parts), one_per_sm) << Dh << " " << parts;
  EXPECT_GT(sc_bwd_smem_bytes(128, true, 1), one_per_sm);  // fp32's split tiles (bf16's one plane fits)
  EXPECT_LT(sc_bwd_smem_bytes(128, false, 2), sc_bwd_smem_bytes(128, true, 2) * 3 / 5);
  EXPECT_EQ(cuda::detail::sc_bwd_dps_floats(2, 12, 11, 128), int64_t{2} * 10 * 12 * 128 * 128);
  EXPECT_EQ(cuda::detail::sc_bwd_dps_floats(2, 6, 6, 64), 0);
}

// The order of the query blocks with the wgmma pass: by the cost 2 j + a where the persistent CTAs
// get fewer than 4 items each ((2,8192,16,128): 256 items on 132 CTAs), else by block (wa = sc: from
// the last).
TEST(AttentionLayout, ItemOrder) {
  using cuda::detail::path_item_weights;
  auto w = path_item_weights(12, 11, 256, 132);
  EXPECT_EQ(w.wj, 2);
  EXPECT_EQ(w.wa, 1);
  w = path_item_weights(6, 6, 64 * 32, 264);
  EXPECT_EQ(w.wj, 1);
  EXPECT_EQ(w.wa, 6);
}

// The head-group policy itself (host arithmetic, no device): all heads while the accumulators fit
// the budget (512 MiB; 128 MiB where one head's take more than 24 MiB); else as many as fit, at least
// 3 waves of the persistent grid, split evenly; AttentionOptions::path_bwd_group overrides (capped at B H).
TEST(AttentionLayout, BackwardHeadGroupPolicy) {
  using cuda::detail::path_acc_row_bytes;
  using cuda::detail::path_bwd_group;
  // (2,8192,16,128): nb = 128 blocks, 11 superchunks, 64-row query blocks, 132 persistent CTAs.
  const cuda::AttnDims big{2, 8192, 16, 128};
  EXPECT_EQ(path_acc_row_bytes(big, 128, 11, 0), 27983872);        // 6 [Tp, Dh] + dz + dws (factored)
  EXPECT_EQ(path_bwd_group(big, 128, 128, 11, 0, 132, {}), 4);         // 26.7 MiB a head: 4 fit 128 MiB -> 8 launches
  EXPECT_EQ(path_bwd_group(big, 128, 128, 11, 0, 1000, {}), 16);       // 3 waves of 1000 CTAs need 24 -> 2 x 16
  const cuda::AttnDims mid{8, 2048, 16, 64};                     // dense: + dp
  EXPECT_EQ(path_acc_row_bytes(mid, 32, 4, 0), 4259840);
  EXPECT_EQ(path_bwd_group(mid, 32, 32, 4, 0, 132, {}), 64);           // 126 fit 512 MiB -> 2 launches of 64
  // MQRAR (64,768,2,128) with the inter pass's states (1152 rows): 3.7 MB a head, all 128 fit.
  EXPECT_EQ(path_bwd_group({64, 768, 2, 128}, 12, 12, 4, 1152, 132, {}), 128);
  EXPECT_EQ(path_bwd_group({6, 2048, 21, 64}, 32, 32, 4, 0, 132, {}), 126);  // 126 heads of 4.26 MB fit 512 MiB
  EXPECT_EQ(path_bwd_group({1, 2048, 127, 64}, 32, 32, 4, 0, 132, {}), 64);  // 127 do not: 2 launches of 64
  EXPECT_EQ(path_bwd_group({4, 256, 2, 64}, 4, 4, 0, 0, 132, {}), 8);  // small: one group
  // The wgmma inter pass's states: superchunk b covers rows (b + 1) S .. Tp - 1, stored one after
  // the other; at (2,8192,16,128), 10 superchunks of 768 rows before the last: 39680 rows per head,
  // fp32 gradients (zeroed with the accumulators) and bf16 states.
  EXPECT_EQ(cuda::detail::sc_state_row(0, 8192, 768), 0);
  EXPECT_EQ(cuda::detail::sc_state_row(1, 8192, 768), 8192 - 768);
  EXPECT_EQ(cuda::detail::sc_state_row(2, 8192, 768), 2 * 8192 - 768 - 2 * 768);
  EXPECT_EQ(cuda::detail::sc_state_row(10, 8192, 768), 39680);
  EXPECT_EQ(path_acc_row_bytes(big, 128, 11, 39680), 27983872 + 39680 * 128 * 6);
  // With the pass the floor is 1.5 waves: 2 fit 128 MiB, and 1.5 waves of 132 CTAs need 2 (without
  // the pass, 3 waves need 4); of 66 CTAs 1; of 264 CTAs 4 (over the budget: the plan then drops
  // the pass).
  EXPECT_EQ(path_bwd_group(big, 128, 128, 11, 39680, 132, {}), 2);
  EXPECT_EQ(path_bwd_group(big, 128, 128, 11, 39680, 66, {}), 2);
  EXPECT_EQ(path_bwd_group(big, 128, 128, 11, 39680, 264, {}), 4);
  AttentionOptions forced;
  forced.path_bwd_group = 3;
  EXPECT_EQ(path_bwd_group(big, 128, 128, 11, 0, 132, forced), 3);
  forced.path_bwd_group = 100;
  EXPECT_EQ(path_bwd_group(big, 128, 128, 11, 0, 132, forced), 32);
}

// The superchunk plan (host arithmetic, no device): with the wgmma pass, superchunks of 6 blocks from 24 blocks on where the pass's states
// fit the accumulator budget; else the default size, with the pass where it fits (at
// (2,8192,16,128): 12 blocks, 2 heads per group); from 9 to 23 blocks round(sqrt(nb)) (at least 3)
// with the pass; without wgmma the default size and never the pass.
TEST(AttentionLayout, SuperchunkPlan) {
  using cuda::detail::superchunk_plan_for;
  const cuda::AttnDims mid{8, 2048, 16, 64}, long4k{4, 4096, 16, 64}, big{2, 8192, 16, 128};
  auto p = superchunk_plan_for(mid, true, 32, 132, {});  // 32 blocks: 6 superchunks of 6 (the last of 2)
  EXPECT_EQ(p.sc, 6);
  EXPECT_EQ(p.nsc, 6);
  EXPECT_TRUE(p.inter);
  EXPECT_EQ(p.xs_rows, cuda::detail::sc_state_row(5, 2048, 384));
  p = superchunk_plan_for(long4k, true, 64, 132, {});
  EXPECT_EQ(p.sc, 6);
  EXPECT_TRUE(p.inter);
  p = superchunk_plan_for(big, true, 128, 132, {});  // 6 blocks: 2 heads' states exceed 128 MiB; 12: 2 fit
  EXPECT_EQ(p.sc, 12);
  EXPECT_EQ(p.nsc, 11);
  EXPECT_TRUE(p.inter);
  EXPECT_EQ(p.xs_rows, 39680);
  p = superchunk_plan_for(big, true, 128, 264, {});  // a larger GPU: 4 heads per group, no room for the pass
  EXPECT_EQ(p.sc, 12);
  EXPECT_FALSE(p.inter);
  EXPECT_EQ(p.xs_rows, 0);
  p = superchunk_plan_for(mid, false, 32, 132, {});  // no wgmma: max(8, sqrt(32))
  EXPECT_EQ(p.sc, 8);
  EXPECT_FALSE(p.inter);
  p = superchunk_plan_for({2, 1000, 2, 64}, true, 16, 132, {});  // 16 blocks: 4 superchunks of 4
  EXPECT_EQ(p.sc, 4);
  EXPECT_EQ(p.nsc, 4);
  EXPECT_TRUE(p.inter);
  p = superchunk_plan_for({64, 768, 2, 128}, true, 12, 132, {});  // 12 blocks (MQRAR): 4 of 3
  EXPECT_EQ(p.sc, 3);
  EXPECT_EQ(p.nsc, 4);
  EXPECT_TRUE(p.inter);
  p = superchunk_plan_for({2, 1000, 2, 64}, false, 16, 132, {});  // no wgmma: 2 of 8, no pass
  EXPECT_EQ(p.sc, 8);
  EXPECT_FALSE(p.inter);
  EXPECT_EQ(superchunk_plan_for({64, 512, 4, 64}, true, 8, 132, {}).sc, 0);  // 8 blocks: none
  AttentionOptions three;
  three.path_superchunk = 3;
  p = superchunk_plan_for(mid, true, 32, 132, three);
  EXPECT_EQ(p.sc, 3);
  EXPECT_EQ(p.nsc, 11);
  EXPECT_TRUE(p.inter);
  three.path_superchunk = 0;
  EXPECT_EQ(superchunk_plan_for(mid, true, 32, 132, three).sc, 0);
  // The whole plan on a device: short sequences (nb <= 2) have none.
  EXPECT_EQ(cuda::detail::superchunk_plan({4, 128, 2, 64}, DType::BF16, h100(), {}).sc, 0);
  EXPECT_EQ(cuda::detail::superchunk_plan(mid, DType::BF16, h100(), {}).sc, 6);
  AttentionOptions mma;
  mma.sm90 = false;
  p = cuda::detail::superchunk_plan(mid, DType::BF16, h100(), mma);
  EXPECT_EQ(p.sc, 8);
  EXPECT_FALSE(p.inter);
}

// The forward's wgmma pass between superchunks: where the backward's runs, in head groups whose
// states fit the accumulator budget (at (2,8192,16,128): 10.2 MB a head in 128 MiB, 13 heads, evened
// out to 11 over 3 launches; at (8,2048,16,64) all 128 heads), off without the backward's pass;
// AttentionOptions::path_fwd_group forces a group size.
TEST(AttentionLayout, ForwardInterPlan) {
  using cuda::detail::path_fwd_inter_plan_for;
  using cuda::detail::superchunk_plan_for;
  const cuda::AttnDims mid{8, 2048, 16, 64}, big{2, 8192, 16, 128};
  const auto pbig = superchunk_plan_for(big, true, 128, 132, {}), pmid = superchunk_plan_for(mid, true, 32, 132, {});
  auto f = path_fwd_inter_plan_for(big, pbig, {});
  EXPECT_EQ(f.group, 11);
  EXPECT_EQ(f.xs_rows, 39680);
  f = path_fwd_inter_plan_for(mid, pmid, {});
  EXPECT_EQ(f.group, 128);
  EXPECT_EQ(f.xs_rows, pmid.xs_rows);
  EXPECT_EQ(path_fwd_inter_plan_for(big, superchunk_plan_for(big, true, 128, 264, {}), {}).group, 0);  // no pass
  EXPECT_EQ(path_fwd_inter_plan_for(mid, superchunk_plan_for(mid, false, 32, 132, {}), {}).group, 0);
  AttentionOptions forced;
  forced.path_fwd_group = 5;
  EXPECT_EQ(path_fwd_inter_plan_for(big, pbig, forced).group, 5);
  EXPECT_EQ(cuda::detail::path_fwd_inter_plan({1, 1000, 2, 64}, DType::F32, h100(), {}).group, 0);  // bf16 only
  // The forward keeps the states in the caller's factors where its pass runs in one group of all heads.
  EXPECT_TRUE(cuda::detail::path_states_kept(mid, DType::BF16, h100(), {}));
  EXPECT_FALSE(cuda::detail::path_states_kept(big, DType::BF16, h100(), {}));
  EXPECT_FALSE(cuda::detail::path_states_kept(mid, DType::F32, h100(), {}));
}

// The factor layout (host arithmetic): Z and Minv keep only their strictly lower parts, packed in
// 2112 floats per 64-row block instead of 4096; minv only for a backward.
TEST(AttentionLayout, FactorLayoutPacksTriangles) {
  const cuda::AttnDims d{2, 128, 3, 64};  // 6 heads x 2 blocks
  const auto f = cuda::detail::factor_layout(d, DType::BF16, true, false, h100(), {});
  EXPECT_EQ(f.minv - f.z, size_t{12} * 2112 * 4);
  EXPECT_EQ(f.c - f.minv, size_t{12} * 2112 * 4);
  const auto fwd_only = cuda::detail::factor_layout(d, DType::BF16, false, false, h100(), {});
  EXPECT_EQ(fwd_only.c, fwd_only.minv);
  EXPECT_EQ(f.total - fwd_only.total, size_t{12} * 2112 * 4);
}

// The scale is checked before anything touches the device (the backward divides the gate gradient
// by it): zero, negative and non-finite scales are errors naming the call.
TEST(AttentionLayout, ScaleMustBePositive) {
  const cuda::AttnDims d{1, 8, 1, 64};
  for (float scale : {0.f, -0.125f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    try {
      cuda::softmax_attention_forward_cuda(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, d, scale,
                                           DType::BF16, nullptr, 0, nullptr);
      ADD_FAILURE() << "scale " << scale << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("softmax attention forward: scale"), std::string::npos) << e.what();
    }
    EXPECT_THROW(cuda::path_attention_backward_cuda(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                    nullptr, d, scale, DType::BF16, nullptr, 0, nullptr),
                 Error);
  }
}

}  // namespace
}  // namespace sb::test

#else  // !STATEBENCH_HAVE_CUDA

TEST(AttentionLayout, SkippedWithoutCuda) {
  GTEST_SKIP() << "statebench was built without CUDA (STATEBENCH_HAVE_CUDA undefined): attention layout tests skipped";
}

#endif
