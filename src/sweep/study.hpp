// study.hpp: a sweep study read from YAML (docs/sweeps.md): a base train config, overrides for
// every cell, the varied axes (a Cartesian `grid` and an optional `zip` of lists varied together)
// and the protocol (grid, min_depth, max_lr) with its options. Parsing checks the study's own
// structure; the values of the axes are checked against the train config by make_plan().
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace sb::sweep {

enum class Protocol { grid, min_depth, max_lr };
const char* to_string(Protocol p);

// One value of an axis. `text` is the value as a YAML flow text (what follows '=' in --set
// key=value); `label` is the short form shown in cell names (the scalar itself, else the text).
struct AxisValue {
  std::string text, label;
  bool operator==(const AxisValue&) const = default;
};

struct Axis {
  std::string key;                // a train config key path, e.g. model.n_layers
  bool zipped = false;            // from `zip:` (varied together with the other zip axes)
  std::vector<AxisValue> values;  // never empty
};

// A protocol's metric "<eval key>.<field>" of summary.json's eval: FIELD token_accuracy or
// sequence_accuracy (higher is better; threshold in [0, 1]), error_rate (lower is better; [0, 1])
// or loss (lower is better; >= 0).
struct ProtocolMetric {
  std::string key, field;  // "val@64", "sequence_accuracy"
  bool higher_is_better = true;
};
// Splits at the last '.' and checks the field; sb::Error "METRIC: ..." otherwise.
ProtocolMetric parse_protocol_metric(const std::string& metric);

struct MinDepthOptions {
  std::string axis;                             // the depth axis (a grid axis with numeric values)
  double threshold = 0;                         // a depth reaches when its best metric >= threshold
                                                // (<= for error_rate and loss)
  std::string metric = "val.token_accuracy";    // <eval key>.<field> of summary.json's eval
  std::vector<std::string> best_over;           // axes the best is taken over (e.g. train.seed)
  // Run order (`order`): ascending (false) runs the depths upward and stops at the first that
  // reaches; deepest_first (true) runs the deepest depth first and, only if it reaches, the others
  // upward: a group that cannot learn at the deepest depth costs one depth, not all of them (the
  // shallower ones are taken as failing, as ascending takes the deeper ones as passing).
  bool deepest_first = false;
};

struct MaxLrOptions {
  std::string axis = "optim.lr";              // a grid axis
  std::string metric = "val.token_accuracy";  // the table takes the max of it over `axis`
  // Staged search when set: the `axis` values are tried in the order listed, one value at a time
  // per combination of the other axes (seeds together); once the mean metric over the seeds of one
  // value reaches stop_at, the later values of that combination are skipped.
  std::optional<double> stop_at;
};

struct Study {
  std::string file;       // the study file as given ("<string>" when parsed from text)
  std::string text;       // its contents
  std::string name;       // `name`, else the file's stem; [A-Za-z0-9._-]+
  std::string description;
  std::string base_file;  // `base` resolved against the study's directory; empty with `config:`
  std::string base_yaml;  // the base config's YAML text (the file's contents or the inline map)
  std::vector<std::string> plugins;  // `plugins`: task plugin files, resolved against the study's directory
  std::vector<std::string> set;  // "key=value" overrides applied to every cell, in order
  std::vector<Axis> axes;        // grid axes in file order, then zip axes in file order
  Protocol protocol = Protocol::grid;
  MinDepthOptions min_depth;     // when protocol == min_depth
  MaxLrOptions max_lr;           // when protocol == max_lr

  const Axis* find_axis(const std::string& key) const;  // nullptr if not an axis
  bool sets_key(const std::string& key) const;          // an axis or a `set` entry gives key
  size_t zip_length() const;                            // 0 without zip axes
};

// Reads and checks a study file. Errors are sb::Error, one line, starting "study 'FILE': ".
Study load_study(const std::string& path);
// The same from text; `file` names it in errors and `base_dir` resolves a relative `base`.
Study parse_study(const std::string& text, const std::string& file, const std::string& base_dir);

}  // namespace sb::sweep
