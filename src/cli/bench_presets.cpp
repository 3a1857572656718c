// bench_presets.cpp: the table of `bench train` presets (each study's model at its training batch)
// and their validation. tests/test_bench_cli.cpp checks each against the experiment config it names.
#include "cli/bench_presets.hpp"

#include "core/error.hpp"
#include "model/config.hpp"

namespace sb::cli {

const std::vector<BenchPreset>& bench_presets() {
  static const std::vector<BenchPreset> presets = {
      {"flipflop_ref", "experiments/configs/flipflop_ref.yaml (fflm*.yaml)",
       R"(task: {name: flipflop, params: {length: 512, p_ignore: 0.8, loss: reads}}
model: {d_model: 64, n_layers: 1, n_heads: 2, attention: path, mlp: swiglu, mlp_ratio: 4, path: {rank: 32, block: 32}}
train: {batch_size: 16}
)"},
      {"wordproblem_128", "word_problem S5 at length 128 (tools/torch_train_bench.py's shape)",
       R"(task: {name: word_problem, params: {group: S5, length: 128}}
model: {d_model: 128, n_layers: 2, n_heads: 4, attention: path, mlp: swiglu, mlp_ratio: 4}
train: {batch_size: 32}
)"},
      {"a5_l32", "experiments/a5_l32_long.yaml (configs/word_problem_short.yaml) at its deepest, 4 layers",
       R"(task: {name: word_problem, params: {group: A5, length: 32}}
model: {d_model: 128, n_layers: 4, n_heads: 4, attention: path, mlp: swiglu}
train: {batch_size: 1024}
)"},
      // Merrill et al. (The Illusion of State) train a d_model 512 transformer on A5 word problems;
      // 4 layers is our choice of depth (the depth a5_l32 needs), stated in docs/benchmarks.md.
      {"merrill_a5", "Merrill et al.'s A5 transformer: d_model 512, 8 heads, GELU MLP 2048, 4 layers, L = 21",
       R"(task: {name: word_problem, params: {group: A5, length: 21}}
model: {d_model: 512, n_layers: 4, n_heads: 8, attention: path, mlp: gelu, mlp_ratio: 4}
train: {batch_size: 512}
)"},
      {"mqrar", "experiments/mqrar.yaml (configs/mqrar.yaml): length 768, 32 pairs, N = 4, fixed layout",
       R"(task: {name: mqrar, params: {num_kv_pairs: 32, length: 768, n_back: 4, layout: fixed}}
model: {d_model: 256, n_layers: 2, n_heads: 2, attention: path, mlp: swiglu}
train: {batch_size: 64}
)"},
      {"mqar", "experiments/mqar.yaml's largest cell (configs/mqar.yaml): length 512, 64 pairs, d_model 512",
       R"(task: {name: mqar, params: {vocab: 8192, length: 512, num_kv_pairs: 64}}
model: {d_model: 512, n_layers: 2, n_heads: 4, attention: path, mlp: swiglu}
train: {batch_size: 64}
)"},
  };
  return presets;
}

const BenchPreset& find_bench_preset(const std::string& name) {
  for (const BenchPreset& p : bench_presets())
    if (name == p.name) return p;
  std::string known;
  for (const BenchPreset& p : bench_presets()) known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail("--presets: unknown preset '{}' (known: {})", name, known);
}

std::vector<std::string> default_bench_presets(bool cuda) {
  if (!cuda) return {"flipflop_ref", "wordproblem_128"};
  std::vector<std::string> all;
  for (const BenchPreset& p : bench_presets()) all.emplace_back(p.name);
  return all;
}

void check_attention_kinds(const std::vector<std::string>& kinds) {
  const Attention all[] = {Attention::path, Attention::rope, Attention::nope,
                           Attention::fox,  Attention::path_fox, Attention::sba};
  for (const std::string& k : kinds) {
    bool known = false;
    for (Attention a : all) known |= k == to_string(a);
    if (!known) fail("--attention: unknown attention kind '{}' (path, rope, nope, fox, path_fox, sba)", k);
  }
  if (kinds.empty()) fail("--attention: expected at least one attention kind");
}

}  // namespace sb::cli
