// evaluation.cpp: evaluation sets and their scoring (see evaluation.hpp).
#include "train/evaluation.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/error.hpp"

namespace sb {

namespace {

// The effective value (given or default) of the task's length parameter, as written.
std::string length_value(const TaskInfo& info, const TaskConfig& task) {
  const Params p(fmt::format("task '{}'", info.name), info.params, task.params);
  return p.has_value(info.length_param) ? p.str(info.length_param) : "";
}

}  // namespace

void resolve_eval_lengths(TrainConfig& c, const TaskRegistry& tasks) {
  auto& evals = c.task.eval;
  for (size_t i = 0; i < evals.size(); ++i) {
    EvalSplitConfig& e = evals[i];
    if (e.scale == 0) continue;
    const std::string where = fmt::format("task.eval[{}] (split '{}', scale {})", i, e.split, e.scale);
    try {
      const TaskInfo& info = tasks.get(c.task.name);
      if (info.length_param.empty())  // params_at_length's error, without a length to name
        fail("task '{}' ({}) has a fixed length: it declares no length parameter, so it cannot be evaluated at "
             "another length (a plugin names one with length_param(); docs/adding-a-task.md)",
             c.task.name, info.origin);
      const std::string value = length_value(info, c.task);
      int64_t length = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() || length < 1)
        fail("task '{}' parameter '{}' is '{}', not an integer length to scale", c.task.name, info.length_param, value);
      if (length > std::numeric_limits<int64_t>::max() / e.scale)
        fail("task '{}' length {} x {} overflows", c.task.name, length, e.scale);
      e.length = length * e.scale;
      e.scale = 0;
    } catch (const Error& err) {
      fail("{}: {}", where, err.what());
    }
  }
  for (size_t i = 0; i < evals.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (evals[j].split == evals[i].split && evals[j].length == evals[i].length)
        fail("task.eval[{}]: duplicates task.eval[{}] (split '{}', length {})", i, j, evals[i].split, evals[i].length);
  check_target_eval(c);
}

EvalSet make_eval_set(const TaskRegistry& tasks, const TaskConfig& task, const Task& train_task,
                      const EvalSplitConfig& e, int64_t default_examples, const std::string& where) {
  EvalSet set;
  set.key = eval_key(e);
  try {
    if (e.length > 0) {
      const TaskInfo& info = tasks.get(task.name);
      set.task = tasks.create_at_length(task.name, task.params, e.length);
      // A parameter that does not set the length would silently evaluate at the training length.
      if (set.task->seq_len() == train_task.seq_len() && length_value(info, task) != std::to_string(e.length))
        fail("setting task '{}' parameter '{}' to {} left its sequence length at {}: '{}' does not set the length "
             "(docs/adding-a-task.md)",
             task.name, info.length_param, e.length, train_task.seq_len(), info.length_param);
    } else {
      set.task = tasks.create(task.name, task.params);
    }
    set.split = set.task->split_index(e.split);
  } catch (const Error& err) {
    fail("{} (split '{}'{}): {}", where, e.split, e.length > 0 ? fmt::format(", length {}", e.length) : "", err.what());
  }
  set.examples = e.examples > 0 ? e.examples : default_examples;
  set.length = set.task->seq_len();
  if (set.task->vocab_size() != train_task.vocab_size())
    fail("{} '{}': vocabulary size {} differs from training's {}", where, set.key, set.task->vocab_size(),
         train_task.vocab_size());
  return set;
}

void check_learned_positions(const ModelConfig& m, int64_t train_length, const std::vector<EvalSet>& sets) {
  const ModelConfig model = resolve_max_len(m, train_length);
  if (model.position != PositionKind::learned) return;
  if (model.max_len < train_length)
    fail("model.max_len: {} learned positions are fewer than the training sequences' {} tokens", model.max_len,
         train_length);
  for (const auto& e : sets)
    if (e.length > model.max_len)
      fail("model.max_len: evaluation '{}' has sequences of {} tokens, more than the {} learned positions "
           "(model.max_len, 0 = the training length {})", e.key, e.length, model.max_len, train_length);
}

void generate_eval_set(EvalSet& set, uint64_t seed) {
  const int64_t n = set.examples * set.length;
  set.ids.resize(n), set.labels.resize(n), set.mask.resize(n);
  fill_examples(*set.task, set.split, seed, 0, set.examples, set.ids.data(), set.labels.data(), set.mask.data());
}

EvalSummary evaluate_set(TrainEngine& engine, const EvalSet& set, int64_t batch_size, int64_t train_length) {
  EvalCounts counts;
  const int64_t chunk = eval_chunk(set.examples, set.length, batch_size, train_length, engine.eval_batch_tokens());
  for (int64_t first = 0; first < set.examples; first += chunk) {
    const int64_t n = std::min(chunk, set.examples - first);
    const int64_t off = first * set.length;
    engine.evaluate(set.ids.data() + off, set.labels.data() + off, set.mask.data() + off, n, set.length, counts);
  }
  return EvalSummary::from_counts(counts, set.task->splits()[set.split].name, set.length, set.examples);
}

int64_t eval_chunk(int64_t examples, int64_t length, int64_t batch, int64_t train_length, int64_t engine_tokens) {
  const int64_t tokens = length == train_length ? std::max(batch * train_length, engine_tokens) : engine_tokens;
  return std::max<int64_t>(1, std::min(examples, tokens / std::max<int64_t>(1, length)));
}

}  // namespace sb
