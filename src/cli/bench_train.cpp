// bench_train.cpp: `statebench bench train [--device cpu] [--threads N] [--seconds S] [--json F]
// [--presets a,b] [--set KEY=VALUE ...]`: training throughput (tokens/s of full steps: forward, backward, clipping, AdamW)
// of reference models: by default the two of tools/torch_train_bench.py's presets, for a
// side-by-side; `mqrar` (the MQRAR study's model) on request.
#include <chrono>
#include <cmath>
#include <thread>

#include "core/build_info.hpp"
#include "cli/cli.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "train/engine.hpp"
#include "train/trainer.hpp"

namespace sb::cli {

namespace {

struct Preset {
  const char* name;
  const char* yaml;  // a train config
};

// tools/torch_train_bench.py --preset flipflop_ref / wordproblem_128 build the same models.
const Preset kPresets[] = {
    {"flipflop_ref", R"(task: {name: flipflop, params: {length: 512}}
model: {d_model: 64, n_layers: 1, n_heads: 2, attention: path, mlp: swiglu, mlp_ratio: 4}
train: {batch_size: 16}
)"},
    {"wordproblem_128", R"(task: {name: word_problem, params: {group: S5, length: 128}}
model: {d_model: 128, n_layers: 2, n_heads: 4, attention: path, mlp: swiglu, mlp_ratio: 4}
train: {batch_size: 32}
)"},
    // The model of experiments/mqrar.yaml (the slowest study's cells; not run unless named).
    {"mqrar", R"(task: {name: mqrar, params: {num_kv_pairs: 32, length: 768, n_back: 2}}
model: {d_model: 256, n_layers: 2, n_heads: 2, attention: path, mlp: swiglu}
train: {batch_size: 64}
)"},
};
const char* const kDefaultPresets[] = {"flipflop_ref", "wordproblem_128"};

const Preset& find_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return p;
  std::string known;
  for (const Preset& p : kPresets) known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail("--presets: unknown preset '{}' (known: {})", name, known);
}

struct Result {
  std::string preset;
  int64_t B, T, params, steps;
  double seconds;
  double tokens_per_s() const { return static_cast<double>(B * T * steps) / seconds; }
};

Result measure(const Context& ctx, const Preset& p, const std::vector<std::string>& common, double seconds,
               std::string& device_name) {
  std::vector<std::string> sets = common;
  const TrainConfig cfg = parse_config(p.yaml, sets, p.name);
  const auto task = ctx.tasks.create(cfg.task.name, cfg.task.params);
  const int64_t B = cfg.train.batch_size, T = task->seq_len();
  const auto engine = make_engine(cfg, task->vocab_size(), T);
  engine->model().init_params(0);
  device_name = engine->device_name();
  std::vector<int32_t> ids(B * T), labels(B * T);
  std::vector<uint8_t> mask(B * T);
  fill_examples(*task, 0, 0, 0, B, ids.data(), labels.data(), mask.data());
  for (int i = 0; i < 2; ++i) engine->train_step(ids.data(), labels.data(), B, T, 1e-4, 1.0, true);  // warm-up
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  int64_t steps = 0;
  double elapsed = 0;
  // Steps run back to back (a device engine queues them without syncing); every 10th step reads
  // its result, which waits for the queue, so the clock measures finished work.
  while (steps < 3 || elapsed < seconds) {
    ++steps;
    engine->train_step(ids.data(), labels.data(), B, T, 1e-4, 1.0, steps % 10 == 0);
    if (steps % 10 == 0 || steps < 3) elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  engine->train_step(ids.data(), labels.data(), B, T, 1e-4, 1.0, true);  // drain the queue
  ++steps;
  elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  return {p.name, B, T, engine->model().params().num_params(), steps, elapsed};
}

void run_bench_train(Context& ctx, const std::string& device, const std::string& precision,
                     const std::string& attention, int64_t threads, double seconds, const std::string& json_path,
                     std::vector<std::string> presets, const std::vector<std::string>& sets) {
  ctx.load_plugins();
  if (!std::isfinite(seconds) || seconds <= 0) fail("--seconds {}: expected a positive duration", seconds);
  if (presets.empty()) presets.assign(std::begin(kDefaultPresets), std::end(kDefaultPresets));
  std::vector<const Preset*> chosen;
  for (const std::string& name : presets) chosen.push_back(&find_preset(name));
  std::vector<std::string> common = {"train.device=" + device};
  if (!attention.empty()) common.push_back("model.attention=" + attention);
  if (threads > 0) common.push_back("train.threads=" + std::to_string(threads));
  if (device != "cpu") common.push_back("train.precision=" + precision);
  common.insert(common.end(), sets.begin(), sets.end());
  std::unique_ptr<AtomicFile> json;
  if (!json_path.empty()) json = std::make_unique<AtomicFile>(json_path);
  fmt::print("bench train: full training steps (fwd, bwd, clip, AdamW) on {} (statebench {} {})\n", device,
             STATEBENCH_VERSION, sb::build_commit());
  std::vector<std::vector<std::string>> rows{{"preset", "attention", "B", "T", "params", "steps", "ms/step", "tokens/s"}};
  std::string out = fmt::format("{{\"commit\": \"{}\", \"date\": \"{}\", \"results\": [", sb::build_commit(), utc_now());
  std::string device_name;
  bool first = true;
  for (const Preset* p : chosen) {
    const Result r = measure(ctx, *p, common, seconds, device_name);
    const std::string att = attention.empty() ? "path" : attention;
    rows.push_back({r.preset, att, std::to_string(r.B), std::to_string(r.T), std::to_string(r.params),
                    std::to_string(r.steps), fmt::format("{:.1f}", 1e3 * r.seconds / static_cast<double>(r.steps)),
                    fmt::format("{:.0f}", r.tokens_per_s())});
    out += fmt::format("{}{{\"preset\": \"{}\", \"attention\": \"{}\", \"device\": \"{}\", \"B\": {}, \"T\": {}, "
                       "\"params\": {}, \"steps\": {}, \"seconds\": {:.6f}, \"tokens_per_s\": {:.1f}}}",
                       first ? "" : ", ", r.preset, att, device_name, r.B, r.T, r.params, r.steps, r.seconds,
                       r.tokens_per_s());
    first = false;
  }
  std::fputs(format_table(rows).c_str(), stdout);
  fmt::print("device: {}\n", device_name);
  if (json) {
    json->write(out + "]}\n");
    json->commit();
  }
}

}  // namespace

void add_bench_train(CLI::App& bench, Context& ctx) {
  struct Options {
    std::string device = "cpu", precision = "tf32", attention, json;
    std::vector<std::string> presets, sets;
    int64_t threads = 0;
    double seconds = 3.0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = bench.add_subcommand("train", "training tokens/s of reference models (flip-flop, word problem, MQRAR)");
  cmd->add_option("--device", o->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--precision", o->precision, "precision on cuda: fp32, tf32 or bf16 (bf16 activations and attention)")->capture_default_str();
  cmd->add_option("--attention", o->attention, "override the attention kind (default path)");
  cmd->add_option("--threads", o->threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seconds", o->seconds, "time per model, after 2 warm-up steps")->capture_default_str();
  cmd->add_option("--json", o->json, "also write the results to this JSON file")->type_name("FILE");
  cmd->add_option("--presets", o->presets,
                  "models to time, comma-separated: flipflop_ref, wordproblem_128 (the default two), mqrar")
      ->delimiter(',');
  cmd->add_option("--set", o->sets, "a config override KEY=VALUE for every preset, e.g. train.cuda_graphs=false")
      ->type_name("KEY=VALUE");
  cmd->callback([&ctx, o] {
    run_bench_train(ctx, o->device, o->precision, o->attention, o->threads, o->seconds, o->json, o->presets, o->sets);
  });
}

}  // namespace sb::cli
