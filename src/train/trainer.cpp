// trainer.cpp: the training loop (batches as a pure function of the step, so resume equals the
// uninterrupted run, generated one step ahead on a background thread), evaluation on named
// splits and lengths, early stop, divergence, checkpoints, metrics.jsonl and summary.json with
// provenance.
#include "core/build_info.hpp"
#include "train/trainer.hpp"

#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/progress.hpp"
#include "train/batch_prefetch.hpp"
#include "train/checkpoint.hpp"
#include "train/engine.hpp"
#include "train/metrics_log.hpp"

namespace sb {

namespace fs = std::filesystem;

std::string describe_cpu_device(int64_t threads) { return fmt::format("cpu ({} threads)", threads); }

int64_t eval_chunk(int64_t examples, int64_t length, int64_t batch, int64_t train_length, int64_t engine_tokens) {
  const int64_t tokens = length == train_length ? std::max(batch * train_length, engine_tokens) : engine_tokens;
  return std::max<int64_t>(1, std::min(examples, tokens / std::max<int64_t>(1, length)));
}

namespace {

using Clock = std::chrono::steady_clock;

int train_split(const Task& task) {
  const auto splits = task.splits();
  for (size_t i = 0; i < splits.size(); ++i)
    if (!splits[i].eval) return static_cast<int>(i);
  fail("task '{}' has no training split", task.name());
}

struct EvalSet {
  std::string key;  // "val", "val@512"
  std::unique_ptr<Task> task;
  int split = 0;
  int64_t examples = 0, length = 0;
  std::vector<int32_t> ids, labels;  // generated once: [examples, T]
  std::vector<uint8_t> mask;
};

std::string host_name() {
  char buf[256] = {0};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown";
}

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
}

// Seconds spent training since t0: wall time less evaluation and checkpoints (on a GPU the steps
// run asynchronously, so per-step host timers would undercount).
double train_time(Clock::time_point t0, double other_seconds) {
  return std::max(std::chrono::duration<double>(Clock::now() - t0).count() - other_seconds, 1e-9);
}

class Trainer {
 public:
  Trainer(const TrainConfig& cfg, const TaskRegistry& tasks, const TrainOptions& opt) : cfg_(cfg), opt_(opt) {
    task_info_ = &tasks.get(cfg.task.name);
    task_params_ = Params(fmt::format("task '{}'", cfg.task.name), task_info_->params, cfg.task.params);
    task_ = task_info_->create(task_params_);
    split_ = train_split(*task_);
    for (const auto& e : cfg.task.eval) {
      EvalSet set;
      auto params = cfg.task.params;
      if (e.length > 0) params["length"] = std::to_string(e.length);
      set.task = tasks.create(cfg.task.name, params);
      set.split = set.task->split_index(e.split);
      set.examples = e.examples > 0 ? e.examples : cfg.train.eval_examples;
      set.length = set.task->seq_len();
      set.key = e.length > 0 ? fmt::format("{}@{}", e.split, e.length) : e.split;
      if (set.task->vocab_size() != task_->vocab_size())
        fail("task.eval '{}': vocabulary size {} differs from training's {}", set.key, set.task->vocab_size(),
             task_->vocab_size());
      evals_.push_back(std::move(set));
    }
    const ModelConfig model = resolve_max_len(cfg.model, task_->seq_len());
    if (model.position == PositionKind::learned && model.max_len < task_->seq_len())
      fail("model.max_len: {} learned positions are fewer than the training sequences' {} tokens", model.max_len,
           task_->seq_len());
    for (const auto& e : evals_)
      if (model.position == PositionKind::learned && e.length > model.max_len)
        fail("model.max_len: task.eval '{}' has sequences of {} tokens, more than the {} learned positions "
             "(model.max_len, 0 = the training length {})", e.key, e.length, model.max_len, task_->seq_len());
    engine_ = make_engine(cfg, task_->vocab_size(), task_->seq_len());
    device_ = engine_->device_name();
  }

  TrainOutcome run() {
    const std::string dir = opt_.out_dir;
    fs::create_directories(dir);
    const std::string ckpt = dir + "/checkpoint.bin", summary = dir + "/summary.json", metrics = dir + "/metrics.jsonl";
    int64_t start = 0;
    if (fs::exists(summary) || fs::exists(ckpt)) {
      if (!opt_.resume) fail("'{}' already holds a run; pass --resume to continue it or choose another --out", dir);
      if (fs::exists(summary)) return {"already_finished", 0, 0};
    }
    write_file_atomic(dir + "/config.yaml", to_yaml(cfg_));
    engine_->model().init_params(cfg_.train.seed);
    if (opt_.resume && fs::exists(ckpt)) {
      start = load_checkpoint(ckpt, cfg_, engine_->model().params(), &engine_->optimizer()).step;
      MetricsLog::truncate_after_step(metrics, start);
    }
    MetricsLog log(metrics, start == 0);
    for (auto& e : evals_) generate_eval(e);

    const int64_t B = cfg_.train.batch_size, T = task_->seq_len(), steps = cfg_.train.steps;
    // Batch s+1 is generated on a background thread while step s runs (eval data exists already;
    // the worker touches only task_, whose example() is const and thread-safe).
    BatchPrefetcher batches([this, B, T](int64_t s, Batch& b) { fill_batch(s, B, T, b); }, start, steps);
    std::string status = "completed", message;
    JsonObject last_eval;
    std::string last_eval_line;
    double last_loss = NAN, tokens = 0, other_seconds = 0;  // other: evaluation and checkpoints
    const auto t0 = Clock::now();
    int64_t step = start;
    Progress progress("train", steps, !opt_.progress ? ProgressMode::kSilent : is_terminal(stderr) ? ProgressMode::kBar : ProgressMode::kPlain, stderr, "steps");
    for (; step < steps; ++step) {
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
        log.write(JsonObject()
                      .add("kind", "train").add("step", done).add("loss", r.loss).add("lr", lr)
                      .add("grad_norm", r.grad_norm).add("tokens_per_s", tokens / train_time(t0, other_seconds))
                      .add("elapsed_s", std::chrono::duration<double>(Clock::now() - t0).count()));
      }
      const bool eval_now = done == steps || (cfg_.train.eval_every > 0 && done % cfg_.train.eval_every == 0);
      bool reached = false;
      const auto e0 = Clock::now();
      if (eval_now) {
        last_eval = evaluate(reached, last_eval_line);
        log.write(JsonObject().add("kind", "eval").add("step", done).add("eval", last_eval));
      }
      if (done == steps || (cfg_.train.checkpoint_every > 0 && done % cfg_.train.checkpoint_every == 0) ||
          (reached && cfg_.train.target_accuracy > 0))
        save_checkpoint(ckpt, cfg_, TrainState{done, {}}, engine_->model().params(), engine_->optimizer());
      other_seconds += std::chrono::duration<double>(Clock::now() - e0).count();
      const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      progress.set_note(fmt::format("loss {:.4f} {} {:.3g} tok/s ETA {}", last_loss, last_eval_line,
                                    tokens / train_time(t0, other_seconds),
                                    fmt_duration(elapsed / static_cast<double>(done - start) * (steps - done))));
      progress.update(done);
      if (opt_.interrupt_at_step > 0 && done == opt_.interrupt_at_step && done < steps) {
        save_checkpoint(ckpt, cfg_, TrainState{done, {}}, engine_->model().params(), engine_->optimizer());
        return {"interrupted", done, 1};
      }
      if (reached && cfg_.train.target_accuracy > 0 && done < steps) {
        status = "early_stopped";
        ++step;
        break;
      }
    }
    progress.finish();
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    write_summary(summary, summary_json(status, message, step, wall, tokens / train_time(t0, other_seconds),
                                        last_loss, last_eval));
    const bool ok = status == "completed" || status == "early_stopped";
    return {status, step, ok ? 0 : 1};
  }

 private:
  // The batch of step s: examples s*B .. s*B+B-1 of the training stream, or of a fixed set of
  // train_examples examples (indices modulo N). A pure function of the step: resume is exact.
  void fill_batch(int64_t step, int64_t B, int64_t T, Batch& batch) const {
    batch.resize(B * T);
    const int64_t n = cfg_.train.train_examples;
    if (n == 0) {
      fill_examples(*task_, split_, cfg_.train.seed, static_cast<uint64_t>(step * B), B, batch.ids.data(),
                    batch.labels.data(), batch.mask.data());
      return;
    }
    for (int64_t i = 0; i < B; ++i)
      task_->example(split_, cfg_.train.seed, static_cast<uint64_t>((step * B + i) % n),
                     {batch.ids.data() + i * T, batch.labels.data() + i * T, batch.mask.data() + i * T});
  }

  void generate_eval(EvalSet& e) {
    const int64_t n = e.examples * e.length;
    e.ids.resize(n), e.labels.resize(n), e.mask.resize(n);
    fill_examples(*e.task, e.split, cfg_.train.seed, 0, e.examples, e.ids.data(), e.labels.data(), e.mask.data());
  }

  // Evaluates every eval set; `reached` = every set's token accuracy >= target.
  JsonObject evaluate(bool& reached, std::string& line) {
    JsonObject all;
    reached = true;
    line.clear();
    for (auto& e : evals_) {
      EvalCounts counts;
      const int64_t chunk = eval_chunk(e.examples, e.length, cfg_.train.batch_size, task_->seq_len(),
                                       engine_->eval_batch_tokens());
      for (int64_t first = 0; first < e.examples; first += chunk) {
        const int64_t n = std::min(chunk, e.examples - first);
        const int64_t off = first * e.length;
        engine_->evaluate(e.ids.data() + off, e.labels.data() + off, e.mask.data() + off, n, e.length, counts);
      }
      JsonObject j = eval_json(counts);
      j.add("split", e.task->splits()[e.split].name).add("length", e.length).add("examples", e.examples);
      all.add(e.key, j);
      reached &= counts.token_accuracy() >= cfg_.train.target_accuracy;
      line += fmt::format("{} {:.4f} ", e.key, counts.token_accuracy());
    }
    if (!line.empty()) line.pop_back();
    return all;
  }

  JsonObject summary_json(const std::string& status, const std::string& message, int64_t steps, double wall,
                          double tok_s, double loss, const JsonObject& eval) const {
    JsonObject task_params, model, prov;
    for (const auto& spec : task_info_->params)
      if (task_params_.has_value(spec.name)) task_params.add(spec.name, task_params_.str(spec.name));
    JsonObject j;
    std::vector<std::string> names;
    for (int64_t l = 0; l < cfg_.model.n_layers; ++l) names.push_back(json_quote(to_string(cfg_.model.layer_attention(l))));
    const std::string layer_list = fmt::format("[{}]", fmt::join(names, ","));
    model.add("attention", to_string(cfg_.model.attention)).add_raw("layers", layer_list)
        .add("n_layers", cfg_.model.n_layers).add("d_model", cfg_.model.d_model).add("n_heads", cfg_.model.n_heads)
        .add("head_dim", cfg_.model.head_dim).add("params", engine_->model().params().num_params());
    prov.add("commit", sb::build_commit()).add("version", STATEBENCH_VERSION).add("device", device_)
        .add("date", utc_now()).add("command", opt_.command).add("host", host_name());
    j.add("status", status).add("message", message).add("steps", steps).add("target_steps", cfg_.train.steps)
        .add("wall_seconds", wall).add("tokens_per_second", tok_s).add("final_train_loss", loss)
        .add("task", cfg_.task.name).add("task_params", task_params).add("model", model)
        .add("seed", cfg_.train.seed).add("lr", cfg_.optim.lr)
        .add("config_fingerprint", fmt::format("{:016x}", config_fingerprint(cfg_)))
        .add("eval", eval).add("provenance", prov);
    return j;
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

TrainOutcome train(const TrainConfig& config, const TaskRegistry& tasks, const TrainOptions& options) {
  Trainer trainer(config, tasks, options);
  return trainer.run();
}

}  // namespace sb
