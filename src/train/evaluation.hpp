// evaluation.hpp: evaluation sets (one split of the task at one length, its examples generated
// once) and scoring a model on them. The training loop evaluates its task.eval entries with these at
// intervals; `statebench eval` scores a finished run's checkpoint on further splits and lengths.
// Another length goes through the task's declared length parameter (TaskRegistry::create_at_length);
// an entry's scale (a multiple of the training length) is resolved into such a length first.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tasks/registry.hpp"
#include "train/config.hpp"
#include "train/engine.hpp"
#include "train/run_summary.hpp"

namespace sb {

struct EvalSet {
  std::string key;  // "val" (the training length), "val@512"
  std::unique_ptr<Task> task;
  int split = 0;
  int64_t examples = 0, length = 0;  // length: the task's seq_len
  std::vector<int32_t> ids, labels;  // [examples, length] once generated
  std::vector<uint8_t> mask;
};

// Resolves every task.eval entry with a scale into its length (scale x the value of the task's
// length parameter; scale becomes 0), then checks duplicates and train.target_eval against the final
// keys. sb::Error naming task.eval[i] for a task without an integer length parameter. Idempotent.
void resolve_eval_lengths(TrainConfig& config, const TaskRegistry& tasks);

// The evaluation set of entry `e` for a run of `task` (whose training instance is `train_task`):
// the task itself, or at e.length > 0 a new instance with the task's length parameter set to it.
// sb::Error starting with `where` (e.g. "task.eval[1]") for a task of fixed length, a length
// parameter that does not change the length, an unknown split, or another vocabulary size.
EvalSet make_eval_set(const TaskRegistry& tasks, const TaskConfig& task, const Task& train_task,
                      const EvalSplitConfig& e, int64_t default_examples, const std::string& where);

// With learned positions (model.position: learned) every sequence must fit model.max_len (0 = the
// training length): sb::Error naming model.max_len otherwise.
void check_learned_positions(const ModelConfig& model, int64_t train_length, const std::vector<EvalSet>& sets);

// Generates the set's examples 0 .. examples-1 of its split under `seed` (train.seed).
void generate_eval_set(EvalSet& set, uint64_t seed);

// Scores the engine's current model on a generated set, in chunks (eval_chunk).
EvalSummary evaluate_set(TrainEngine& engine, const EvalSet& set, int64_t batch_size, int64_t train_length);

// Sequences per evaluation chunk of an eval set at `length` (at least one, at most `examples`). At
// the training length, chunks fill the training batch's buffers (batch x train_length tokens, or the
// engine's evaluation budget if larger). At any other length an engine needs separate buffers, so
// chunks hold the engine's budget of tokens (`engine_tokens`): evaluating a model trained at 128 on
// length 512 must not build buffers for 1024 x 512 tokens (that ran 8 sweep cells out of H100 memory).
int64_t eval_chunk(int64_t examples, int64_t length, int64_t batch, int64_t train_length, int64_t engine_tokens);

}  // namespace sb
