// test_optimizer.cpp: ParamStore layout, AdamW against an independent implementation of the
// PyTorch formulas, weight decay only on decay views, LR schedule values, gradient clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.hpp"
#include "model/param_store.hpp"
#include "train/optimizer.hpp"

namespace sb {
namespace {

// ---- ParamStore -------------------------------------------------------------------------------

TEST(ParamStore, LayoutViewsAndErrors) {
  ParamStore<float> s;
  EXPECT_EQ(s.add("emb", {5, 3}), 0);
  EXPECT_EQ(s.add("norm.g", {7}), 1);
  EXPECT_EQ(s.add("w", {2, 2, 2}, false), 2);
  EXPECT_THROW(s.add("emb", {1}), Error);     // duplicate
  EXPECT_THROW(s.add("z", {}), Error);        // empty shape
  EXPECT_THROW(s.add("z", {3, 0}), Error);    // zero dimension
  EXPECT_THROW(s.add("", {3}), Error);
  EXPECT_THROW(s.param("emb"), Error);        // not finalized
  s.finalize();
  EXPECT_THROW(s.finalize(), Error);
  EXPECT_THROW(s.add("late", {1}), Error);
  EXPECT_THROW(s.view("nope"), Error);
  EXPECT_TRUE(s.contains("w"));
  EXPECT_FALSE(s.contains("nope"));

  const auto& v = s.views();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].offset, 0);
  EXPECT_EQ(v[0].numel, 15);
  EXPECT_TRUE(v[0].decay);                     // rank 2: decayed (embeddings too, nanoGPT rule)
  EXPECT_EQ(v[1].offset, 16);                  // aligned to 16 elements
  EXPECT_FALSE(v[1].decay);                    // rank 1: no decay
  EXPECT_EQ(v[2].offset, 32);
  EXPECT_FALSE(v[2].decay);                    // explicit flag wins
  EXPECT_EQ(s.size(), 40);
  EXPECT_EQ(s.num_params(), 15 + 7 + 8);
  EXPECT_EQ(s.param("norm.g"), s.params() + 16);
  EXPECT_EQ(s.grad("w"), s.grads() + 32);
  EXPECT_EQ(s.param(2), s.params() + 32);
  for (int64_t i = 0; i < s.size(); ++i) EXPECT_EQ(s.params()[i], 0.0f);
  for (int64_t i = 0; i < s.size(); ++i) s.grads()[i] = 1.0f;
  s.zero_grad();
  for (int64_t i = 0; i < s.size(); ++i) EXPECT_EQ(s.grads()[i], 0.0f);
}

TEST(ParamStore, LayoutHashDistinguishesLayouts) {
  auto make = [](const char* name, int64_t cols, bool decay) {
    ParamStore<double> s;
    s.add("a", {4, cols}, decay);
    s.add(name, {3});
    s.finalize();
    return s.layout_hash();
  };
  const uint64_t h = make("b", 2, true);
  EXPECT_EQ(make("b", 2, true), h);
  EXPECT_NE(make("c", 2, true), h);
  EXPECT_NE(make("b", 3, true), h);
  EXPECT_NE(make("b", 2, false), h);
}

// ---- AdamW ------------------------------------------------------------------------------------

// Straightforward PyTorch AdamW on plain doubles (the formulas from the torch.optim.AdamW docs).
struct ReferenceAdamW {
  double b1, b2, eps, wd;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& p, const std::vector<double>& g, const std::vector<bool>& decay, double lr) {
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      if (decay[i]) p[i] -= lr * wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(b1, t));
      const double vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

template <class S>
void check_adamw_against_reference(double rel_tol) {
  ParamStore<S> store;
  store.add("w", {2, 3});         // decay
  store.add("b", {3});            // no decay
  store.add("e", {4, 2});         // decay
  store.finalize();
  OptimConfig cfg;
  cfg.betas = {0.9, 0.999};
  cfg.eps = 1e-8;
  cfg.weight_decay = 0.1;
  AdamW<S> opt(cfg, store);

  // Flattened reference over the real elements only.
  std::vector<double> p, m0;
  std::vector<bool> decay;
  for (const auto& v : store.views())
    for (int64_t i = 0; i < v.numel; ++i) {
      const double x = 0.5 * std::sin(1.3 * static_cast<double>(p.size()) + 0.2);
      store.params()[v.offset + i] = static_cast<S>(x);
      p.push_back(static_cast<double>(static_cast<S>(x)));
      decay.push_back(v.decay);
    }
  ReferenceAdamW ref{0.9, 0.999, 1e-8, 0.1, std::vector<double>(p.size()), std::vector<double>(p.size())};
  const double lrs[3] = {1e-2, 3e-2, 5e-3};
  for (int step = 0; step < 3; ++step) {
    std::vector<double> g;
    for (const auto& v : store.views())
      for (int64_t i = 0; i < v.numel; ++i) {
        const double x = std::cos(0.7 * static_cast<double>(g.size()) * (step + 1) + step) * (step == 1 ? 3.0 : 0.2);
        store.grads()[v.offset + i] = static_cast<S>(x);
        g.push_back(static_cast<double>(static_cast<S>(x)));
      }
    opt.step(store, lrs[step]);
    ref.step(p, g, decay, lrs[step]);
    EXPECT_EQ(opt.steps_taken(), step + 1);
  }
  size_t k = 0;
  for (const auto& v : store.views())
    for (int64_t i = 0; i < v.numel; ++i, ++k) {
      const double got = static_cast<double>(store.params()[v.offset + i]);
      EXPECT_NEAR(got, p[k], rel_tol * std::max(1.0, std::fabs(p[k]))) << v.name << "[" << i << "]";
      EXPECT_NEAR(static_cast<double>(opt.m()[v.offset + i]), ref.m[k], rel_tol) << v.name;
      EXPECT_NEAR(static_cast<double>(opt.v()[v.offset + i]), ref.v[k], rel_tol) << v.name;
    }
}

TEST(AdamW, MatchesReferenceDouble) { check_adamw_against_reference<double>(1e-13); }
TEST(AdamW, MatchesReferenceFloat) { check_adamw_against_reference<float>(2e-6); }

TEST(AdamW, FirstStepByHand) {
  // Step 1 from zero state: mhat = g, vhat = g^2, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps).
  ParamStore<double> store;
  store.add("w", {1, 2});
  store.finalize();
  store.params()[0] = 2.0, store.params()[1] = -1.0;
  store.grads()[0] = 0.5, store.grads()[1] = -4.0;
  OptimConfig cfg;
  cfg.weight_decay = 0.01;
  cfg.eps = 1e-8;
  AdamW<double> opt(cfg, store);
  opt.step(store, 0.1);
  EXPECT_NEAR(store.params()[0], 2.0 * (1 - 0.001) - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  EXPECT_NEAR(store.params()[1], -1.0 * (1 - 0.001) + 0.1 * 4.0 / (4.0 + 1e-8), 1e-15);
  EXPECT_NEAR(opt.m()[0], 0.05, 1e-16);
  EXPECT_NEAR(opt.v()[1], 0.001 * 16.0, 1e-16);
}

TEST(AdamW, DecayOnlyOnDecayViewsAndPaddingUntouched) {
  ParamStore<float> store;
  store.add("matrix", {3, 3});             // decay
  store.add("gain", {5});                  // no decay
  store.add("emb", {2, 4}, false);         // explicitly not decayed
  store.finalize();
  for (int64_t i = 0; i < store.size(); ++i) store.params()[i] = 1.0f;
  const int64_t pad = store.view("matrix").numel;  // element 9 is padding before "gain" (offset 16)
  ASSERT_LT(pad, store.view("gain").offset);
  store.grads()[pad] = 5.0f;               // a gradient in padding must be ignored
  OptimConfig cfg;
  cfg.weight_decay = 0.5;
  AdamW<float> opt(cfg, store);
  opt.step(store, 0.1);                    // all real gradients are zero: only decay acts
  for (int64_t i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(store.param("matrix")[i], 1.0f - 0.1f * 0.5f);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(store.param("gain")[i], 1.0f);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(store.param("emb")[i], 1.0f);
  EXPECT_EQ(store.params()[pad], 1.0f);
  EXPECT_EQ(opt.m()[pad], 0.0f);
  EXPECT_EQ(opt.v()[pad], 0.0f);
}

TEST(AdamW, RejectsOtherLayouts) {
  ParamStore<float> a, b;
  a.add("x", {4});
  a.finalize();
  b.add("y", {4});
  b.finalize();
  AdamW<float> opt(OptimConfig{}, a);
  EXPECT_THROW(opt.step(b, 0.1), Error);
  ParamStore<float> unfinished;
  unfinished.add("x", {4});
  EXPECT_THROW(AdamW<float>(OptimConfig{}, unfinished), Error);
}

// ---- schedule ---------------------------------------------------------------------------------

TEST(Schedule, WarmupThenDecay) {
  OptimConfig o;
  o.lr = 2.0;
  o.warmup_steps = 10;
  o.min_lr_ratio = 0.1;
  const int64_t N = 110;  // decay span N - 1 - W = 99 steps
  for (LrSchedule kind : {LrSchedule::cosine, LrSchedule::linear, LrSchedule::constant}) {
    o.schedule = kind;
    EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 0), 0.2);   // lr * 1/10
    EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 4), 1.0);   // lr * 5/10
    EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 9), 2.0);   // last warm-up step reaches lr
    EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 10), 2.0);  // decay starts from lr
  }
  o.schedule = LrSchedule::cosine;
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 10 + 33), 2.0 * (0.1 + 0.9 * 0.75));  // p = 1/3: (1+cos(pi/3))/2
  EXPECT_NEAR(scheduled_lr(o, N, 10 + 49), 2.0 * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 49 / 99))), 1e-15);
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, N - 1), 0.2);  // min_lr_ratio * lr at the last step
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, N + 50), 0.2);
  o.schedule = LrSchedule::linear;
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 10 + 33), 2.0 * (0.1 + 0.9 * (2.0 / 3.0)));
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 10 + 66), 2.0 * (0.1 + 0.9 * (1.0 / 3.0)));
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, N - 1), 0.2);
  o.schedule = LrSchedule::constant;
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, 60), 2.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(o, N, N - 1), 2.0);
}

TEST(Schedule, EdgeCases) {
  OptimConfig o;
  o.lr = 1.0;
  o.schedule = LrSchedule::linear;
  o.min_lr_ratio = 0.0;
  o.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 5, 0), 1.0);   // no warm-up: full lr at step 0
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 5, 2), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 5, 4), 0.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 1, 0), 0.0);   // a single step is also the last
  o.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 4, 3), 1.0);   // warm-up spans all steps
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 5, 4), 0.0);   // warm-up = N-1: the last step is at min
  // The Liu et al. flip-flop protocol: 50 warm-up steps then linear decay to 0 over 10k steps.
  o.lr = 3e-4;
  o.warmup_steps = 50;
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 10000, 0), 3e-4 / 50);
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 10000, 49), 3e-4);
  EXPECT_NEAR(scheduled_lr(o, 10000, 5024), 3e-4 * (1 - 4974.0 / 9949.0), 1e-18);  // span 10000-1-50
  EXPECT_DOUBLE_EQ(scheduled_lr(o, 10000, 9999), 0.0);
}

// ---- clipping ---------------------------------------------------------------------------------

TEST(Clip, GlobalNormLikeTorch) {
  ParamStore<double> s;
  s.add("a", {2});
  s.add("b", {1, 1});
  s.finalize();
  auto set = [&](double a0, double a1, double b0) {
    s.grad("a")[0] = a0, s.grad("a")[1] = a1, s.grad("b")[0] = b0;
  };
  set(3, 0, 4);
  EXPECT_DOUBLE_EQ(grad_norm(s), 5.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(s, 1.0), 5.0);  // returns the pre-clip norm
  const double c = 1.0 / (5.0 + 1e-6);
  EXPECT_DOUBLE_EQ(s.grad("a")[0], 3 * c);
  EXPECT_DOUBLE_EQ(s.grad("b")[0], 4 * c);
  EXPECT_NEAR(grad_norm(s), 1.0, 1e-6);

  set(3, 0, 4);
  EXPECT_DOUBLE_EQ(clip_grad_norm(s, 10.0), 5.0);  // under the limit: untouched
  EXPECT_EQ(s.grad("a")[0], 3.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(s, 0.0), 5.0);   // 0 = off, still reports the norm
  EXPECT_EQ(s.grad("b")[0], 4.0);

  set(std::nan(""), 1, 1);
  EXPECT_TRUE(std::isnan(clip_grad_norm(s, 1.0)));  // non-finite: reported, grads untouched
  EXPECT_EQ(s.grad("a")[1], 1.0);
  set(INFINITY, 1, 1);
  EXPECT_TRUE(std::isinf(clip_grad_norm(s, 1.0)));
  EXPECT_EQ(s.grad("b")[0], 1.0);
}

TEST(Clip, FloatStore) {
  ParamStore<float> s;
  s.add("w", {10, 10});
  s.finalize();
  for (int i = 0; i < 100; ++i) s.grads()[i] = 0.5f;  // norm 5
  EXPECT_NEAR(clip_grad_norm(s, 2.5), 5.0, 1e-6);
  EXPECT_NEAR(grad_norm(s), 2.5, 1e-5);
}

}  // namespace
}  // namespace sb
