// golden_export.cpp: writes the golden-parity fixtures' inputs (statebench_golden_export DIR):
// for each tiny model (PaTH, RoPE, and a hybrid of the other kinds) its config (YAML for statebench,
// JSON for tools/torch_reference.py), initial parameters and one batch of a real task. The PyTorch
// script then writes DIR/<name>/expected/, and tests/test_golden.cpp checks statebench against it.
#include <cstdio>
#include <filesystem>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/npy.hpp"
#include "model/transformer.hpp"
#include "nn/path_wpath.hpp"
#include "tasks/registry.hpp"
#include "train/config.hpp"

using namespace sb;

namespace {

struct Fixture {
  const char* name;
  const char* yaml;
};

const Fixture kFixtures[] = {
    {"path", R"(task: {name: word_problem, params: {group: S3, length: 8, bos: "true"}}
model: {d_model: 16, n_layers: 2, n_heads: 2, head_dim: 8, mlp: swiglu, mlp_ratio: 2, layers: [path, path_fox],
        path: {rank: 4, block: 4}, init: {std: 0.2}}
optim: {lr: 0.01, warmup_steps: 2, schedule: cosine, min_lr_ratio: 0.1, grad_clip: 0.5, weight_decay: 0.1}
train: {steps: 5, batch_size: 3, seed: 7}
)"},
    {"rope", R"(task: {name: flipflop, params: {length: 10}}
model: {d_model: 16, n_layers: 2, n_heads: 2, head_dim: 8, mlp: swiglu, mlp_ratio: 2, attention: rope, init: {std: 0.2}}
optim: {lr: 0.01, warmup_steps: 2, schedule: linear, grad_clip: 1.0, weight_decay: 0.1}
train: {steps: 5, batch_size: 3, seed: 8}
)"},
    {"hybrid", R"(task: {name: mqar, params: {vocab: 32, length: 16, num_kv_pairs: 3}}
model: {d_model: 12, n_layers: 3, n_heads: 3, head_dim: 4, mlp: gelu, mlp_ratio: 1.5, layers: [nope, fox, path],
        norm: layernorm, tied_embeddings: true, path: {rank: 3, block: 3, conv_bias: true, beta_clamp: 1.5},
        init: {std: 0.3}}
optim: {lr: 0.02, warmup_steps: 0, schedule: constant, grad_clip: 0.0, weight_decay: 0.05}
train: {steps: 5, batch_size: 2, seed: 9}
)"},
};

std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + ("\"" + items[i] + "\"");
  return out + "]";
}

void export_fixture(const Fixture& f, const std::string& root, const TaskRegistry& tasks) {
  const std::string dir = root + "/" + f.name;
  std::filesystem::create_directories(dir + "/params");
  const TrainConfig cfg = parse_config(f.yaml, {}, f.name);
  write_file_atomic(dir + "/config.yaml", to_yaml(cfg));
  const auto task = tasks.create(cfg.task.name, cfg.task.params);
  Transformer<double> model(resolve_max_len(cfg.model, task->seq_len()), task->vocab_size());
  model.init_params(cfg.train.seed);
  std::vector<std::string> decay, layers;
  for (const auto& view : model.params().views()) {
    const double* p = model.params().param(view.name);
    write_npy(dir + "/params/" + view.name + ".npy", view.shape, std::vector<double>(p, p + view.numel));
    if (view.decay) decay.push_back(view.name);
  }
  for (int64_t l = 0; l < cfg.model.n_layers; ++l) layers.push_back(to_string(cfg.model.layer_attention(l)));
  const int64_t B = cfg.train.batch_size, T = task->seq_len();
  std::vector<int32_t> ids(B * T), labels(B * T);
  std::vector<uint8_t> mask(B * T);
  fill_examples(*task, 0, cfg.train.seed, 0, B, ids.data(), labels.data(), mask.data());
  write_npy(dir + "/input_ids.npy", {B, T}, std::vector<double>(ids.begin(), ids.end()), "<i4");
  write_npy(dir + "/labels.npy", {B, T}, std::vector<double>(labels.begin(), labels.end()), "<i4");
  const auto& m = cfg.model;
  const auto& o = cfg.optim;
  write_file_atomic(dir + "/config.json",
                    fmt::format(R"({{"n_heads": {}, "head_dim": {}, "norm": "{}", "norm_eps": {}, "mlp": "{}",
 "layers": {}, "tied_embeddings": {}, "rope_theta": {}, "l2norm_eps": {}, "beta_clamp": {},
 "norm_position": "{}", "position": "{}", "sba_remainder": "{}",
 "optim": {{"lr": {}, "betas": [{}, {}], "eps": {}, "weight_decay": {}, "warmup_steps": {}, "steps": {},
  "schedule": "{}", "min_lr_ratio": {}, "grad_clip": {}}},
 "decay": {}}}
)",
                                m.n_heads, m.head_dim, to_string(m.norm), m.norm == NormKind::rmsnorm ? 1e-6 : 1e-5,
                                to_string(m.mlp), json_list(layers), m.tied_embeddings ? "true" : "false",
                                m.rope_theta, nn::kPathWNormEps, m.path.beta_clamp, to_string(m.norm_position),
                                to_string(m.position), to_string(m.sba.remainder), o.lr, o.betas[0], o.betas[1], o.eps,
                                o.weight_decay, o.warmup_steps, cfg.train.steps, to_string(o.schedule), o.min_lr_ratio,
                                o.grad_clip, json_list(decay)));
  std::printf("wrote %s (%ld parameters, batch %ldx%ld)\n", dir.c_str(), static_cast<long>(model.params().num_params()),
              static_cast<long>(B), static_cast<long>(T));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: statebench_golden_export DIR\n");
    return 2;
  }
  try {
    TaskRegistry tasks;
    register_builtin_tasks(tasks);
    for (const auto& f : kFixtures) export_fixture(f, argv[1], tasks);
  } catch (const Error& e) {
    std::fprintf(stderr, "statebench_golden_export: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
