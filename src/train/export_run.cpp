// export_run.cpp: `statebench export` (see export_run.hpp). The metadata keys are documented in
// docs/run-format.md; tools/check_export.py reads them.
#include "train/export_run.hpp"

#include <map>
#include <vector>

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "model/transformer.hpp"
#include "nn/path_wpath.hpp"
#include "train/finished_run.hpp"

namespace sb {

namespace {

// The model as the PyTorch reference reads it (tools/torch_reference.py's config keys).
Json model_json(const ModelConfig& m, int64_t vocab) {
  Json layers = Json::array();
  for (int64_t l = 0; l < m.n_layers; ++l) layers.push_back(to_string(m.layer_attention(l)));
  return Json{{"vocab_size", vocab},
              {"d_model", m.d_model},
              {"n_layers", m.n_layers},
              {"n_heads", m.n_heads},
              {"head_dim", m.head_dim},
              {"layers", layers},
              {"mlp", to_string(m.mlp)},
              {"mlp_hidden", m.mlp_hidden()},
              {"norm", to_string(m.norm)},
              {"norm_eps", m.norm == NormKind::rmsnorm ? 1e-6 : 1e-5},
              {"tied_embeddings", m.tied_embeddings},
              {"rope_theta", m.rope_theta},
              {"path_rank", m.path.rank},
              {"l2norm_eps", nn::kPathWNormEps},
              {"beta_clamp", m.path.beta_clamp},
              {"conv_bias", m.path.conv_bias}};
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Examples 0..n-1 of `split` (train.seed, the training length) and the float64 model's logits.
std::vector<SafeTensor> check_tensors(const FinishedRun& run, const Task& task, const std::string& split, int64_t n,
                                      ExportResult& result) {
  const int64_t T = task.seq_len(), V = task.vocab_size();
  std::vector<int32_t> ids(n * T), labels(n * T);
  std::vector<uint8_t> mask(n * T);
  fill_examples(task, task.split_index(split), run.config.train.seed, 0, n, ids.data(), labels.data(), mask.data());
  Transformer<double> model(run.config.model, V);
  load_run_parameters(run, model.params());
  TransformerRunner<double> runner(model, n, T);
  runner.forward(ids.data(), nullptr);  // no labels: logits of every position, in order
  std::vector<int32_t> mask32(mask.begin(), mask.end());
  result.check_examples = n;
  result.check_length = T;
  return {safe_tensor("input_ids", {n, T}, ids.data()), safe_tensor("labels", {n, T}, labels.data()),
          safe_tensor("score_mask", {n, T}, mask32.data()), safe_tensor("logits", {n, T, V}, runner.logits())};
}

}  // namespace

ExportResult export_run(const std::string& dir, const TaskRegistry& tasks, const ExportOptions& options) {
  if (options.out.empty()) fail("-o: the output file is required");
  if (options.check_examples < 1 || options.check_examples > 4096)
    fail("--check-examples: expected a number in [1, 4096], got {}", options.check_examples);
  const FinishedRun run = open_finished_run(dir);
  const TrainConfig& cfg = run.config;
  const TaskInfo& info = tasks.get(cfg.task.name);
  const Params task_params(fmt::format("task '{}'", cfg.task.name), info.params, cfg.task.params);
  const auto task = info.create(task_params);
  const int64_t V = task->vocab_size();
  const std::string split = options.check_split.empty() ? cfg.task.eval.front().split : options.check_split;
  task->split_index(split);  // an unknown split fails before anything is written
  if (options.check_length < 0) fail("--check-length: expected a number >= 1, got {}", options.check_length);

  Transformer<float> model(cfg.model, V);
  load_run_parameters(run, model.params());
  ExportResult result;
  result.vocab = V;
  result.params = model.params().num_params();
  std::vector<SafeTensor> tensors;
  for (const ParamView& v : model.params().views())
    tensors.push_back(safe_tensor(v.name, v.shape, model.params().params() + v.offset));
  result.tensors = static_cast<int64_t>(tensors.size());

  Json params = Json::object();
  for (const ParamSpec& spec : info.params)
    if (task_params.has_value(spec.name)) params[spec.name] = task_params.str(spec.name);
  const std::map<std::string, std::string> metadata{
      {"format", "pt"},
      {"statebench.model", dump(model_json(cfg.model, V))},
      {"statebench.task", dump(Json{{"name", cfg.task.name}, {"params", params}, {"seq_len", task->seq_len()},
                                    {"vocab", task->vocab()}})},
      {"statebench.config", to_yaml(cfg)},
      {"statebench.step", std::to_string(run.checkpoint.state.step)},
      {"statebench.version", STATEBENCH_VERSION},
      {"statebench.commit", build_commit()}};

  std::vector<SafeTensor> check;
  if (!options.check_data.empty()) {
    const auto check_task =
        options.check_length > 0 ? tasks.create_at_length(cfg.task.name, cfg.task.params, options.check_length) : nullptr;
    if (check_task && check_task->vocab_size() != V)
      fail("--check-length {}: the task's vocabulary size {} differs from training's {}", options.check_length,
           check_task->vocab_size(), V);
    check = check_tensors(run, check_task ? *check_task : *task, split, options.check_examples, result);
  }
  write_safetensors(options.out, tensors, metadata);
  if (!options.check_data.empty())
    write_safetensors(options.check_data, check,
                      {{"statebench.check", "logits of the float64 CPU model with the exported float32 parameters"},
                       {"statebench.split", split},
                       {"statebench.seed", std::to_string(cfg.train.seed)}});
  return result;
}

}  // namespace sb
