// test_golden.cpp: parity with an independent PyTorch implementation (tools/torch_reference.py,
// float64). For each committed fixture in tests/golden/ (made by tools/make_golden.sh): logits,
// loss, every parameter gradient, the losses of five AdamW steps and the parameters after them
// must match to 1e-5 (relative, norm-wise per tensor).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/npy.hpp"
#include "model/transformer.hpp"
#include "tasks/registry.hpp"
#include "train/optimizer.hpp"

using namespace sb;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = std::string(SB_SOURCE_DIR) + "/tests/golden";

double rel_err(const double* a, const std::vector<double>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < b.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), n += b[i] * b[i];
  return std::sqrt(d) / std::max(std::sqrt(n), 1e-30);
}

std::vector<int32_t> ints(const NpyArray& a) { return std::vector<int32_t>(a.data.begin(), a.data.end()); }

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesPyTorchReference) {
  const std::string dir = kGolden + "/" + GetParam();
  const TrainConfig cfg = parse_config(read_file(dir + "/config.yaml"), {}, dir + "/config.yaml");
  TaskRegistry tasks;
  register_builtin_tasks(tasks);
  const int64_t V = tasks.create(cfg.task.name, cfg.task.params)->vocab_size();
  Transformer<double> model(cfg.model, V);
  auto& store = model.params();
  for (const auto& view : store.views()) {
    const NpyArray a = read_npy(dir + "/params/" + view.name + ".npy");
    ASSERT_EQ(a.numel(), view.numel) << view.name;
    std::copy(a.data.begin(), a.data.end(), store.param(view.name));
  }
  const NpyArray ids_a = read_npy(dir + "/input_ids.npy");
  const int64_t B = ids_a.shape.at(0), T = ids_a.shape.at(1);
  const std::vector<int32_t> ids = ints(ids_a), labels = ints(read_npy(dir + "/labels.npy"));
  TransformerRunner<double> runner(model, B, T);

  runner.forward(ids.data(), nullptr);
  const NpyArray logits = read_npy(dir + "/expected/logits.npy");
  EXPECT_LE(rel_err(runner.logits(), logits.data), 1e-5);

  const nn::LossSum loss = runner.forward(ids.data(), labels.data());
  const double mean = loss.loss_sum / static_cast<double>(loss.count);
  EXPECT_NEAR(mean, read_npy(dir + "/expected/loss.npy").data.at(0), 1e-5 * std::fabs(mean));
  store.zero_grad();
  runner.backward(1.0 / static_cast<double>(loss.count), store.grads());
  for (const auto& view : store.views()) {
    const NpyArray g = read_npy(dir + "/expected/grads/" + view.name + ".npy");
    EXPECT_LE(rel_err(store.grad(view.name), g.data), 1e-5) << view.name;
  }

  AdamW<double> opt(cfg.optim, store);
  for (int64_t step = 0; step < cfg.train.steps; ++step) {
    store.zero_grad();
    const nn::LossSum s = runner.forward(ids.data(), labels.data());
    runner.backward(1.0 / static_cast<double>(s.count), store.grads());
    const double l = s.loss_sum / static_cast<double>(s.count);
    EXPECT_NEAR(l, read_npy(fmt::format("{}/expected/losses/step{}.npy", dir, step)).data.at(0), 1e-5 * l) << step;
    if (cfg.optim.grad_clip > 0) clip_grad_norm(store, cfg.optim.grad_clip);
    opt.step(store, scheduled_lr(cfg.optim, cfg.train.steps, step));
  }
  for (const auto& view : store.views()) {
    const NpyArray p = read_npy(dir + "/expected/after_adamw/" + view.name + ".npy");
    EXPECT_LE(rel_err(store.param(view.name), p.data), 1e-5) << view.name;
  }
}

std::vector<std::string> fixtures() {
  std::vector<std::string> names;
  if (fs::is_directory(kGolden))
    for (const auto& e : fs::directory_iterator(kGolden)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(fixtures()),
                         [](const auto& info) { return info.param; });

TEST(GoldenFixtures, PathRopeAndHybridArePresent) {
  const auto names = fixtures();
  for (const char* want : {"path", "rope", "hybrid"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

}  // namespace
