// trainer.cpp: the training loop (batches as a pure function of the step, so resume equals the
// uninterrupted run, generated one step ahead on a background thread), evaluation on named
// splits and lengths, early stop, divergence, checkpoints, metrics.jsonl and summary.json with
// provenance. Every check (run directory, tasks, memory, checkpoint, the first examples) comes
// before the first write; summary.json, written last, is the run's commit point.
#include "core/build_info.hpp"
#include "train/trainer.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cmath>
#include <ctime>
#include <filesystem>

#include "core/error.hpp"
#include "core/host_name.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "io/output_dir.hpp"
#include "io/progress.hpp"
#include "train/batch_prefetch.hpp"
#include "train/checkpoint.hpp"
#include "train/engine.hpp"
#include "train/epoch_order.hpp"
#include "train/evaluation.hpp"
#include "train/memory_estimate.hpp"
#include "train/metrics_log.hpp"
#include "train/run_summary.hpp"

namespace sb {

namespace fs = std::filesystem;

std::string describe_cpu_device(int64_t threads) { return fmt::format("cpu ({} threads)", threads); }

namespace {

using Clock = std::chrono::steady_clock;
using EvalMap = std::vector<std::pair<std::string, EvalSummary>>;  // eval key -> evaluation, in config order

Json eval_json(const EvalMap& eval) {
  Json j = Json::object();
  for (const auto& [key, e] : eval) j[key] = e;
  return j;
}

EvalMap eval_map(const Json& eval) {
  EvalMap out;
  if (eval.is_object())
    for (const auto& [key, e] : eval.items()) out.emplace_back(key, e.get<EvalSummary>());
  return out;
}

bool is_eval_step(const TrainConfig& c, int64_t s) {
  return s == c.train.steps || (c.train.eval_every > 0 && s % c.train.eval_every == 0);
}

// The loop's own state in a checkpoint (TrainState::stream): the last loss read, as its bits, so
// a run resumed at its last step reports the same final_train_loss.
std::vector<uint64_t> loop_state(double last_loss) { return {std::bit_cast<uint64_t>(last_loss)}; }
double last_loss_of(const TrainState& s) { return s.stream.empty() ? NAN : std::bit_cast<double>(s.stream[0]); }

// --stop-after: the process ends as kill -9 would end it (no destructor runs, nothing is flushed).
[[noreturn]] void die_like_kill9() {
  ::kill(::getpid(), SIGKILL);
  std::abort();
}

struct RunFiles {
  explicit RunFiles(const std::string& dir)
      : config(dir + "/config.yaml"), metrics(dir + "/metrics.jsonl"), checkpoint(dir + "/checkpoint.bin"),
        summary(dir + "/summary.json") {}
  std::string config, metrics, checkpoint, summary;
};

int train_split(const Task& task) {
  const auto splits = task.splits();
  for (size_t i = 0; i < splits.size(); ++i)
    if (!splits[i].eval) return static_cast<int>(i);
  fail("task '{}' has no training split", task.name());
}

// What the progress line shows after its counts and ETA: the last loss read (none before the
// first: a device engine reads it only at log and evaluation steps), the last evaluation, speed.
std::string progress_note(double last_loss, const std::string& last_eval, double tokens_per_second) {
  std::string note = std::isnan(last_loss) ? "" : fmt::format("loss {:.4f}", last_loss);
  if (!last_eval.empty()) note += (note.empty() ? "" : " ") + last_eval;
  return note + (note.empty() ? "" : " ") + fmt::format("{:.3g} tok/s", tokens_per_second);
}

// Seconds spent training since t0: wall time less evaluation and checkpoints (on a GPU the steps
// run asynchronously, so per-step host timers would undercount).
double train_time(Clock::time_point t0, double other_seconds) {
  return std::max(std::chrono::duration<double>(Clock::now() - t0).count() - other_seconds, 1e-9);
}

// The run's tasks: training, and one per evaluation set (cheap: examples are generated later).
struct RunTasks {
  const TaskInfo* info = nullptr;
  Params params;
  std::unique_ptr<Task> task;
  int split = 0;
  std::vector<EvalSet> evals;
};

RunTasks build_tasks(const TrainConfig& cfg, const TaskRegistry& tasks) {
  RunTasks t;
  t.info = &tasks.get(cfg.task.name);
  t.params = Params(fmt::format("task '{}'", cfg.task.name), t.info->params, cfg.task.params);
  t.task = t.info->create(t.params);
  t.split = train_split(*t.task);
  for (size_t i = 0; i < cfg.task.eval.size(); ++i)
    t.evals.push_back(make_eval_set(tasks, cfg.task, *t.task, cfg.task.eval[i], cfg.train.eval_examples,
                                    fmt::format("task.eval[{}]", i)));
  check_learned_positions(cfg.model, t.task->seq_len(), t.evals);
  return t;
}

MemoryEstimate estimate(const TrainConfig& cfg, const RunTasks& t) {
  std::vector<EvalShape> shapes;
  for (size_t i = 0; i < t.evals.size(); ++i) {
    const EvalSplitConfig& e = cfg.task.eval[i];
    const std::string key = e.length > 0     ? fmt::format("task.eval[{}].length = {}", i, e.length)
                            : e.examples > 0 ? fmt::format("task.eval[{}].examples = {}", i, e.examples)
                                             : fmt::format("train.eval_examples = {}", cfg.train.eval_examples);
    shapes.push_back({t.evals[i].key, key, t.evals[i].examples, t.evals[i].length});
  }
  return estimate_memory(cfg, t.task->vocab_size(), t.task->seq_len(), shapes);
}

class Trainer {
 public:
  // Builds the tasks, refuses a run larger than the memory available, then builds the engine.
  Trainer(const TrainConfig& cfg, const TaskRegistry& tasks, const TrainOptions& opt) : cfg_(cfg), opt_(opt) {
    RunTasks t = build_tasks(cfg, tasks);
    check_memory(estimate(cfg, t), available_memory());
    task_info_ = t.info;
    task_params_ = std::move(t.params);
    task_ = std::move(t.task);
    split_ = t.split;
    evals_ = std::move(t.evals);
    engine_ = make_engine(cfg, task_->vocab_size(), task_->seq_len());
    device_ = engine_->device_name();
  }

  // Trains from step 0, or from the run's checkpoint when `from_checkpoint`.
  TrainOutcome run(bool from_checkpoint) {
    const RunFiles files(opt_.out_dir);
    const int64_t B = cfg_.train.batch_size, T = task_->seq_len(), steps = cfg_.train.steps;
    // Nothing is written until every check has passed: the checkpoint belongs to this config, the
    // task's examples (evaluation sets, the first batch) are valid.
    engine_->model().init_params(cfg_.train.seed);
    int64_t start = 0;
    double last_loss = NAN;
    if (from_checkpoint) {
      const TrainState state =
          load_checkpoint(files.checkpoint, cfg_, engine_->model().params(), &engine_->optimizer());
      start = state.step;
      last_loss = last_loss_of(state);
    }
    for (auto& e : evals_) generate_eval_set(e, cfg_.train.seed);
    if (start < steps) {
      Batch first;
      fill_batch(start, B, T, first);
    }

    create_output_dir(opt_.out_dir, "run directory");
    write_file_atomic(files.config, to_yaml(cfg_));
    // Resumed: the log keeps what the checkpoint's steps wrote, less the checkpoint step's eval
    // line (evaluated again below); the last eval kept is what a diverging run reports.
    EvalMap last_eval = start > 0 ? eval_map(MetricsLog::truncate_for_resume(files.metrics, start)) : EvalMap{};
    MetricsLog log(files.metrics, start == 0);

    // The next batches are generated on background threads while step s runs (eval data exists
    // already; the workers touch only task_, whose example() is const and thread-safe).
    const bool gpu = cfg_.train.device == Device::cuda;
    BatchPrefetcher batches([this, B, T](int64_t s, Batch& b) { fill_batch(s, B, T, b); }, start, steps,
                            batch_slots(gpu), true, batch_fillers(gpu));
    std::string status = "completed", message;
    std::string last_eval_line;
    double tokens = 0, other_seconds = 0;  // other: evaluation and checkpoints
    const auto t0 = Clock::now();
    int64_t step = start;
    bool stopped = false;
    Progress progress("train", steps,
                      !opt_.progress ? ProgressMode::kSilent
                                     : (is_terminal(stderr) ? ProgressMode::kBar : ProgressMode::kPlain),
                      stderr, "steps");
    progress.set_start(start);
    auto stop_after = [&](StopPoint::Kind kind, int64_t at) {
      if (opt_.stop_after.kind == kind && opt_.stop_after.step == at) die_like_kill9();
    };
    // A checkpoint at an evaluation step (the last step, a target reached) is evaluated again: the
    // same parameters give the same evaluation, so a run resumed there ends as it would have.
    if (start > 0 && is_eval_step(cfg_, start)) {
      const auto e0 = Clock::now();
      bool reached = false;
      last_eval = evaluate(reached, last_eval_line);
      log.write(Json{{"kind", "eval"}, {"step", start}, {"eval", eval_json(last_eval)}});
      other_seconds += std::chrono::duration<double>(Clock::now() - e0).count();
      if (reached && cfg_.train.target_accuracy > 0 && start < steps) status = "early_stopped", stopped = true;
    }
    for (; !stopped && step < steps; ++step) {
      const Batch& batch = batches.get(step);
      const double lr = scheduled_lr(cfg_.optim, steps, step);
      // A device engine reads the loss back only when it is logged, evaluated or last.
      const int64_t next = step + 1;
      const bool read = next == steps || (cfg_.train.log_every > 0 && next % cfg_.train.log_every == 0) ||
                        (cfg_.train.eval_every > 0 && next % cfg_.train.eval_every == 0);
      const StepResult r =
          engine_->train_step(batch.ids.data(), batch.labels.data(), B, T, lr, cfg_.optim.grad_clip, read);
      tokens += static_cast<double>(B * T);
      if (read) last_loss = r.loss;
      if (read && (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm))) {
        status = "diverged";
        message = fmt::format("non-finite {} at step {}", std::isfinite(r.loss) ? "gradient norm" : "loss", step);
        break;
      }
      const int64_t done = step + 1;
      if (cfg_.train.log_every > 0 && (done % cfg_.train.log_every == 0 || done == steps)) {
        log.write(Json{{"kind", "train"}, {"step", done}, {"loss", json_number_value(r.loss)},
                       {"lr", json_number_value(lr)}, {"grad_norm", json_number_value(r.grad_norm)},
                       {"tokens_per_s", json_number_value(tokens / train_time(t0, other_seconds))},
                       {"elapsed_s", json_number_value(std::chrono::duration<double>(Clock::now() - t0).count())}});
      }
      const bool eval_now = is_eval_step(cfg_, done);
      bool reached = false;
      const auto e0 = Clock::now();
      if (eval_now) {
        last_eval = evaluate(reached, last_eval_line);
        log.write(Json{{"kind", "eval"}, {"step", done}, {"eval", eval_json(last_eval)}});
      }
      stop_after(StopPoint::metrics, done);
      // Stopped by the test aid or a signal (interrupt): after this step's checkpoint, no summary.
      const bool interrupted = done < steps && !(reached && cfg_.train.target_accuracy > 0) &&
                               ((opt_.interrupt_at_step > 0 && done == opt_.interrupt_at_step) ||
                                (opt_.interrupt && opt_.interrupt->load(std::memory_order_relaxed)));
      if (interrupted || done == steps ||
          (cfg_.train.checkpoint_every > 0 && done % cfg_.train.checkpoint_every == 0) ||
          (reached && cfg_.train.target_accuracy > 0)) {
        save_checkpoint(files.checkpoint, cfg_, TrainState{done, loop_state(last_loss)}, engine_->model().params(),
                        engine_->optimizer());
        stop_after(StopPoint::checkpoint, done);
      }
      other_seconds += std::chrono::duration<double>(Clock::now() - e0).count();
      progress.set_note(progress_note(last_loss, last_eval_line, tokens / train_time(t0, other_seconds)));
      progress.update(done);
      if (interrupted) return {"interrupted", done, 1};
      if (reached && cfg_.train.target_accuracy > 0 && done < steps) {
        status = "early_stopped";
        ++step;
        break;
      }
    }
    progress.finish(step);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    const RunSummary summary = make_summary(status, message, step, wall, tokens / train_time(t0, other_seconds),
                                            last_loss, std::move(last_eval));
    if (opt_.stop_after.kind == StopPoint::summary) {  // killed while writing it: a temporary file at most
      AtomicFile partial(files.summary);
      partial.write(Json(summary).dump());
      die_like_kill9();
    }
    write_run_summary(files.summary, summary);
    const bool ok = status == "completed" || status == "early_stopped";
    return {status, step, ok ? 0 : 1};
  }

 private:
  // The batch of step s: examples s*B .. s*B+B-1 of the training stream, or positions s*B .. of
  // a fixed set of train_examples examples read epoch after epoch, in index order (position modulo
  // N) or each epoch in its own random order (train.shuffle: epoch). A pure function of the step:
  // resume is exact.
  void fill_batch(int64_t step, int64_t B, int64_t T, Batch& batch) const {
    batch.resize(B * T);
    const int64_t n = cfg_.train.train_examples;
    if (n == 0) {
      fill_examples(*task_, split_, cfg_.train.seed, static_cast<uint64_t>(step * B), B, batch.ids.data(),
                    batch.labels.data(), batch.mask.data());
      return;
    }
    const bool shuffled = cfg_.train.shuffle == Shuffle::epoch;
    const auto N = static_cast<uint64_t>(n), seed = cfg_.train.seed;
    for (int64_t i = 0; i < B; ++i) {
      const auto g = static_cast<uint64_t>(step * B + i);
      task_->example(split_, seed, shuffled ? epoch_shuffled_index(seed, N, g) : g % N,
                     {batch.ids.data() + i * T, batch.labels.data() + i * T, batch.mask.data() + i * T});
    }
  }

  // Evaluates every eval set; `reached` = train.target_metric >= train.target_accuracy on every set
  // train.target_eval lists (every set when it is empty).
  EvalMap evaluate(bool& reached, std::string& line) {
    EvalMap all;
    reached = true;
    line.clear();
    const auto& target = cfg_.train.target_eval;  // the entries the early stop reads (empty: every one)
    for (const EvalSet& e : evals_) {
      EvalSummary summary = evaluate_set(*engine_, e, cfg_.train.batch_size, task_->seq_len());
      const bool by_sequence = cfg_.train.target_metric == TargetMetric::sequence_accuracy;
      if (target.empty() || std::find(target.begin(), target.end(), e.key) != target.end())
        reached &= (by_sequence ? summary.sequence_accuracy : summary.token_accuracy) >= cfg_.train.target_accuracy;
      line += fmt::format("{} {:.4f} ", e.key, summary.token_accuracy);
      all.emplace_back(e.key, std::move(summary));
    }
    if (!line.empty()) line.pop_back();
    return all;
  }

  RunSummary make_summary(const std::string& status, const std::string& message, int64_t steps, double wall,
                          double tok_s, double loss, EvalMap eval) const {
    RunSummary s;
    s.status = status;
    s.message = message;
    s.steps = steps;
    s.target_steps = cfg_.train.steps;
    s.wall_seconds = wall;
    s.tokens_per_second = tok_s;
    s.final_train_loss = loss;
    s.task = cfg_.task.name;
    for (const auto& spec : task_info_->params)
      if (task_params_.has_value(spec.name)) s.task_params.emplace_back(spec.name, task_params_.str(spec.name));
    ModelSummary model;
    model.attention = to_string(cfg_.model.attention);
    for (int64_t l = 0; l < cfg_.model.n_layers; ++l) model.layers.push_back(to_string(cfg_.model.layer_attention(l)));
    model.n_layers = cfg_.model.n_layers;
    model.d_model = cfg_.model.d_model;
    model.n_heads = cfg_.model.n_heads;
    model.head_dim = cfg_.model.head_dim;
    model.params = engine_->model().params().num_params();
    s.model = std::move(model);
    s.seed = static_cast<int64_t>(cfg_.train.seed);
    s.lr = cfg_.optim.lr;
    s.config_fingerprint = fmt::format("{:016x}", config_fingerprint(cfg_));
    s.eval = std::move(eval);
    s.provenance = Provenance{sb::build_commit(), STATEBENCH_VERSION, device_, utc_now(), opt_.command, host_name(),
                              opt_.plugins, opt_.slurm};
    return s;
  }

  const TrainConfig& cfg_;
  const TrainOptions& opt_;
  const TaskInfo* task_info_ = nullptr;
  Params task_params_;
  std::unique_ptr<Task> task_;
  int split_ = 0;
  std::vector<EvalSet> evals_;
  std::unique_ptr<TrainEngine> engine_;
  std::string device_;
};

}  // namespace

TrainOutcome train(const TrainConfig& given, const TaskRegistry& tasks, const TrainOptions& options) {
  TrainConfig config = given;  // with task.eval[].scale resolved into lengths (config.yaml shows them)
  resolve_eval_lengths(config, tasks);
  const std::string& dir = options.out_dir;
  check_output_dir(dir, "run directory");
  const RunFiles files(dir);
  for (const std::string& f : {files.config, files.metrics, files.checkpoint, files.summary})
    if (fs::exists(f) && !fs::is_regular_file(f)) fail("run directory '{}': '{}' is not a regular file", dir, f);
  const bool has_checkpoint = fs::exists(files.checkpoint), has_summary = fs::exists(files.summary);
  if ((has_summary || has_checkpoint) && !options.resume)
    fail("'{}' already holds a run; pass --resume to continue it or choose another --out", dir);
  if (has_summary) {  // finished, unless the summary cannot be read (then the run is resumed)
    bool readable = true;
    try {
      read_run_summary(files.summary);
    } catch (const Error&) {
      readable = false;
    }
    if (readable) return {"already_finished", 0, 0};
  }
  const StopPoint& stop = options.stop_after;
  if ((stop.kind == StopPoint::metrics && (stop.step < 1 || stop.step > config.train.steps)) ||
      (stop.kind == StopPoint::checkpoint &&
       !(stop.step == config.train.steps ||
         (stop.step > 0 && config.train.checkpoint_every > 0 && stop.step % config.train.checkpoint_every == 0))))
    fail("--stop-after: step {} is not a {} step of this run", stop.step,
         stop.kind == StopPoint::metrics ? "training" : "checkpoint");
  Trainer trainer(config, tasks, options);
  return trainer.run(has_checkpoint);
}

MemoryEstimate estimate_run_memory(const TrainConfig& given, const TaskRegistry& tasks) {
  TrainConfig config = given;
  resolve_eval_lengths(config, tasks);
  return estimate(config, build_tasks(config, tasks));
}

}  // namespace sb
