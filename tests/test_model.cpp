// test_model.cpp: the whole model's gradients by finite differences in double, for every attention
// kind (and a hybrid), both norms and norm positions, both MLPs, learned positions, tied and untied
// heads; a post-norm model with learned positions and stick-breaking attention equals the same
// composition of the nn ops written out here; the labelled-row head path equals the full head;
// learned positions refuse sequences beyond model.max_len; initialisation is deterministic.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gradcheck.hpp"
#include "core/error.hpp"
#include "model/transformer.hpp"
#include "nn/ops_basic.hpp"
#include "nn/ops_sba.hpp"
#include "train/config.hpp"

using namespace sb;

namespace {

ModelConfig small_config(Attention kind) {
  TrainConfig tc;
  tc.model.d_model = 8;
  tc.model.n_layers = 2;
  tc.model.n_heads = 2;
  tc.model.head_dim = 4;
  tc.model.mlp_ratio = 1.5;
  tc.model.attention = kind;
  tc.model.path.rank = 3;
  tc.model.path.block = 2;
  tc.train.steps = 10;
  resolve_and_validate(tc);
  return tc.model;
}

struct Batch {
  std::vector<int32_t> ids, labels;
};

Batch random_batch(int64_t B, int64_t T, int64_t V, uint64_t seed, bool sparse_labels) {
  std::mt19937_64 gen(seed);
  Batch b;
  for (int64_t i = 0; i < B * T; ++i) {
    b.ids.push_back(static_cast<int32_t>(gen() % V));
    const bool labelled = !sparse_labels || gen() % 3 == 0;
    b.labels.push_back(labelled ? static_cast<int32_t>(gen() % V) : -100);
  }
  b.labels[0] = 1;  // at least one label
  return b;
}

// Relative error of the analytic gradient of the mean loss against central differences.
double model_grad_error(const ModelConfig& cfg, bool sparse_labels, uint64_t seed) {
  const int64_t V = 7, B = 2, T = 5;
  Transformer<double> model(cfg, V);
  model.init_params(seed);
  // Larger weights than the default init so every path carries signal.
  double* p = model.params().params();
  std::mt19937_64 gen(seed + 1);
  std::normal_distribution<double> noise(0.0, 0.3);
  for (const auto& view : model.params().views())
    for (int64_t i = 0; i < view.numel; ++i) p[view.offset + i] += noise(gen);
  const Batch batch = random_batch(B, T, V, seed + 2, sparse_labels);
  TransformerRunner<double> runner(model, B, T);
  auto loss = [&]() {
    const nn::LossSum s = runner.forward(batch.ids.data(), batch.labels.data());
    return s.loss_sum / static_cast<double>(s.count);
  };
  const nn::LossSum s = runner.forward(batch.ids.data(), batch.labels.data());
  model.params().zero_grad();
  runner.backward(1.0 / static_cast<double>(s.count), model.params().grads());
  std::vector<double> analytic(model.params().grads(), model.params().grads() + model.params().size());
  return test::grad_error(loss, p, analytic.data(), model.params().size(), 1e-6);
}

}  // namespace

class ModelGrad : public ::testing::TestWithParam<Attention> {};

TEST_P(ModelGrad, WholeTwoLayerModelMatchesFiniteDifferences) {
  const ModelConfig cfg = small_config(GetParam());
  EXPECT_LE(model_grad_error(cfg, false, 11), 1e-6) << to_string(GetParam());
  EXPECT_LE(model_grad_error(cfg, true, 12), 1e-6) << to_string(GetParam()) << " (sparse labels)";
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ModelGrad,
                         ::testing::Values(Attention::path, Attention::rope, Attention::nope, Attention::fox,
                                           Attention::path_fox, Attention::sba),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(ModelGrad, HybridLayerNormGeluTiedAndBetaClamp) {
  ModelConfig cfg = small_config(Attention::path);
  cfg.layers = {Attention::rope, Attention::path_fox};
  cfg.norm = NormKind::layernorm;
  cfg.mlp = MlpKind::gelu;
  cfg.tied_embeddings = true;
  cfg.path.conv_bias = true;
  cfg.path.beta_clamp = 1.9;
  EXPECT_LE(model_grad_error(cfg, false, 21), 1e-6);
  cfg.mlp = MlpKind::none;
  EXPECT_LE(model_grad_error(cfg, true, 22), 1e-6);
}

// Post-norm blocks (no final norm), learned positions with a table longer than T, stick-breaking
// without its remainder; then a hybrid with LayerNorm and attention-only post-norm blocks.
TEST(ModelGrad, PostNormLearnedPositionsAndSba) {
  ModelConfig cfg = small_config(Attention::sba);
  cfg.norm_position = NormPosition::post;
  cfg.position = PositionKind::learned;
  cfg.max_len = 6;
  cfg.sba.remainder = SbaRemainder::none;
  EXPECT_LE(model_grad_error(cfg, false, 31), 1e-6);
  cfg.sba.remainder = SbaRemainder::current;
  cfg.layers = {Attention::sba, Attention::path_fox};
  cfg.norm = NormKind::layernorm;
  cfg.mlp = MlpKind::none;
  EXPECT_LE(model_grad_error(cfg, true, 32), 1e-6);
  cfg.norm_position = NormPosition::pre;  // learned positions with pre-norm blocks
  EXPECT_LE(model_grad_error(cfg, false, 33), 1e-6);
}

// model.path.scale_gate: the PaTH-FoX gate term times 1/sqrt(Dh); gradients through the scaling,
// and it changes path_fox layers only (a fox layer's output is the same with and without it).
TEST(ModelGrad, PathFoxGateScaling) {
  ModelConfig cfg = small_config(Attention::path_fox);
  cfg.path.scale_gate = true;
  EXPECT_LE(model_grad_error(cfg, false, 34), 1e-6);
  EXPECT_TRUE(cfg.scales_gate(Attention::path_fox));
  EXPECT_FALSE(cfg.scales_gate(Attention::fox));
  auto logits = [](const ModelConfig& c) {
    Transformer<double> model(c, 7);
    model.init_params(9);
    for (int64_t i = 0; i < model.params().size(); ++i) model.params().params()[i] += 0.3 * std::sin(1.7 * i);
    const Batch batch = random_batch(2, 5, 7, 10, false);
    TransformerRunner<double> runner(model, 2, 5);
    runner.forward(batch.ids.data(), nullptr);
    return std::vector<double>(runner.logits(), runner.logits() + 2 * 5 * 7);
  };
  ModelConfig plain = cfg;
  plain.path.scale_gate = false;
  EXPECT_NE(logits(cfg), logits(plain));
  cfg.attention = plain.attention = Attention::fox;
  EXPECT_EQ(logits(cfg), logits(plain));
}

// One post-norm layer without MLP: logits = rmsnorm(x + sba(x Wq, x Wk, x Wv) Wo) Wout with
// x = embed[ids] + pos[t] (PyTorch's TransformerEncoderLayer with norm_first = False, no final norm).
TEST(Model, PostNormWithPositionsEqualsTheComposedOps) {
  TrainConfig tc;
  tc.model.d_model = 8, tc.model.n_heads = 2, tc.model.head_dim = 4, tc.model.mlp = MlpKind::none;
  tc.model.attention = Attention::sba, tc.model.norm_position = NormPosition::post;
  tc.model.position = PositionKind::learned, tc.model.max_len = 9;
  resolve_and_validate(tc);
  const ModelConfig& cfg = tc.model;
  const int64_t V = 7, B = 2, T = 6, N = B * T, D = 8, HD = 8;
  Transformer<double> model(cfg, V);
  model.init_params(41);
  EXPECT_FALSE(model.params().contains("norm_f.weight"));
  EXPECT_FALSE(model.params().contains("layers.0.norm2.weight"));
  ASSERT_EQ(model.params().view("pos.weight").shape, (std::vector<int64_t>{9, D}));
  double* p = model.params().params();
  std::mt19937_64 gen(42);
  std::normal_distribution<double> noise(0.0, 0.5);
  for (int64_t i = 0; i < model.params().size(); ++i) p[i] += noise(gen);
  const Batch batch = random_batch(B, T, V, 43, false);
  TransformerRunner<double> runner(model, B, T);
  runner.forward(batch.ids.data(), nullptr);

  auto P = [&](const char* name) { return model.params().param(name); };
  std::vector<double> x(N * D), q(N * HD), k(N * HD), v(N * HD), att(N * HD), y(N * D), r(N * D), rstd(N);
  std::vector<double> logits(N * V);
  nn::embedding_forward(x.data(), batch.ids.data(), P("embed.weight"), N, V, D);
  nn::position_forward(x.data(), P("pos.weight"), B, T, D);
  nn::linear_forward<double>(q.data(), x.data(), P("layers.0.attn.wq"), nullptr, N, D, HD);
  nn::linear_forward<double>(k.data(), x.data(), P("layers.0.attn.wk"), nullptr, N, D, HD);
  nn::linear_forward<double>(v.data(), x.data(), P("layers.0.attn.wv"), nullptr, N, D, HD);
  nn::sba_attention_forward(att.data(), q.data(), k.data(), v.data(), B, T, 2, 4, 0.5, true);
  nn::linear_forward<double>(y.data(), att.data(), P("layers.0.attn.wo"), nullptr, N, HD, D);
  nn::residual_forward(y.data(), y.data(), x.data(), N * D);
  nn::rmsnorm_forward(r.data(), rstd.data(), y.data(), P("layers.0.norm1.weight"), N, D);
  nn::linear_forward<double>(logits.data(), r.data(), P("head.weight"), nullptr, N, D, V);
  for (int64_t i = 0; i < N * V; ++i) EXPECT_NEAR(runner.logits()[i], logits[i], 1e-12) << i;
}

TEST(Model, LearnedPositionsNeedALengthAndRefuseLongerSequences) {
  ModelConfig cfg = small_config(Attention::rope);
  cfg.position = PositionKind::learned;
  auto error_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  EXPECT_NE(error_of([&] { Transformer<double> m(cfg, 7); }).find("model.max_len"), std::string::npos);
  const ModelConfig resolved = resolve_max_len(cfg, 5);
  EXPECT_EQ(resolved.max_len, 5);
  EXPECT_EQ(resolve_max_len(small_config(Attention::rope), 5).max_len, 0);  // no learned positions: unchanged
  cfg.max_len = 8;
  EXPECT_EQ(resolve_max_len(cfg, 5).max_len, 8);  // an explicit length stays
  Transformer<double> model(resolved, 7);
  TransformerRunner<double> ok(model, 2, 5);
  EXPECT_EQ(error_of([&] { TransformerRunner<double> r(model, 2, 6); }),
            "model.max_len: sequences of 6 tokens exceed the 5 learned positions");
}

TEST(Model, LabelledRowsHeadEqualsFullHead) {
  const ModelConfig cfg = small_config(Attention::path_fox);
  const int64_t V = 7, B = 2, T = 5;
  Transformer<double> model(cfg, V);
  model.init_params(3);
  const Batch batch = random_batch(B, T, V, 4, true);
  TransformerRunner<double> runner(model, B, T);
  runner.forward(batch.ids.data(), nullptr);
  ASSERT_EQ(runner.logit_rows().size(), static_cast<size_t>(B * T));
  const std::vector<double> full(runner.logits(), runner.logits() + B * T * V);
  std::vector<int32_t> pred_full(B * T);
  runner.argmax(pred_full.data());
  runner.forward(batch.ids.data(), batch.labels.data());
  std::vector<int32_t> pred(B * T);
  runner.argmax(pred.data());
  const auto& rows = runner.logit_rows();
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(batch.labels[rows[r]] != -100, true);
    for (int64_t v = 0; v < V; ++v) EXPECT_DOUBLE_EQ(runner.logits()[r * V + v], full[rows[r] * V + v]);
    EXPECT_EQ(pred[rows[r]], pred_full[rows[r]]);
  }
  for (int64_t n = 0; n < B * T; ++n)
    if (batch.labels[n] == -100) EXPECT_EQ(pred[n], -1);
}

// model.init.gate_bias sets every forget-gate bias (fox and path_fox layers) and nothing else.
TEST(Model, GateBiasInit) {
  ModelConfig cfg = small_config(Attention::fox);
  cfg.layers = {Attention::fox, Attention::path_fox};
  Transformer<double> zero(cfg, 7);
  zero.init_params(5);
  cfg.init.gate_bias = 3.0;
  Transformer<double> three(cfg, 7);
  three.init_params(5);
  int gates = 0;
  for (int i = 0; i < static_cast<int>(three.params().views().size()); ++i) {
    const ParamView& v = three.params().view(i);
    const bool gate = v.name.size() > 7 && v.name.compare(v.name.size() - 7, 7, "attn.bf") == 0;
    gates += gate;
    for (int64_t k = 0; k < v.numel; ++k) {
      EXPECT_EQ(three.params().params()[v.offset + k], gate ? 3.0 : zero.params().params()[v.offset + k]) << v.name;
      if (gate) EXPECT_EQ(zero.params().params()[v.offset + k], 0.0);
    }
  }
  EXPECT_EQ(gates, 2);
}

TEST(Model, CausalAndDeterministicInit) {
  const ModelConfig cfg = small_config(Attention::path);
  Transformer<float> a(cfg, 7), b(cfg, 7), c(cfg, 7);
  a.init_params(5), b.init_params(5), c.init_params(6);
  ASSERT_EQ(a.params().size(), b.params().size());
  EXPECT_TRUE(std::equal(a.params().params(), a.params().params() + a.params().size(), b.params().params()));
  EXPECT_FALSE(std::equal(a.params().params(), a.params().params() + a.params().size(), c.params().params()));
  // Changing the last token leaves the logits of every earlier position unchanged.
  const int64_t T = 6;
  std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6}, ids2 = ids;
  ids2[T - 1] = 0;
  TransformerRunner<float> r(a, 1, T);
  r.forward(ids.data(), nullptr);
  const std::vector<float> l1(r.logits(), r.logits() + T * 7);
  r.forward(ids2.data(), nullptr);
  for (int64_t i = 0; i < (T - 1) * 7; ++i) EXPECT_EQ(l1[i], r.logits()[i]) << i;
  bool last_changed = false;
  for (int64_t i = (T - 1) * 7; i < T * 7; ++i) last_changed |= l1[i] != r.logits()[i];
  EXPECT_TRUE(last_changed);
}
