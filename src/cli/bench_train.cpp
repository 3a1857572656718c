// bench_train.cpp: `statebench bench train [--device cpu|cuda] [--presets a,b] [--attention path,rope]
// [--profile] [--list-presets] [--json F] [--set KEY=VALUE ...]`: training throughput of each study's
// model (bench_presets.hpp) under each attention kind: ms per full step (forward, backward, clipping,
// AdamW), tokens/s, model TFLOP/s and MFU (model/flops.hpp); --profile adds a per-op breakdown of
// the GPU step; --list-presets prints the presets resolved (JSON for tools/torch_train_bench.py).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/bench_presets.hpp"
#include "cli/cli.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/utc_time.hpp"
#include "io/atomic_file.hpp"
#include "model/flops.hpp"
#include "train/engine.hpp"
#include "train/memory_estimate.hpp"
#include "train/trainer.hpp"

namespace sb::cli {

namespace {

using nlohmann::json;

// One preset under one attention kind, its config resolved, with a batch of its task's examples.
struct Case {
  const BenchPreset* preset;
  std::string attention;
  TrainConfig cfg;
  std::unique_ptr<Task> task;
  int64_t B = 0, T = 0, V = 0;
  std::vector<int32_t> ids, labels;
  double labelled_fraction = 1.0;
};

Case make_case(const Context& ctx, const BenchPreset& p, const std::string& attention,
               const std::vector<std::string>& common) {
  Case c;
  c.preset = &p, c.attention = attention;
  std::vector<std::string> sets = common;
  sets.push_back("model.attention=" + attention);
  c.cfg = parse_config(p.yaml, sets, p.name);
  c.task = ctx.tasks.create(c.cfg.task.name, c.cfg.task.params);
  c.B = c.cfg.train.batch_size, c.T = c.task->seq_len(), c.V = c.task->vocab_size();
  c.ids.resize(c.B * c.T), c.labels.resize(c.B * c.T);
  std::vector<uint8_t> mask(c.B * c.T);
  fill_examples(*c.task, 0, 0, 0, c.B, c.ids.data(), c.labels.data(), mask.data());
  int64_t labelled = 0;
  for (int32_t l : c.labels) labelled += l != -100;
  c.labelled_fraction = static_cast<double>(labelled) / static_cast<double>(c.B * c.T);
  return c;
}

double flops_per_token(const Case& c) {
  return train_flops_per_token(resolve_max_len(c.cfg.model, c.T), c.T, c.V, c.labelled_fraction).total();
}

struct Timing {
  int64_t params = 0, steps = 0;
  double seconds = 0;
  std::string device_name;
  StepProfile profile;
};

Timing measure(Case& c, double seconds, int64_t profile_steps) {
  const auto engine = make_engine(c.cfg, c.V, c.T);
  engine->model().init_params(0);
  Timing t;
  t.device_name = engine->device_name();
  t.params = engine->model().params().num_params();
  const int32_t* ids = c.ids.data();
  const int32_t* labels = c.labels.data();
  const int64_t B = c.B, T = c.T;
  for (int i = 0; i < 2; ++i) engine->train_step(ids, labels, B, T, 1e-4, 1.0, true);  // warm-up
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  double elapsed = 0;
  // Steps run back to back (a device engine queues them without syncing); every 10th step reads
  // its result, which waits for the queue, so the clock measures finished work.
  while (t.steps < 3 || elapsed < seconds) {
    ++t.steps;
    engine->train_step(ids, labels, B, T, 1e-4, 1.0, t.steps % 10 == 0);
    if (t.steps % 10 == 0 || t.steps < 3) elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  engine->train_step(ids, labels, B, T, 1e-4, 1.0, true);  // drain the queue
  ++t.steps;
  t.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (profile_steps > 0) t.profile = engine->profile_train_steps(ids, labels, B, T, profile_steps);
  return t;
}

// The per-op table of one profiled case: ms per step, share of the step, regions per step.
void print_profile(const Case& c, const StepProfile& p) {
  const double steps = static_cast<double>(std::max<int64_t>(1, p.steps));
  std::vector<std::vector<std::string>> rows{{"op", "ms/step", "% of step", "calls/step"}};
  double covered = 0;
  for (const OpTime& o : p.ops) {
    covered += o.ms;
    rows.push_back({o.op, fmt::format("{:.3f}", o.ms / steps), fmt::format("{:.1f}", 100 * o.ms / p.step_ms),
                    fmt::format("{:g}", static_cast<double>(o.calls) / steps)});
  }
  const double other = std::max(0.0, p.step_ms - covered);
  rows.push_back({"(between regions)", fmt::format("{:.3f}", other / steps),
                  fmt::format("{:.1f}", 100 * other / p.step_ms), "-"});
  rows.push_back({"step", fmt::format("{:.3f}", p.step_ms / steps), "100.0", "-"});
  fmt::print("\nprofile {} / {}: {} steps, eager launches (no CUDA graphs), device time per op region\n",
             c.preset->name, c.attention, p.steps);
  std::fputs(format_table(rows, "  ").c_str(), stdout);
}

json profile_json(const StepProfile& p) {
  json ops = json::array();
  for (const OpTime& o : p.ops) ops.push_back({{"op", o.op}, {"ms", o.ms}, {"calls", o.calls}});
  return {{"steps", p.steps}, {"step_ms", p.step_ms}, {"ops", ops}};
}

// --list-presets: every preset resolved (as tools/torch_train_bench.py reads them), its FLOPs per
// token and parameters per attention kind, its host memory estimate, and the device peak table.
json presets_json(const Context& ctx, const std::vector<std::string>& names, const std::vector<std::string>& sets) {
  const char* kinds[] = {"path", "rope", "nope", "fox", "path_fox", "sba"};
  json out = {{"statebench", STATEBENCH_VERSION}, {"commit", sb::build_commit()}};
  json presets = json::array();
  for (const std::string& name : names) {
    const BenchPreset& p = find_bench_preset(name);
    Case c = make_case(ctx, p, "path", sets);
    const ModelConfig m = resolve_max_len(c.cfg.model, c.T);
    json flops = json::object(), params = json::object();
    for (const char* k : kinds) {
      const Case ck = make_case(ctx, p, k, sets);
      flops[k] = flops_per_token(ck);
      params[k] = count_params(ck.cfg.model, ck.V);
    }
    const MemoryEstimate mem = estimate_memory(c.cfg, c.V, c.T, {});
    presets.push_back({{"name", p.name}, {"study", p.study}, {"task", c.cfg.task.name}, {"vocab", c.V},
                       {"T", c.T}, {"batch", c.B}, {"labelled_fraction", c.labelled_fraction},
                       {"d_model", m.d_model}, {"n_layers", m.n_layers}, {"n_heads", m.n_heads},
                       {"head_dim", m.head_dim}, {"mlp", to_string(m.mlp)}, {"mlp_ratio", m.mlp_ratio},
                       {"mlp_hidden", m.mlp_hidden()}, {"norm", to_string(m.norm)}, {"tied", m.tied_embeddings},
                       {"rank", m.path.rank}, {"block", m.path.block}, {"conv_bias", m.path.conv_bias},
                       {"beta_clamp", m.path.beta_clamp}, {"rope_theta", m.rope_theta},
                       {"flops_per_token", flops}, {"params", params}, {"host_memory_bytes", mem.total}});
  }
  out["presets"] = presets;
  int64_t n = 0;
  const DevicePeak* peaks = device_peaks(&n);
  json table = json::array();
  for (int64_t i = 0; i < n; ++i)
    table.push_back({{"match", peaks[i].match}, {"bf16", peaks[i].bf16}, {"tf32", peaks[i].tf32}, {"fp32", peaks[i].fp32}});
  out["peaks_tflops"] = table;
  return out;
}

void write_json(const std::string& path, const json& j) {
  if (path == "-") {
    std::fputs((j.dump(1) + "\n").c_str(), stdout);
    return;
  }
  AtomicFile f(path);
  f.write(j.dump(1) + "\n");
  f.commit();
}

struct BenchTrainOptions {
  std::string device = "cpu", precision, json;  // precision: empty = tf32 on cuda
  std::vector<std::string> presets, attention{"path", "rope"}, sets;
  int64_t threads = 0, profile_steps = 5;
  double seconds = 3.0;
  bool profile = false, list = false;
};

void run_bench_train(Context& ctx, const BenchTrainOptions& o) {
  ctx.load_plugins();
  check_attention_kinds(o.attention);
  for (const std::string& name : o.presets) find_bench_preset(name);
  if (!std::isfinite(o.seconds) || o.seconds <= 0) fail("--seconds {}: expected a positive duration", o.seconds);
  if (o.profile_steps < 1) fail("--profile-steps {}: expected at least 1", o.profile_steps);
  const std::string device = o.list ? o.device : select_device(o.device);
  if (device != "cpu" && device != "cuda") fail("--device '{}': expected cpu, cuda or cuda:N", o.device);
  const bool cuda = device == "cuda";
  if (o.profile && !cuda) fail("--profile: a per-op breakdown needs --device cuda (the GPU runner's profiler)");
#ifdef STATEBENCH_HAVE_CUDA
  if (cuda && !o.list && !cuda_available()) fail("--device {}: no CUDA device is visible", o.device);
#else
  if (cuda && !o.list) fail("--device {}: this statebench was built without CUDA", o.device);
#endif
  const std::vector<std::string> names = o.presets.empty() ? default_bench_presets(cuda || o.list) : o.presets;
  if (o.list) {
    const json j = presets_json(ctx, names, o.sets);
    if (!o.json.empty()) return write_json(o.json, j);
    std::vector<std::vector<std::string>> rows{{"preset", "task", "B", "T", "V", "D", "layers", "heads", "mlp",
                                                "GFLOP/token (path, rope)", "study"}};
    for (const json& p : j["presets"])
      rows.push_back({p["name"].get<std::string>(), p["task"].get<std::string>(), std::to_string(p["batch"].get<int64_t>()),
                      std::to_string(p["T"].get<int64_t>()), std::to_string(p["vocab"].get<int64_t>()),
                      std::to_string(p["d_model"].get<int64_t>()), std::to_string(p["n_layers"].get<int64_t>()),
                      std::to_string(p["n_heads"].get<int64_t>()),
                      fmt::format("{} {}", p["mlp"].get<std::string>(), p["mlp_hidden"].get<int64_t>()),
                      fmt::format("{:.4f}, {:.4f}", p["flops_per_token"]["path"].get<double>() / 1e9,
                                  p["flops_per_token"]["rope"].get<double>() / 1e9),
                      p["study"].get<std::string>()});
    std::fputs(format_table(rows).c_str(), stdout);
    return;
  }
  std::vector<std::string> common = {"train.device=" + device};
  if (o.threads > 0) common.push_back("train.threads=" + std::to_string(o.threads));
  // The config checks the value and refuses tf32 / bf16 on the CPU.
  if (!o.precision.empty() || cuda) common.push_back("train.precision=" + (o.precision.empty() ? "tf32" : o.precision));
  common.insert(common.end(), o.sets.begin(), o.sets.end());
  std::vector<Case> cases;  // every config checked before the first timing
  for (const std::string& name : names)
    for (const std::string& att : o.attention) cases.push_back(make_case(ctx, find_bench_preset(name), att, common));
  std::unique_ptr<AtomicFile> out_file;
  if (!o.json.empty() && o.json != "-") out_file = std::make_unique<AtomicFile>(o.json);
  fmt::print("bench train: full training steps (fwd, bwd, clip, AdamW) on {} (statebench {} {})\n", device,
             STATEBENCH_VERSION, sb::build_commit());
  std::vector<std::vector<std::string>> rows{
      {"preset", "attention", "B", "T", "params", "steps", "ms/step", "tokens/s", "TFLOP/s", "MFU"}};
  json results = json::array();
  std::string device_name, precision;
  for (Case& c : cases) {
    const Timing t = measure(c, o.seconds, o.profile ? o.profile_steps : 0);
    device_name = t.device_name, precision = to_string(c.cfg.train.precision);
    const double step_s = t.seconds / static_cast<double>(t.steps);
    const double tokens_per_s = static_cast<double>(c.B * c.T) / step_s;
    const double flops = flops_per_token(c);
    const std::optional<double> peak = cuda ? peak_flops(device_name, precision) : std::nullopt;
    const std::optional<double> mfu = peak ? std::optional<double>(tokens_per_s * flops / *peak) : std::nullopt;
    rows.push_back({c.preset->name, c.attention, std::to_string(c.B), std::to_string(c.T), std::to_string(t.params),
                    std::to_string(t.steps), fmt::format("{:.2f}", 1e3 * step_s), fmt::format("{:.0f}", tokens_per_s),
                    fmt::format("{:.2f}", tokens_per_s * flops / 1e12), mfu ? fmt::format("{:.1f}%", 100 * *mfu) : "-"});
    json r = {{"preset", c.preset->name}, {"attention", c.attention}, {"device", device_name},
              {"precision", precision}, {"B", c.B}, {"T", c.T}, {"params", t.params}, {"steps", t.steps},
              {"seconds", t.seconds}, {"ms_per_step", 1e3 * step_s}, {"tokens_per_s", tokens_per_s},
              {"flops_per_token", flops}, {"labelled_fraction", c.labelled_fraction},
              {"mfu", mfu ? json(*mfu) : json(nullptr)}};
    if (o.profile) r["profile"] = profile_json(t.profile);
    results.push_back(r);
    if (o.profile) print_profile(c, t.profile);
  }
  if (o.profile) fmt::print("\n");
  std::fputs(format_table(rows).c_str(), stdout);
  const std::optional<double> peak = cuda ? peak_flops(device_name, precision) : std::nullopt;
  fmt::print("device: {}; MFU against {} (docs/benchmarks.md)\n", device_name,
             peak ? fmt::format("a dense {} peak of {:.1f} TFLOP/s", precision, *peak / 1e12)
                  : std::string("no known peak: '-'"));
  const json j = {{"commit", sb::build_commit()}, {"date", utc_now()}, {"results", results}};
  if (o.json == "-") write_json("-", j);
  if (out_file) {
    out_file->write(j.dump(1) + "\n");
    out_file->commit();
  }
}

}  // namespace

void add_bench_train(CLI::App& bench, Context& ctx) {
  auto o = std::make_shared<BenchTrainOptions>();
  CLI::App* cmd = bench.add_subcommand("train", "training speed and MFU of each study's model (docs/benchmarks.md)");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "fp32, tf32 (default on cuda) or bf16 (bf16 activations and attention); cpu: fp32 only");
  cmd->add_option("--attention", o->attention, "attention kinds to time each preset with, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seconds", o->seconds, "time per preset and attention kind, after 2 warm-up steps")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the results (with --list-presets: the presets) as JSON; - = stdout")
      ->type_name("FILE");
  cmd->add_option("--presets", o->presets,
                  "models to time, comma-separated: flipflop_ref, wordproblem_128, a5_l32, merrill_a5, mqrar, mqar "
                  "(default: all on cuda, the first two on cpu)")
      ->delimiter(',');
  cmd->add_option("--set", o->sets, "a config override KEY=VALUE for every preset, e.g. train.cuda_graphs=false")
      ->type_name("KEY=VALUE");
  cmd->add_flag("--profile", o->profile, "per-op time breakdown of the GPU step (CUDA events, graphs off)");
  cmd->add_option("--profile-steps", o->profile_steps, "steps the profile sums over")->capture_default_str();
  cmd->add_flag("--list-presets", o->list, "print the presets (all unless --presets) and exit; with --json: JSON");
  cmd->callback([&ctx, o] { run_bench_train(ctx, *o); });
}

}  // namespace sb::cli
