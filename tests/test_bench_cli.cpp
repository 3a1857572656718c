// test_bench_cli.cpp: `statebench bench train`'s presets and options: every preset parses, builds
// its model and memory estimate, and matches the experiment config it names; --list-presets --json
// carries the FLOP counts of model/flops.hpp; bad --presets / --attention / --profile values give one
// line and exit 2; a CPU run writes ms/step, tokens/s and a null MFU (no known CPU peak).
#include <nlohmann/json.hpp>

#include "cli/bench_presets.hpp"
#include "cli_run.hpp"
#include "model/flops.hpp"
#include "model/transformer.hpp"
#include "train/config.hpp"
#include "train/memory_estimate.hpp"

namespace sb::test {
namespace {

using nlohmann::json;

TEST(BenchPresets, EveryPresetBuildsItsModelAndMemoryEstimate) {
  ASSERT_GE(cli::bench_presets().size(), 6u);
  for (const cli::BenchPreset& p : cli::bench_presets()) {
    SCOPED_TRACE(p.name);
    for (const char* att : {"path", "rope"}) {
      const TrainConfig cfg = parse_config(p.yaml, {std::string("model.attention=") + att}, p.name);
      const auto task = registry().create(cfg.task.name, cfg.task.params);
      const int64_t T = task->seq_len(), V = task->vocab_size();
      const Transformer<float> model(resolve_max_len(cfg.model, T), V);
      EXPECT_EQ(model.params().num_params(), count_params(cfg.model, V));
      const MemoryEstimate mem = estimate_memory(cfg, V, T, {});
      EXPECT_EQ(mem.params, count_params(cfg.model, V));
      EXPECT_GT(mem.total, 0.0);
      EXPECT_GT(train_flops_per_token(cfg.model, T, V).total(), 6.0 * static_cast<double>(mem.params) / 2);
    }
  }
}

// Each study preset is its experiment's model and batch (the config file with the study's settings).
TEST(BenchPresets, MatchTheirExperimentConfigs) {
  struct Source {
    const char* preset;
    const char* file;
    std::vector<std::string> sets;
  };
  const Source sources[] = {
      {"flipflop_ref", "experiments/configs/flipflop_ref.yaml", {}},
      {"a5_l32", "experiments/configs/word_problem_short.yaml",
       {"task.params.group=A5", "task.params.length=32", "model.n_layers=4"}},
      {"mqrar", "experiments/configs/mqrar.yaml", {"task.params.layout=fixed", "task.params.n_back=4"}},
      {"mqar", "experiments/configs/mqar.yaml",
       {"task.params.length=512", "task.params.num_kv_pairs=64", "model.d_model=512"}},
  };
  for (const Source& s : sources) {
    SCOPED_TRACE(s.preset);
    const TrainConfig want = load_config(std::string(SB_SOURCE_DIR) + "/" + s.file, s.sets);
    const TrainConfig got = parse_config(cli::find_bench_preset(s.preset).yaml, {}, s.preset);
    EXPECT_EQ(got.model, want.model);
    EXPECT_EQ(got.train.batch_size, want.train.batch_size);
    EXPECT_EQ(got.task.name, want.task.name);
    for (const auto& [key, value] : got.task.params) EXPECT_EQ(want.task.params.at(key), value) << key;
    const auto a = registry().create(got.task.name, got.task.params);
    const auto b = registry().create(want.task.name, want.task.params);
    EXPECT_EQ(a->seq_len(), b->seq_len());
    EXPECT_EQ(a->vocab_size(), b->vocab_size());
  }
  const TrainConfig merrill = parse_config(cli::find_bench_preset("merrill_a5").yaml, {}, "merrill_a5");
  EXPECT_EQ(merrill.model.d_model, 512);
  EXPECT_EQ(merrill.model.n_heads, 8);
  EXPECT_EQ(merrill.model.mlp, MlpKind::gelu);
  EXPECT_EQ(merrill.model.mlp_hidden(), 2048);
  EXPECT_EQ(merrill.train.batch_size, 512);
  EXPECT_EQ(merrill.task.params.at("length"), "21");
}

TEST(BenchPresets, ListPresetsJsonCarriesTheFlopCount) {
  const auto dir = fresh_dir("bench_list");
  const std::string path = (dir / "presets.json").string();
  const CliResult r = run_cli({"bench", "train", "--list-presets", "--json", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(read_file(path));
  ASSERT_EQ(j["presets"].size(), cli::bench_presets().size());
  for (const json& p : j["presets"]) {
    const std::string name = p["name"];
    SCOPED_TRACE(name);
    const TrainConfig cfg = parse_config(cli::find_bench_preset(name).yaml, {"model.attention=rope"}, name);
    const double lf = p["labelled_fraction"];
    EXPECT_GT(lf, 0.0);
    EXPECT_LE(lf, 1.0);
    const int64_t T = p["T"], V = p["vocab"];
    EXPECT_DOUBLE_EQ(p["flops_per_token"]["rope"].get<double>(), train_flops_per_token(cfg.model, T, V, lf).total());
    EXPECT_EQ(p["params"]["rope"].get<int64_t>(), count_params(cfg.model, V));
    EXPECT_EQ(p["mlp_hidden"].get<int64_t>(), cfg.model.mlp_hidden());
  }
  EXPECT_FALSE(j["peaks_tflops"].empty());
  EXPECT_EQ(j["peaks_tflops"][0]["match"], "H100 PCIe");
  const CliResult table = run_cli({"bench", "train", "--list-presets", "--presets", "a5_l32,merrill_a5"});
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_NE(table.out.find("merrill_a5"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("mqrar"), std::string::npos) << table.out;
}

TEST(BenchTrainCli, BadValuesGiveOneLineAndExit2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench", "train", "--presets", "flipflop_ref,nosuch"}, "--presets: unknown preset 'nosuch'"},
      {{"bench", "train", "--attention", "path,softmax"}, "--attention: unknown attention kind 'softmax'"},
      {{"bench", "train", "--attention", ""}, "--attention"},
      {{"bench", "train", "--presets", "flipflop_ref", "--profile"}, "--profile: a per-op breakdown needs --device cuda"},
      {{"bench", "train", "--seconds", "0"}, "--seconds 0"},
      {{"bench", "train", "--profile-steps", "0"}, "--profile-steps 0"},
      {{"bench", "train", "--device", "cuda:x"}, "--device 'cuda:x'"},
      {{"bench", "train", "--device", "gpu"}, "--device 'gpu'"},
      {{"bench", "train", "--precision", "bf17"}, "train.precision: expected one of fp32, tf32, bf16, got 'bf17'"},
      {{"bench", "train", "--presets", "flipflop_ref", "--precision", "bf16"}, "train.precision: bf16 needs train.device: cuda"},
#ifndef STATEBENCH_HAVE_CUDA  // with CUDA, a machine with a device would run these
      {{"bench", "train", "--device", "cuda", "--presets", "a5_l32"}, "--device cuda: this statebench was built without CUDA"},
      {{"bench", "train", "--device", "cuda", "--profile"}, "--device cuda: this statebench was built without CUDA"},
#endif
  };
  for (const auto& [args, want] : cases) {
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.rc, 2) << show(args) << "\n" << r.out << r.err;
    EXPECT_EQ(r.err.rfind("statebench: error: ", 0), 0u) << show(args) << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << show(args) << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << show(args) << "\n" << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
}

TEST(BenchTrainCli, CpuRunReportsEachAttentionKind) {
  const auto dir = fresh_dir("bench_train_cpu");
  const std::string path = (dir / "bench.json").string();
  const CliResult r = run_cli({"bench", "train", "--presets", "flipflop_ref", "--attention", "rope,nope", "--seconds",
                               "0.01", "--threads", "1", "--json", path, "--set", "train.batch_size=2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("MFU"), std::string::npos) << r.out;
  const json j = json::parse(read_file(path));
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["attention"], "rope");
  EXPECT_EQ(j["results"][1]["attention"], "nope");
  for (const json& row : j["results"]) {
    EXPECT_EQ(row["B"], 2);
    EXPECT_EQ(row["T"], 512);
    EXPECT_GT(row["tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(row["flops_per_token"].get<double>(), 0.0);
    EXPECT_TRUE(row["mfu"].is_null());  // no peak for a CPU
    EXPECT_EQ(row["precision"], "fp32");
  }
}

}  // namespace
}  // namespace sb::test
