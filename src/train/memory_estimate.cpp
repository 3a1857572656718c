// memory_estimate.cpp: the run's memory estimate and the check against available memory (see
// memory_estimate.hpp). The buffer sizes mirror src/model (transformer.cpp's parameter views,
// runner.cpp's activations) and src/train (cpu_engine.cpp's shards, checkpoint.cpp's copy);
// test_train checks the parameter count against the model's own.
#include "train/memory_estimate.hpp"

#include <algorithm>
#include <fstream>
#include <thread>

#include "core/error.hpp"
#include "nn/path_attention.hpp"
#include "train/batch_prefetch.hpp"

namespace sb {

namespace {

constexpr double kFloat = 4;  // the engines train in float

// Sum of the parameter views' sizes; `padded` rounds each up to ParamStore's 16-element alignment.
int64_t params_of(const ModelConfig& c, int64_t V, bool padded) {
  const int64_t D = c.d_model, H = c.n_heads, HD = c.n_heads * c.head_dim, F = c.mlp_hidden(), R = c.path.rank;
  int64_t n = 0;
  auto add = [&](int64_t numel) { n += padded ? (numel + 15) / 16 * 16 : numel; };
  auto norm = [&] {
    add(D);
    if (c.norm == NormKind::layernorm) add(D);
  };
  add(V * D);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const Attention kind = c.layer_attention(l);
    norm();
    for (int i = 0; i < 4; ++i) add(HD * D);
    if (uses_gate(kind)) add(H * D), add(H);
    if (uses_path(kind)) {
      add(R * D), add(HD * R), add(HD * 3);
      if (c.path.conv_bias) add(HD);
      add(H * D), add(H);
    }
    if (c.mlp != MlpKind::none) {
      norm();
      if (c.mlp == MlpKind::swiglu) add(2 * F * D), add(D * F);
      else add(F * D), add(D * F);
    }
  }
  norm();
  if (!c.tied_embeddings) add(V * D);
  return n;
}

// Floats a TransformerRunner holds for sequences of length T (runner.cpp's buffers, the head's
// logits for every row, the attention's scratch): per token, and per runner.
struct RunnerFloats {
  double per_token = 0, fixed = 0;
};

RunnerFloats runner_floats(const ModelConfig& c, int64_t V, int64_t T) {
  const double D = static_cast<double>(c.d_model), H = static_cast<double>(c.n_heads),
               HD = static_cast<double>(c.n_heads * c.head_dim), F = static_cast<double>(c.mlp_hidden()),
               R = static_cast<double>(c.path.rank), f_in = c.mlp == MlpKind::swiglu ? 2 * F : F;
  bool any_path = false, any_gate = false, any_rope = false;
  double per_token = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const Attention kind = c.layer_attention(l);
    per_token += 3 * D + 2 + 4 * HD + H;  // x_in, h1, x_mid, stats; q, k, v, att; lse
    if (uses_gate(kind)) per_token += 2 * H, any_gate = true;
    if (uses_path(kind)) per_token += R + 3 * HD + 2 * H, any_path = true;
    any_rope |= kind == Attention::rope;
    if (c.mlp != MlpKind::none) per_token += D + 2 + f_in + F;
  }
  per_token += 1 + 3 * D + 2;   // ids, x_final, hf, tmp, final stats
  per_token += 2 * D + 4 * HD;  // dx, dh, datt, dq, dk, dv
  if (any_path) per_token += 2 * HD + R + 2 * H;
  if (any_gate) per_token += 2 * H;
  if (any_rope) per_token += 2 * HD;
  if (c.mlp != MlpKind::none) per_token += f_in + F;
  per_token += 2 * static_cast<double>(V) + 2 * D + 1;  // logits, dlogits, head rows, losses
  double fixed = 2.0 * 64 * static_cast<double>(T) + static_cast<double>(T) * static_cast<double>(c.head_dim);
  if (any_path) {
    const auto form = nn::PathForm::Blockwise;
    fixed += static_cast<double>(nn::path_forward_workspace_elems(T, c.head_dim, form, c.path.block)) +
             static_cast<double>(nn::path_backward_workspace_elems(T, c.head_dim, form, c.path.block));
  }
  return {per_token, fixed};
}

// Bytes of the CPU engine's buffers for batches of B x T: one runner per shard (the shards
// partition B) and a private gradient copy for each shard past the first.
double engine_bytes(const ModelConfig& c, int64_t V, int64_t B, int64_t T, int64_t threads, double padded) {
  const double shards = static_cast<double>(std::max<int64_t>(1, std::min(threads, B)));
  const RunnerFloats r = runner_floats(c, V, T);
  return kFloat * (r.per_token * static_cast<double>(B) * static_cast<double>(T) + shards * r.fixed +
                   (shards - 1) * padded);
}

std::optional<double> read_number(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stod(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

const MemoryPart& MemoryEstimate::largest() const {
  return *std::max_element(parts.begin(), parts.end(),
                           [](const MemoryPart& a, const MemoryPart& b) { return a.bytes < b.bytes; });
}

int64_t count_params(const ModelConfig& model, int64_t vocab) { return params_of(model, vocab, false); }

MemoryEstimate estimate_memory(const TrainConfig& cfg, int64_t vocab, int64_t train_length,
                               const std::vector<EvalShape>& evals) {
  const ModelConfig& m = cfg.model;
  MemoryEstimate e;
  e.params = params_of(m, vocab, false);
  const double padded = static_cast<double>(params_of(m, vocab, true));
  // params + grads + AdamW m and v, and the checkpoint writer's in-memory copy (params, m, v).
  e.parts.push_back({fmt::format("model.d_model = {}, model.n_layers = {}", m.d_model, m.n_layers),
                     fmt::format("parameters, gradients, AdamW state and a checkpoint copy ({:.3g} parameters)",
                                 static_cast<double>(e.params)),
                     7 * kFloat * padded});
  const bool cpu = cfg.train.device == Device::cpu;
  const int64_t threads = cfg.train.threads > 0 ? cfg.train.threads
                                                : std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t B = cfg.train.batch_size, T = train_length;
  const double batch_bytes = batch_slots(!cpu) * 9.0 * static_cast<double>(B) * static_cast<double>(T);  // prefetched
  const double train_act = cpu ? engine_bytes(m, vocab, B, T, threads, padded) : 0;
  e.parts.push_back({fmt::format("train.batch_size = {}", B),
                     fmt::format("training batches of {} x {} tokens and their activations", B, T),
                     batch_bytes + train_act});
  double largest_act = train_act;
  for (const EvalShape& s : evals) {
    const double data = 9.0 * static_cast<double>(s.examples) * static_cast<double>(s.length);
    const int64_t engine_tokens = cpu ? 8192 : 32768;
    const int64_t tokens = s.length == T ? std::max(B * T, engine_tokens) : engine_tokens;
    const int64_t chunk = std::max<int64_t>(1, std::min(s.examples, tokens / std::max<int64_t>(1, s.length)));
    const double act = cpu ? engine_bytes(m, vocab, chunk, s.length, threads, padded) : 0;
    e.parts.push_back({s.config_key,
                       fmt::format("evaluation '{}': {} sequences of length {} and their activations", s.key,
                                   s.examples, s.length),
                       data + act});
    e.total += data;
    largest_act = std::max(largest_act, act);
  }
  e.total += e.parts[0].bytes + batch_bytes + largest_act;
  return e;
}

std::optional<double> available_memory() {
  std::optional<double> available;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string name; meminfo >> name;) {
    double kb = 0;
    std::string unit;
    if (!(meminfo >> kb >> unit)) break;
    if (name == "MemAvailable:") {
      available = kb * 1024;
      break;
    }
  }
  // cgroup v2, then v1: what the limit leaves.
  static const char* const kCgroup[][2] = {{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
                                           {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                            "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit, usage] : kCgroup) {
    const auto l = read_number(limit), u = read_number(usage);
    if (l && u && *l < 1e18) {
      const double left = std::max(0.0, *l - *u);
      available = available ? std::min(*available, left) : left;
    }
  }
  return available;
}

void check_memory(const MemoryEstimate& estimate, std::optional<double> available) {
  if (!available || estimate.total <= *available) return;
  const MemoryPart& p = estimate.largest();
  fail("{}: the run needs an estimated {} of memory ({}: {}), more than the {} available", p.key,
       format_bytes(estimate.total), p.what, format_bytes(p.bytes), format_bytes(*available));
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.3g} {}", bytes, kUnits[u]);
}

}  // namespace sb
