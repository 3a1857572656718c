// results.hpp: loading finished runs into flat records for tables and plots. A study directory is
// a sweep (manifest.json + cells/<id>/, or its summaries packed in cells.jsonl.gz as in
// results/), a directory of run directories (cells/*/ or */), or a single run directory (summary.json); each
// run's summary (docs/run-format.md) becomes one RunRecord. docs/tables.md documents what is read
// and how missing or corrupt files are handled.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "train/stats.hpp"

namespace sb::report {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One EVAL object of summary.json's "eval" map. Missing numbers are NaN, missing counts -1.
struct EvalResult {
  std::string key;    // "val", "sparse", "val@512"
  std::string split;  // the key without "@LENGTH"
  int64_t at_length = 0;  // LENGTH of "@LENGTH"; 0 = evaluated at the training length
  double token_accuracy = kNaN, sequence_accuracy = kNaN, error_rate = kNaN, loss = kNaN;
  int64_t scored = -1, errors = -1, sequences = -1, sequence_errors = -1;
  std::optional<Interval> error_ci95;  // as written by the run (exact 95% bound)
};

// An EvalResult of evaluation key KEY (split and length parsed from it), its values unknown.
EvalResult eval_of_key(const std::string& key);

enum class RunStatus {
  completed,      // summary.json status "completed"
  early_stopped,  // "early_stopped" (reached train.target_accuracy)
  diverged,       // "diverged": non-finite loss or gradient; its eval is not used
  failed,         // "failed": its eval is not used
  unfinished,     // a run directory without summary.json (crashed or still running)
  missing,        // a manifest cell whose directory does not exist
  skipped,        // a manifest cell its protocol decided not to run (min_depth: a smaller depth reached)
  unreadable,     // summary.json could not be parsed (skipped with a warning)
};
const char* to_string(RunStatus s);
// completed or early-stopped: the final evaluation is a result.
bool has_result(RunStatus s);
// unfinished, missing or unreadable: nothing is known yet.
bool is_pending(RunStatus s);

struct RunRecord {
  std::string id;   // manifest cell id, else the run directory's name
  std::string dir;  // the run directory (for a packed cell: where it would be, DIR/cells/<id>)
  std::string source;  // where its summary was read, quoted, for messages: "'D/summary.json'",
                       // "'DIR/cells.jsonl.gz' line 3 (cell ID)"; "" when none was
  std::string study_dir;  // the directory given to load_study that holds it (its curves.jsonl.gz)
  RunStatus status = RunStatus::missing;
  std::string message;  // summary.json "message" (why it diverged or failed)
  std::string attention;            // model.attention
  std::vector<std::string> layers;  // model.layers (per-layer attention; may be empty)
  int64_t depth = 0;                // model.n_layers (0 = unknown)
  int64_t train_length = 0;         // task_params.length (0 = unknown)
  std::optional<int64_t> seed;      // train.seed
  std::optional<double> lr;         // optim.lr
  std::optional<int64_t> steps;     // summary.json "steps": optimizer steps taken (early stops end sooner)
  std::string fingerprint;          // summary.json "config_fingerprint" (the training config, seed included); "" if absent
  // Other settings that may tell runs apart, by config key ("task.name", "task.params.group",
  // "model.d_model", or any manifest override key): see Study::model_label.
  std::map<std::string, std::string> settings;
  std::vector<EvalResult> evals;  // in summary.json order
  std::string model;              // display label (filled by load_study)

  const EvalResult* eval(const std::string& key) const;  // nullptr if absent
  // The attention kind, or the per-layer list joined with '+' when layers differ ("path+rope").
  std::string attention_label() const;
};

// What manifest.json says about the study (all optional).
struct StudyInfo {
  std::string name;                    // "study", else the directory name
  std::string protocol;                // "grid" | "min_depth" | "max_lr" | "" (no manifest)
  std::optional<double> threshold;     // protocol_options.threshold
  std::string metric;                  // protocol_options.metric ("val.token_accuracy")
  std::string axis;                    // protocol_options.axis
  std::vector<std::string> best_over;  // protocol_options.best_over
  std::vector<std::string> axes;       // "axes"
  bool has_manifest = false;
};

struct Study {
  std::string dir;
  StudyInfo info;
  std::vector<RunRecord> runs;         // manifest order, else sorted by directory name
  std::vector<std::string> eval_keys;  // union over runs with a result, first-seen order
  std::vector<std::string> models;     // model labels, first-seen order
  // Settings that are a function of the train length: >= 2 values, and every run of one length has
  // the same value (a sweep `zip:` axis such as task.params.num_kv_pairs with task.params.length).
  // They stay out of the model labels and go with the length column instead: config keys, and per
  // train length key -> value (a key is absent where that length's runs lack the setting).
  std::vector<std::string> length_keys;
  std::map<int64_t, std::map<std::string, std::string>> length_settings;
  std::vector<std::string> warnings;   // one line each (skipped files, unknown statuses)
};

struct LoadOptions {
  bool strict = false;  // a corrupt summary.json is an error instead of a warning and a skip
};

// Loads DIR (see the header comment). sb::Error naming the file for an unreadable manifest.json,
// a missing directory, or DIR holding no run at all ("no runs found in 'DIR'").
Study load_study(const std::string& dir, const LoadOptions& options = {});

// Loads several directories as one study (`statebench table A B ...`, e.g. a study and a later one
// that adds seeds): their runs pooled, so that runs of one model, depth and length from different
// directories average together; the first directory's manifest information (protocol, metric,
// threshold: a warning names each directory whose differ), the names joined by " + ". sb::Error
// when a directory is given twice, or when two directories hold a run of the same table cell (model
// label, depth, length, learning rate) and seed: pooled, that seed would count twice. Runs get a
// "train.steps" setting from summary.json's target_steps, so studies trained for different numbers
// of steps keep apart ("path (steps=30000)"). One directory: load_study.
Study load_studies(const std::vector<std::string>& dirs, const LoadOptions& options = {});

// A setting's name in labels: the config key's last part ("model.d_model" -> "d_model").
std::string setting_name(const std::string& key);
// The length-bound settings of train length L as "num_kv_pairs=4" (short names, ", " between
// several, in key order); "" when Study::length_keys is empty or L's runs lack them.
std::string length_settings_text(const Study& study, int64_t length);
// The short names of Study::length_keys, in that order ("num_kv_pairs").
std::vector<std::string> length_key_names(const Study& study);
// The value of each Study::length_keys setting at train length L, in that order; "-" where absent.
std::vector<std::string> length_setting_values(const Study& study, int64_t length);

// The runs that give no value for eval key `key`, one line each: "ID (MODEL, depth D, L = T, seed
// S): why" (unfinished, not run, unreadable summary.json, diverged, failed, or finished without
// that evaluation). Runs the protocol skipped are not listed. Study order.
std::vector<std::string> unused_runs(const Study& study, const std::string& key);

// Parses one summary.json text into `record` (status, model, task, seed, lr, eval). sb::Error with
// a one-line reason if the text is not a JSON object or a field has the wrong type.
void parse_summary(const std::string& text, RunRecord& record);
void parse_summary(const nlohmann::ordered_json& summary, RunRecord& record);  // the same, parsed

// Sets the record field a config key controls ("model.attention", "model.layers",
// "model.n_layers", "task.params.length", "train.seed", "optim.lr"); other keys go to settings.
// `value` is a scalar or a YAML/JSON flow list ("[path, rope]"). sb::Error for a bad number.
void apply_setting(RunRecord& record, const std::string& key, const std::string& value);

}  // namespace sb::report
