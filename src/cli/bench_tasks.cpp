// bench_tasks.cpp: `statebench bench tasks [--seconds S] [--json FILE]`: single-thread generation
// throughput (tokens/s) of every registered task at its defaults and of the named configurations
// in kNamedConfigs (skipped when their task is not registered), into one reused buffer.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>

#include "core/build_info.hpp"
#include "cli/cli.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "io/atomic_file.hpp"

namespace sb::cli {

namespace {

struct NamedConfig {
  const char* task;
  std::vector<std::string> params;  // KEY=VALUE
};

// Configurations measured besides each task's defaults (a duplicate of the defaults is skipped).
const std::vector<NamedConfig>& named_configs() {
  static const std::vector<NamedConfig> configs = {
      {"flipflop", {"length=512"}},
      {"flipflop", {"length=2048"}},
      {"word_problem", {"group=S5", "length=512"}},
      {"word_problem", {"group=A5", "length=128"}},
      {"mqar", {"length=512", "num_kv_pairs=64"}},
      {"mqar", {"length=256", "num_kv_pairs=16"}},
      {"mqrar", {}},
      {"automaton", {"file=experiments/automata/s3_arrangements.yaml", "length=512"}},
  };
  return configs;
}

struct BenchResult {
  std::string task, params;
  int64_t T = 0, V = 0, examples = 0;
  double seconds = 0;
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(examples * T) / seconds : 0.0; }
};

int first_train_split(const Task& task) {
  const auto splits = task.splits();
  for (size_t i = 0; i < splits.size(); ++i)
    if (!splits[i].eval) return static_cast<int>(i);
  fail("task '{}' has no training split to benchmark", task.name());
}

// Generates consecutive training examples into one buffer until `seconds` have passed, reading the
// clock after batches that grow until one takes about a millisecond.
BenchResult measure(const Task& task, double seconds) {
  using Clock = std::chrono::steady_clock;
  const int64_t T = task.seq_len();
  Example buf{std::vector<int32_t>(static_cast<size_t>(T)), std::vector<int32_t>(static_cast<size_t>(T)),
              std::vector<uint8_t>(static_cast<size_t>(T))};
  const int split = first_train_split(task);
  task.example(split, 0, 0, buf.view());  // warm-up, not timed
  BenchResult r;
  r.T = T;
  r.V = task.vocab_size();
  int64_t batch = 1;
  uint64_t index = 1;
  const auto start = Clock::now();
  for (;;) {
    const auto batch_start = Clock::now();
    for (int64_t i = 0; i < batch; ++i) task.example(split, 0, index++, buf.view());
    r.examples += batch;
    const auto now = Clock::now();
    r.seconds = std::chrono::duration<double>(now - start).count();
    if (r.seconds >= seconds) break;
    if (std::chrono::duration<double>(now - batch_start).count() < 1e-3) batch *= 2;
  }
  return r;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20) out += fmt::format("\\u{:04x}", c);
    else out.push_back(static_cast<char>(c));
  }
  return out + "\"";
}

std::string results_json(const std::vector<BenchResult>& results, double seconds) {
  std::string out = fmt::format(
      "{{\n  \"benchmark\": \"tasks\",\n  \"statebench\": \"{}\",\n  \"commit\": \"{}\",\n  \"threads\": 1,\n"
      "  \"seconds_per_config\": {},\n  \"results\": [",
      STATEBENCH_VERSION, sb::build_commit(), seconds);
  for (size_t i = 0; i < results.size(); ++i) {
    const BenchResult& r = results[i];
    out += fmt::format(
        "{}\n    {{\"task\": {}, \"params\": {}, \"T\": {}, \"V\": {}, \"examples\": {}, \"seconds\": {:.6f}, "
        "\"tokens_per_s\": {:.6e}}}",
        i ? "," : "", json_string(r.task), json_string(r.params), r.T, r.V, r.examples, r.seconds, r.tokens_per_s());
  }
  return out + "\n  ]\n}\n";
}

void run_bench_tasks(Context& ctx, double seconds, const std::string& json_path) {
  ctx.load_plugins();
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 3600)
    fail("invalid --seconds {}: expected a duration in (0, 3600]", seconds);
  // Opened first so an unwritable path fails before the measurements, not after.
  std::unique_ptr<AtomicFile> json_file;
  if (!json_path.empty()) json_file = std::make_unique<AtomicFile>(json_path);

  // What to measure: every task at its defaults, then the named configurations.
  std::vector<std::pair<std::string, std::vector<std::string>>> configs;
  for (const TaskInfo* info : ctx.tasks.list()) configs.push_back({info->name, {}});
  for (const NamedConfig& c : named_configs())
    if (ctx.tasks.contains(c.task)) configs.push_back({c.task, c.params});

  fmt::print("bench tasks: single-thread generation of training examples, ~{:g} s each (statebench {} {})\n",
             seconds, STATEBENCH_VERSION, sb::build_commit());
  std::vector<std::vector<std::string>> rows{{"task", "params", "T", "V", "examples", "M tok/s"}};
  std::vector<BenchResult> results;
  std::set<std::string> seen;
  for (const auto& [name, params] : configs) {
    const TaskInfo& info = ctx.tasks.get(name);
    const Params parsed(fmt::format("task '{}' (bench config)", name), info.params, Params::parse_assignments(params));
    const std::string canonical = parsed.canonical();
    if (!seen.insert(name + "|" + canonical).second) continue;
    std::unique_ptr<Task> task;
    try {
      task = info.create(parsed);
    } catch (const Error& e) {  // e.g. a required parameter (automaton's file) or a missing file
      rows.push_back({name, "skipped: " + std::string(e.what()), "-", "-", "-", "-"});
      continue;
    }
    BenchResult r = measure(*task, seconds);
    r.task = name;
    r.params = canonical;
    rows.push_back({r.task, r.params.empty() ? "-" : r.params, std::to_string(r.T), std::to_string(r.V),
                    std::to_string(r.examples), fmt::format("{:.2f}", r.tokens_per_s() / 1e6)});
    results.push_back(std::move(r));
  }
  std::fputs(format_table(rows).c_str(), stdout);
  if (json_file) {
    json_file->write(results_json(results, seconds));
    json_file->commit();
    fmt::print("wrote {}\n", json_path);
  }
}

}  // namespace

void add_bench_tasks(CLI::App& bench, Context& ctx) {
  struct BenchTasksOptions {
    double seconds = 1.0;
    std::string json;
  };
  auto opt = std::make_shared<BenchTasksOptions>();
  CLI::App* cmd = bench.add_subcommand("tasks", "single-thread generation throughput (tokens/s) of every task");
  cmd->add_option("--seconds", opt->seconds, "time per configuration")->capture_default_str();
  cmd->add_option("--json", opt->json, "also write the results to this JSON file")->type_name("FILE");
  cmd->callback([&ctx, opt] { run_bench_tasks(ctx, opt->seconds, opt->json); });
}

}  // namespace sb::cli
