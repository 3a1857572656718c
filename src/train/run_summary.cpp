// run_summary.cpp: summary.json to and from JSON (see run_summary.hpp). Keys are written in the
// order of docs/run-format.md; absent optional fields are not written.
#include "train/run_summary.hpp"

#include <cmath>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"

namespace sb {

namespace {

Json interval_json(const Interval& i) { return Json::array({json_number_value(i.lo), json_number_value(i.hi)}); }

std::optional<Interval> read_interval(const Json& v, const std::string& what) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array() || v.size() != 2) fail("'{}': expected [lo, hi], got {}", what, v.dump());
  const double lo = json_number(v[0], what), hi = json_number(v[1], what);
  if (std::isnan(lo) || std::isnan(hi)) return std::nullopt;
  return Interval{lo, hi};
}

int64_t read_count(const Json& v, const std::string& what) { return v.is_null() ? -1 : json_integer(v, what); }

// Reads `key` of `j` with `read` when present.
template <class F>
void with(const Json& j, const char* key, F&& read) {
  if (const Json* v = json_field(j, key)) read(*v);
}

// One "eval" entry; `where` prefixes the field names in errors ("eval.val.").
EvalSummary read_eval(const Json& j, const std::string& where) {
  if (!j.is_object())
    fail("'{}': expected an object, got {}", where.empty() ? "eval" : where.substr(0, where.size() - 1), j.dump());
  EvalSummary e;
  auto number = [&](const char* key, double& out) {
    with(j, key, [&](const Json& v) { out = json_number(v, where + key); });
  };
  auto count = [&](const char* key, int64_t& out) {
    with(j, key, [&](const Json& v) { out = read_count(v, where + key); });
  };
  auto interval = [&](const char* key, std::optional<Interval>& out) {
    with(j, key, [&](const Json& v) { out = read_interval(v, where + key); });
  };
  number("token_accuracy", e.token_accuracy);
  number("sequence_accuracy", e.sequence_accuracy);
  count("scored", e.scored);
  count("errors", e.errors);
  number("error_rate", e.error_rate);
  interval("error_ci95", e.error_ci95);
  count("sequences", e.sequences);
  count("sequence_errors", e.sequence_errors);
  interval("sequence_error_ci95", e.sequence_error_ci95);
  number("loss", e.loss);
  with(j, "split", [&](const Json& v) { e.split = json_text(v); });
  with(j, "length", [&](const Json& v) { e.length = v.is_null() ? 0 : json_integer(v, where + "length"); });
  with(j, "examples", [&](const Json& v) { e.examples = v.is_null() ? 0 : json_integer(v, where + "examples"); });
  return e;
}

using CountField = std::pair<const char*, std::optional<int64_t> ModelSummary::*>;
constexpr CountField kModelCounts[] = {{"n_layers", &ModelSummary::n_layers}, {"d_model", &ModelSummary::d_model},
                                       {"n_heads", &ModelSummary::n_heads},   {"head_dim", &ModelSummary::head_dim},
                                       {"params", &ModelSummary::params}};
using TextField = std::pair<const char*, std::string Provenance::*>;
constexpr TextField kProvenance[] = {{"commit", &Provenance::commit}, {"version", &Provenance::version},
                                     {"device", &Provenance::device}, {"date", &Provenance::date},
                                     {"command", &Provenance::command}, {"host", &Provenance::host}};

}  // namespace

EvalSummary EvalSummary::from_counts(const EvalCounts& c, std::string split, int64_t length, int64_t examples) {
  EvalSummary e;
  e.token_accuracy = c.token_accuracy();
  e.sequence_accuracy = c.sequence_accuracy();
  e.scored = c.scored;
  e.errors = c.errors();
  e.error_rate = c.error_rate();
  e.error_ci95 = c.error_interval();
  e.sequences = c.sequences;
  e.sequence_errors = c.sequences - c.sequences_correct;
  e.sequence_error_ci95 = c.sequence_error_interval();
  e.loss = c.mean_loss();
  e.split = std::move(split);
  e.length = length;
  e.examples = examples;
  return e;
}

std::optional<double> EvalSummary::number(const std::string& field) const {
  auto known = [](double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); };
  auto count = [](int64_t v) { return v < 0 ? std::nullopt : std::optional<double>(static_cast<double>(v)); };
  if (field == "token_accuracy") return known(token_accuracy);
  if (field == "sequence_accuracy") return known(sequence_accuracy);
  if (field == "error_rate") return known(error_rate);
  if (field == "loss") return known(loss);
  if (field == "scored") return count(scored);
  if (field == "errors") return count(errors);
  if (field == "sequences") return count(sequences);
  if (field == "sequence_errors") return count(sequence_errors);
  if (field == "length") return length > 0 ? std::optional<double>(static_cast<double>(length)) : std::nullopt;
  if (field == "examples") return examples > 0 ? std::optional<double>(static_cast<double>(examples)) : std::nullopt;
  return std::nullopt;
}

void to_json(Json& j, const EvalSummary& e) {
  j = Json::object();
  j["token_accuracy"] = json_number_value(e.token_accuracy);
  j["sequence_accuracy"] = json_number_value(e.sequence_accuracy);
  if (e.scored >= 0) j["scored"] = e.scored;
  if (e.errors >= 0) j["errors"] = e.errors;
  j["error_rate"] = json_number_value(e.error_rate);
  if (e.error_ci95) j["error_ci95"] = interval_json(*e.error_ci95);
  if (e.sequences >= 0) j["sequences"] = e.sequences;
  if (e.sequence_errors >= 0) j["sequence_errors"] = e.sequence_errors;
  if (e.sequence_error_ci95) j["sequence_error_ci95"] = interval_json(*e.sequence_error_ci95);
  j["loss"] = json_number_value(e.loss);
  if (!e.split.empty()) j["split"] = e.split;
  if (e.length > 0) j["length"] = e.length;
  if (e.examples > 0) j["examples"] = e.examples;
}

void from_json(const Json& j, EvalSummary& e) { e = read_eval(j, ""); }

const EvalSummary* RunSummary::find_eval(const std::string& key) const {
  for (const auto& [k, e] : eval)
    if (k == key) return &e;
  return nullptr;
}

void to_json(Json& j, const RunSummary& s) {
  j = Json::object();
  j["status"] = s.status;
  j["message"] = s.message;
  if (s.steps) j["steps"] = *s.steps;
  if (s.target_steps) j["target_steps"] = *s.target_steps;
  if (s.wall_seconds) j["wall_seconds"] = json_number_value(*s.wall_seconds);
  if (s.tokens_per_second) j["tokens_per_second"] = json_number_value(*s.tokens_per_second);
  if (s.final_train_loss) j["final_train_loss"] = json_number_value(*s.final_train_loss);
  if (s.task) {
    j["task"] = *s.task;
    Json params = Json::object();
    for (const auto& [k, v] : s.task_params) params[k] = v;
    j["task_params"] = std::move(params);
  }
  if (s.model) {
    const ModelSummary& m = *s.model;
    Json model = Json::object();
    model["attention"] = m.attention;
    model["layers"] = m.layers;
    for (const auto& [key, field] : kModelCounts)
      if (m.*field) model[key] = *(m.*field);
    j["model"] = std::move(model);
  }
  if (s.seed) j["seed"] = *s.seed;
  if (s.lr) j["lr"] = json_number_value(*s.lr);
  if (s.config_fingerprint) j["config_fingerprint"] = *s.config_fingerprint;
  Json eval = Json::object();
  for (const auto& [key, e] : s.eval) eval[key] = e;
  j["eval"] = std::move(eval);
  if (s.provenance) {
    const Provenance& p = *s.provenance;
    Json prov = Json::object();
    for (const auto& [key, field] : kProvenance) prov[key] = p.*field;
    if (!p.plugins.empty()) prov["plugins"] = p.plugins;
    if (p.slurm) {
      Json slurm = Json::object();
      slurm["job_id"] = p.slurm->job_id;
      if (!p.slurm->array_job_id.empty()) slurm["array_job_id"] = p.slurm->array_job_id;
      if (p.slurm->array_task_id) slurm["array_task_id"] = *p.slurm->array_task_id;
      prov["slurm"] = std::move(slurm);
    }
    j["provenance"] = std::move(prov);
  }
  if (s.signal) j["signal"] = *s.signal;
  if (s.exit_code) j["exit_code"] = *s.exit_code;
  if (s.log_tail) j["log_tail"] = *s.log_tail;
  if (s.written_by) j["written_by"] = *s.written_by;
}

void from_json(const Json& j, RunSummary& s) {
  if (!j.is_object()) fail("expected a JSON object");
  s = RunSummary{};
  auto optional_integer = [&](const char* key, std::optional<int64_t>& out) {
    with(j, key, [&](const Json& v) {
      if (!v.is_null()) out = json_integer(v, key);
    });
  };
  auto optional_number = [&](const char* key, std::optional<double>& out) {
    with(j, key, [&](const Json& v) { out = json_number(v, key); });
  };
  auto optional_string = [&](const char* key, std::optional<std::string>& out) {
    with(j, key, [&](const Json& v) {
      if (!v.is_null()) out = json_text(v);
    });
  };
  with(j, "status", [&](const Json& v) { s.status = json_string(v, "status"); });
  with(j, "message", [&](const Json& v) { s.message = json_text(v); });
  optional_integer("steps", s.steps);
  optional_integer("target_steps", s.target_steps);
  optional_number("wall_seconds", s.wall_seconds);
  optional_number("tokens_per_second", s.tokens_per_second);
  optional_number("final_train_loss", s.final_train_loss);
  optional_string("task", s.task);
  with(j, "task_params", [&](const Json& v) {
    if (v.is_null()) return;
    if (!v.is_object()) fail("'task_params': expected an object, got {}", v.dump());
    for (const auto& [k, x] : v.items())
      if (!x.is_object()) s.task_params.emplace_back(k, json_text(x));
  });
  with(j, "model", [&](const Json& v) {
    if (v.is_null()) return;
    if (!v.is_object()) fail("'model': expected an object, got {}", v.dump());
    ModelSummary m;
    with(v, "attention", [&](const Json& x) { m.attention = json_text(x); });
    with(v, "layers", [&](const Json& x) {
      if (x.is_array())
        for (const Json& l : x) m.layers.push_back(json_text(l));
      else if (!x.is_null())
        m.layers.push_back(json_text(x));
    });
    for (const auto& [key, field] : kModelCounts)
      with(v, key, [&](const Json& x) {
        if (!x.is_null()) m.*field = json_integer(x, std::string("model.") + key);
      });
    s.model = std::move(m);
  });
  optional_integer("seed", s.seed);
  with(j, "lr", [&](const Json& v) {
    const double lr = json_number(v, "lr");
    if (!std::isnan(lr)) s.lr = lr;
  });
  optional_string("config_fingerprint", s.config_fingerprint);
  with(j, "eval", [&](const Json& v) {
    if (v.is_null()) return;
    if (!v.is_object()) fail("'eval': expected an object");
    for (const auto& [key, e] : v.items()) s.eval.emplace_back(key, read_eval(e, "eval." + key + "."));
  });
  with(j, "provenance", [&](const Json& v) {
    if (!v.is_object()) return;
    Provenance p;
    for (const auto& [key, field] : kProvenance) with(v, key, [&](const Json& x) { p.*field = json_text(x); });
    with(v, "plugins", [&](const Json& x) {
      if (!x.is_array()) fail("'provenance.plugins': expected a list of files, got {}", x.dump());
      for (const Json& f : x) p.plugins.push_back(json_text(f));
    });
    with(v, "slurm", [&](const Json& x) {
      if (!x.is_object()) fail("'provenance.slurm': expected an object, got {}", x.dump());
      SlurmJob job;
      with(x, "job_id", [&](const Json& y) { job.job_id = json_text(y); });
      with(x, "array_job_id", [&](const Json& y) { job.array_job_id = json_text(y); });
      with(x, "array_task_id", [&](const Json& y) {
        if (!y.is_null()) job.array_task_id = json_integer(y, "provenance.slurm.array_task_id");
      });
      p.slurm = std::move(job);
    });
    s.provenance = std::move(p);
  });
  optional_integer("signal", s.signal);
  optional_integer("exit_code", s.exit_code);
  optional_string("log_tail", s.log_tail);
  optional_string("written_by", s.written_by);
}

RunSummary parse_run_summary(const std::string& text) { return parse_json(text).get<RunSummary>(); }

RunSummary read_run_summary(const std::string& path) { return parse_run_summary(read_file(path)); }

void write_run_summary(const std::string& path, const RunSummary& summary) {
  write_file_atomic(path, Json(summary).dump() + "\n");
}

}  // namespace sb
