// finished_run.cpp: reopening a finished run and `statebench eval` (see finished_run.hpp).
#include "train/finished_run.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <type_traits>

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/host_name.hpp"
#include "core/utc_time.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "model/transformer.hpp"
#include "train/engine.hpp"
#include "train/evaluation.hpp"
#include "train/memory_estimate.hpp"

namespace sb {

namespace fs = std::filesystem;

FinishedRun open_finished_run(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("run directory '{}' does not exist", dir);
  FinishedRun run;
  run.dir = dir;
  const std::string summary = dir + "/summary.json", checkpoint = dir + "/checkpoint.bin";
  if (!fs::exists(summary, ec))
    fail("'{}' holds no finished run (no summary.json); finish it first with `statebench train CONFIG --out {} --resume`",
         dir, dir);
  run.summary = read_run_summary(summary);
  if (run.summary.status != "completed" && run.summary.status != "early_stopped")
    fail("run '{}' did not finish (status '{}' in {}): it has no final parameters to use", dir, run.summary.status,
         summary);
  if (!fs::exists(checkpoint, ec)) fail("run '{}' has no checkpoint.bin (its parameters)", dir);
  run.checkpoint = read_checkpoint_info(checkpoint);
  if (run.summary.steps && *run.summary.steps != run.checkpoint.state.step)
    fail("checkpoint '{}' is of step {} but summary.json says the run ended at step {}", checkpoint,
         run.checkpoint.state.step, *run.summary.steps);
  run.config = parse_config(run.checkpoint.config_yaml, {}, checkpoint + " (its config)");
  if (config_fingerprint(run.config) != run.checkpoint.fingerprint)
    fail("checkpoint '{}': its config does not match its fingerprint (corrupted)", checkpoint);
  return run;
}

template <class S>
void load_run_parameters(const FinishedRun& run, ParamStore<S>& params) {
  const std::string checkpoint = run.dir + "/checkpoint.bin";
  if (run.checkpoint.scalar_bytes == sizeof(S)) {
    load_checkpoint(checkpoint, run.config, params, static_cast<AdamW<S>*>(nullptr));
    return;
  }
  if (run.checkpoint.scalar_bytes != sizeof(float) || !std::is_same_v<S, double>)
    fail("checkpoint '{}' holds {}-byte values, which this model cannot take", checkpoint, run.checkpoint.scalar_bytes);
  // Floats into a double model: load into a float store with the same views, then widen exactly.
  ParamStore<float> floats;
  for (const ParamView& v : params.views()) floats.add(v.name, v.shape, v.decay);
  floats.finalize();
  load_checkpoint(checkpoint, run.config, floats, static_cast<AdamW<float>*>(nullptr));
  for (int64_t i = 0; i < params.size(); ++i) params.params()[i] = static_cast<S>(floats.params()[i]);
}

template void load_run_parameters(const FinishedRun&, ParamStore<float>&);
template void load_run_parameters(const FinishedRun&, ParamStore<double>&);

namespace {

// An exclusive lock on the run directory for the read-merge-write of eval.json.
class DirLock {
 public:
  explicit DirLock(const std::string& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) fail("cannot lock run directory '{}'", dir);
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_;
};

// eval.json as it stands (an empty record when absent); never replaced when unreadable.
Json read_eval_record(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Json{{"config_fingerprint", ""}, {"eval", Json::object()}};
  Json j;
  try {
    j = parse_json(read_file(path));
  } catch (const Error& e) {
    fail("'{}': {}; move it away to start a new one (it is never overwritten)", path, e.what());
  }
  if (!j.is_object() || !j.contains("eval") || !j["eval"].is_object())
    fail("'{}' is not an eval record (no \"eval\" object); move it away to start a new one", path);
  return j;
}

}  // namespace

EvalRunResult evaluate_run(const std::string& dir, const TaskRegistry& tasks, const EvalRequest& request) {
  const FinishedRun run = open_finished_run(dir);
  TrainConfig cfg = run.config;
  if (!request.device.empty() && request.device != to_string(cfg.train.device)) {
    if (request.device != "cpu" && request.device != "cuda") fail("--device '{}': expected cpu or cuda", request.device);
    cfg.train.device = request.device == "cpu" ? Device::cpu : Device::cuda;
    if (cfg.train.device == Device::cpu) cfg.train.precision = Precision::fp32;  // the CPU computes in fp32
  }
  if (request.device.empty() && cfg.train.device == Device::cuda && !cuda_available())
    fail("run '{}' trained on cuda and no CUDA device is visible here: pass --device cpu", dir);
  if (request.threads >= 0) cfg.train.threads = request.threads;
  if (request.examples < 0) fail("--examples: expected a number >= 1, got {}", request.examples);

  // Every evaluation set first: unknown splits and fixed-length tasks fail before any work.
  const auto train_task = tasks.create(cfg.task.name, cfg.task.params);
  std::vector<std::string> splits = request.splits;
  if (splits.empty())
    for (const auto& e : cfg.task.eval)
      if (std::find(splits.begin(), splits.end(), e.split) == splits.end()) splits.push_back(e.split);
  std::vector<int64_t> lengths = request.lengths;
  if (lengths.empty()) lengths.push_back(0);
  std::vector<EvalSet> sets;
  std::vector<EvalShape> shapes;
  for (const auto& split : splits)
    for (const int64_t length : lengths) {
      if (length < 0) fail("--length: expected a number >= 1, got {}", length);
      // Without --examples, an entry the run itself evaluated keeps its size (the same examples).
      EvalSplitConfig e{split, length, request.examples};
      for (const auto& own : cfg.task.eval)
        if (request.examples == 0 && own.split == split && own.length == length) e.examples = own.examples;
      if (std::any_of(sets.begin(), sets.end(), [&](const EvalSet& s) { return s.key == eval_key(e); })) continue;
      sets.push_back(make_eval_set(tasks, cfg.task, *train_task, e, cfg.train.eval_examples, fmt::format("run '{}'", dir)));
      const std::string option =
          length > 0 ? fmt::format("--split {} --length {}", split, length) : fmt::format("--split {}", split);
      shapes.push_back({sets.back().key, option, sets.back().examples, sets.back().length});
    }
  check_learned_positions(cfg.model, train_task->seq_len(), sets);
  check_memory(estimate_memory(cfg, train_task->vocab_size(), train_task->seq_len(), shapes), available_memory());

  auto engine = make_engine(cfg, train_task->vocab_size(), train_task->seq_len());
  load_run_parameters(run, engine->model().params());
  EvalRunResult out;
  out.device = engine->device_name();
  for (auto& set : sets) {
    generate_eval_set(set, cfg.train.seed);
    out.results.emplace_back(set.key, evaluate_set(*engine, set, cfg.train.batch_size, train_task->seq_len()));
    set.ids.clear(), set.labels.clear(), set.mask.clear();
  }

  const Json provenance{{"commit", build_commit()}, {"version", STATEBENCH_VERSION}, {"device", out.device},
                        {"date", utc_now()},        {"command", request.command},   {"host", host_name()}};
  out.file = dir + "/eval.json";
  const DirLock lock(dir);
  Json record = read_eval_record(out.file);
  record["config_fingerprint"] = fmt::format("{:016x}", run.checkpoint.fingerprint);
  for (const auto& [key, summary] : out.results) {
    Json entry = summary;
    entry["checkpoint_step"] = run.checkpoint.state.step;
    entry["seed"] = cfg.train.seed;
    entry["provenance"] = provenance;
    record["eval"][key] = std::move(entry);
  }
  write_file_atomic(out.file, record.dump(2) + "\n");
  return out;
}

}  // namespace sb
