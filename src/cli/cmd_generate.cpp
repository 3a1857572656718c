// cmd_generate.cpp: `statebench generate NAME [--param k=v]... -n N -o FILE`: writes examples
// start .. start+N-1 of one split to JSONL, .npy ([N, 3, T] int32) or .npz, and FILE.meta.json
// (task, parameters, vocabulary: io/example_meta.hpp; an .npz holds it too). Everything is checked
// before generation starts; the files appear only when complete (AtomicFile), also on Ctrl-C.
#include <fmt/format.h>

#include <charconv>
#include <memory>
#include <thread>

#include "cli/cli.hpp"
#include "cli/interrupt_guard.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/example_meta.hpp"
#include "io/example_writer.hpp"
#include "io/generate_examples.hpp"
#include "io/progress.hpp"

namespace sb::cli {

namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kProgressMinTokens = int64_t{1} << 22;  // smaller jobs finish before a bar helps

int64_t parse_count(const std::string& text) {
  int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || n <= 0)
    fail("invalid -n '{}': expected a positive number of examples", text);
  return n;
}

// A non-negative integer option (CLI11 would wrap "-1" around to 2^64 - 1).
uint64_t parse_index(const char* option, const std::string& text) {
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
    fail("invalid {} '{}': expected an integer in [0, 2^64)", option, text);
  return v;
}

struct GenerateOptions {
  std::string task, split = "train", count, output, format, seed = "0", start = "0";
  std::vector<std::string> params;
  int threads = 0;
};

void run_generate(Context& ctx, const GenerateOptions& opt) {
  ctx.load_plugins();
  // Validate everything before touching the output path.
  const TaskInfo& info = ctx.tasks.get(opt.task);
  const Params params(fmt::format("task '{}'", opt.task), info.params, Params::parse_assignments(opt.params));
  const auto task = info.create(params);
  const int split = task->split_index(opt.split);
  const int64_t n = parse_count(opt.count);
  const uint64_t seed = parse_index("--seed", opt.seed), start = parse_index("--start", opt.start);
  if (start > UINT64_MAX - static_cast<uint64_t>(n)) fail("--start {} + -n {} overflows the example index", start, n);
  const ExampleFormat format = opt.format.empty() ? example_format_for_path(opt.output) : parse_example_format(opt.format);
  if (opt.threads < 0 || opt.threads > kMaxThreads)
    fail("invalid --threads {}: expected 0 (all cores) to {}", opt.threads, kMaxThreads);
  const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t T = task->seq_len();

  ExampleFileInfo meta_info{opt.task, {}, opt.split, seed, start, n, format};
  for (const ParamSpec& spec : info.params)
    if (params.has_value(spec.name)) meta_info.params.emplace_back(spec.name, params.str(spec.name));
  const std::string meta = example_meta_json(*task, meta_info);

  InterruptGuard interrupt_guard;  // before the temporary files exist, so Ctrl-C always cleans up
  AtomicFile sidecar(example_meta_path(opt.output));
  sidecar.write(meta);
  auto writer = open_example_writer(opt.output, format, n, T,
                                    format == ExampleFormat::kNpz ? example_meta_npz_members(*task, meta) : NpzExtras{});
  Progress progress(fmt::format("generate {}", opt.task), n,
                    n * T >= kProgressMinTokens ? ProgressMode::kAuto : ProgressMode::kSilent, stderr, "examples");
  try {
    generate_examples(*task, {split, seed, start, n}, threads, *writer, &progress, &InterruptGuard::flag());
  } catch (const Error&) {
    if (InterruptGuard::interrupted()) fail("interrupted: '{}' was not written", opt.output);
    throw;
  }
  writer->commit();
  sidecar.commit();  // the data file first: a sidecar never describes a missing file
  progress.finish();
  fmt::print("wrote {} examples of {} (split {}, seed {}, start {}, T={}) to {} [{}]; task, parameters and "
             "vocabulary in {}\n",
             n, opt.task, opt.split, seed, start, T, opt.output, example_format_name(format),
             example_meta_path(opt.output));
}

}  // namespace

void add_generate_command(CLI::App& app, Context& ctx) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "write task examples to a file (JSONL, .npy or .npz)");
  cmd->footer(
      "Formats (by --format or the extension of FILE):\n"
      "  jsonl (.jsonl, .json): one object per line: {\"input_ids\":[...],\"labels\":[...],\"score_mask\":[...]}\n"
      "  npy: ONE int32 array of shape [N, 3, T]; axis 1 = (input_ids, labels, score_mask)\n"
      "  npz: uncompressed numpy.savez layout: input_ids, labels, score_mask, each int32 [N, T];\n"
      "       vocab ([V] token names) and meta (FILE.meta.json's text as a 0-d string)\n"
      "FILE.meta.json beside it: task, parameters, split, seed, indices, seq_len and vocabulary.\n"
      "Labels are -100 where there is no loss; score_mask is 1 where accuracy is reported.\n"
      "Example i is a pure function of (task parameters, split, seed, i): any --threads gives the same bytes.");
  cmd->add_option("task", opt->task, "task name (see `statebench tasks`)")->required();
  add_param_option(*cmd, opt->params);
  cmd->add_option("--split", opt->split, "which split (see `statebench tasks show NAME`)")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "the data seed")->capture_default_str()->type_name("UINT");
  cmd->add_option("-n,--count", opt->count, "number of examples (> 0)")->required()->type_name("N");
  cmd->add_option("-o,--output", opt->output, "output file")->required()->type_name("FILE");
  cmd->add_option("--format", opt->format, "jsonl, npy or npz (default: from the extension of FILE)");
  cmd->add_option("--start", opt->start, "index of the first example")->capture_default_str()->type_name("UINT");
  cmd->add_option("--threads,-j", opt->threads, "generator threads (0 = all cores)")->capture_default_str();
  cmd->callback([&ctx, opt] { run_generate(ctx, *opt); });
}

}  // namespace sb::cli
