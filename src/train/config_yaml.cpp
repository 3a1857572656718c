// config_yaml.cpp: YAML -> TrainConfig mapping (typed reads with defaults, key paths in errors,
// unknown-key suggestions) and the `--set a.b=c` overrides applied to the YAML tree first.
// The struct definitions, validation and to_yaml() live in config.cpp.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "train/config.hpp"

namespace sb {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

std::string last_component(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// How a node is shown in "got ..." messages.
std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return "nothing";
}

struct Range {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string text(const char* what) const {
    const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
    if (has_lo && has_hi) return fmt::format("{} in {}{}, {}{}", what, lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
    if (has_lo) return fmt::format("{} {} {}", what, lo_open ? ">" : ">=", lo);
    if (has_hi) return fmt::format("{} {} {}", what, hi_open ? "<" : "<=", hi);
    return what;
  }
};

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE && std::isfinite(out);
}

bool parse_int(const std::string& s, int64_t& out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (!s.empty() && ec == std::errc() && ptr == s.data() + s.size()) return true;
  double d = 0;  // also accept integral reals such as 1e4
  if (parse_double(s, d) && d == std::floor(d) && std::fabs(d) <= 0x1p53) {
    out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

bool parse_bool(std::string s, bool& out) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "yes" || s == "on" || s == "1") return out = true, true;
  if (s == "false" || s == "no" || s == "off" || s == "0") return out = false, true;
  return false;
}

// State shared by all sections of one mapping: which key paths came from --set (for messages),
// and, when collecting, every known key path (for cross-section suggestions).
struct MapContext {
  std::vector<std::pair<std::string, std::string>> overrides;  // (key path, original "a.b=c")
  std::vector<std::string>* collect = nullptr;
  const std::vector<std::string>* all_paths = nullptr;
};

class Section {
 public:
  Section(YAML::Node node, std::string path, MapContext& ctx) : node_(std::move(node)), path_(std::move(path)), ctx_(ctx) {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
      fail("{}: expected a map of keys, got {}{}", path_, describe(node_), origin(path_));
  }

  // The raw node for `key` (undefined or null when absent); registers the key as known.
  YAML::Node raw(const std::string& key) {
    known_.push_back(key);
    if (ctx_.collect) ctx_.collect->push_back(join(path_, key));
    if (!node_.IsMap()) return YAML::Node();
    return node_[key];
  }
  static bool absent(const YAML::Node& n) { return !n.IsDefined() || n.IsNull(); }

  int64_t integer(const std::string& key, int64_t def, int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max()) {
    const YAML::Node n = raw(key);
    if (absent(n)) return def;
    int64_t v = 0;
    if (!n.IsScalar() || !parse_int(n.Scalar(), v) || v < lo || v > hi) {
      const std::string want = hi == std::numeric_limits<int64_t>::max() ? fmt::format("an integer >= {}", lo)
                                                                          : fmt::format("an integer in [{}, {}]", lo, hi);
      bad(key, want, n);
    }
    return v;
  }
  double real(const std::string& key, double def, Range r) {
    const YAML::Node n = raw(key);
    if (absent(n)) return def;
    double v = 0;
    if (!n.IsScalar() || !parse_double(n.Scalar(), v) || !r.contains(v)) bad(key, r.text("a number"), n);
    return v;
  }
  bool boolean(const std::string& key, bool def) {
    const YAML::Node n = raw(key);
    if (absent(n)) return def;
    bool v = false;
    if (!n.IsScalar() || !parse_bool(n.Scalar(), v)) bad(key, "true or false", n);
    return v;
  }
  std::string str(const std::string& key, const std::string& def) {
    const YAML::Node n = raw(key);
    if (absent(n)) return def;
    if (!n.IsScalar()) bad(key, "a string", n);
    return n.Scalar();
  }
  template <class E, size_t N>
  E choice(const std::string& key, E def, const std::array<E, N>& all) {
    const YAML::Node n = raw(key);
    if (absent(n)) return def;
    return parse_choice(key, n, all);
  }
  template <class E, size_t N>
  E parse_choice(const std::string& key, const YAML::Node& n, const std::array<E, N>& all) {
    if (n.IsScalar())
      for (E e : all)
        if (n.Scalar() == to_string(e)) return e;
    std::string names;
    for (E e : all) names += std::string(names.empty() ? "" : ", ") + to_string(e);
    bad(key, "one of " + names, n);
  }
  Section sub(const std::string& key) { return Section(raw(key), join(path_, key), ctx_); }

  [[noreturn]] void bad(const std::string& key, const std::string& want, const YAML::Node& got) const {
    const std::string p = join(path_, key);
    fail("{}: expected {}, got {}{}", p, want, describe(got), origin(p));
  }

  // Throws for the first key not read through this section, with a suggestion.
  void done() const {
    if (!node_.IsMap()) return;
    for (const auto& kv : node_) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : describe(kv.first);
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      const std::string p = join(path_, key);
      std::string set_by;
      for (const auto& [set_path, text] : ctx_.overrides)
        if (set_path == p || set_path.rfind(p + ".", 0) == 0) set_by = fmt::format("--set '{}': ", text);
      fail("{}unknown key '{}'{}", set_by, p, suggestion(key));
    }
  }

  const std::string& path() const { return path_; }
  MapContext& context() const { return ctx_; }

 private:
  std::string suggestion(const std::string& key) const {
    std::string best;
    size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
    for (const auto& k : known_) {
      size_t d = edit_distance(key, k);
      const bool prefix = std::min(key.size(), k.size()) >= 3 && (key.rfind(k, 0) == 0 || k.rfind(key, 0) == 0);
      if (prefix) d = std::min(d, best_d - 1);  // "optimizer" -> "optim"
      if (d < best_d) best_d = d, best = join(path_, k);
    }
    if (best.empty() && ctx_.all_paths)  // right name in the wrong section?
      for (const auto& p : *ctx_.all_paths)
        if (last_component(p) == key) {
          best = p;
          break;
        }
    return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
  }
  std::string origin(const std::string& p) const {
    for (const auto& [set_path, text] : ctx_.overrides)
      if (set_path == p || p.rfind(set_path + ".", 0) == 0 || p.rfind(set_path + "[", 0) == 0 ||
          set_path.rfind(p + ".", 0) == 0)
        return fmt::format(" (from --set '{}')", text);
    return "";
  }

  YAML::Node node_;
  std::string path_;
  MapContext& ctx_;
  std::vector<std::string> known_;
};

constexpr std::array<Attention, 6> kAttentions = {Attention::path, Attention::rope, Attention::nope, Attention::fox,
                                                   Attention::path_fox, Attention::sba};
constexpr std::array<MlpKind, 3> kMlps = {MlpKind::swiglu, MlpKind::gelu, MlpKind::none};
constexpr std::array<NormKind, 2> kNorms = {NormKind::rmsnorm, NormKind::layernorm};
constexpr std::array<NormPosition, 2> kNormPositions = {NormPosition::pre, NormPosition::post};
constexpr std::array<PositionKind, 2> kPositions = {PositionKind::none, PositionKind::learned};
constexpr std::array<SbaRemainder, 2> kSbaRemainders = {SbaRemainder::current, SbaRemainder::none};
constexpr std::array<InitScheme, 2> kInits = {InitScheme::normal, InitScheme::scaled};
constexpr std::array<LrSchedule, 3> kSchedules = {LrSchedule::cosine, LrSchedule::linear, LrSchedule::constant};
constexpr std::array<Device, 2> kDevices = {Device::cpu, Device::cuda};
constexpr std::array<Precision, 3> kPrecisions = {Precision::fp32, Precision::tf32, Precision::bf16};
constexpr std::array<TargetMetric, 2> kTargetMetrics = {TargetMetric::token_accuracy, TargetMetric::sequence_accuracy};
constexpr std::array<Shuffle, 2> kShuffles = {Shuffle::none, Shuffle::epoch};
constexpr std::array<PathRows, 3> kPathRows = {PathRows::automatic, PathRows::on, PathRows::off};

const Range kPositive{0, std::numeric_limits<double>::infinity(), true, false};
const Range kNonNegative{0, std::numeric_limits<double>::infinity(), false, false};

void map_task(Section s, TaskConfig& t) {
  const TaskConfig d;
  t.name = s.str("name", d.name);
  const YAML::Node params = s.raw("params");
  if (!Section::absent(params)) {
    if (!params.IsMap()) s.bad("params", "a map of task parameters", params);
    for (const auto& kv : params) {
      const std::string key = kv.first.Scalar();
      if (!kv.second.IsScalar()) s.bad("params." + key, "a single value", kv.second);
      t.params[key] = kv.second.Scalar();
    }
  }
  const YAML::Node eval = s.raw("eval");
  if (!Section::absent(eval)) {
    if (!eval.IsSequence()) s.bad("eval", "a list of {split, length, scale, examples} entries", eval);
    for (size_t i = 0; i < eval.size(); ++i) {
      EvalSplitConfig e;
      if (eval[i].IsScalar()) {  // shorthand: a bare split name
        e.split = eval[i].Scalar();
      } else {
        Section es(eval[i], fmt::format("{}.eval[{}]", s.path(), i), s.context());
        e.split = es.str("split", e.split);
        e.length = es.integer("length", 0, 0);
        e.scale = es.integer("scale", 0, 0);
        e.examples = es.integer("examples", 0, 0);
        es.done();
      }
      t.eval.push_back(e);
    }
  }
  s.done();
}

void map_model(Section s, ModelConfig& m) {
  const ModelConfig d;
  m.d_model = s.integer("d_model", d.d_model, 1);
  m.n_layers = s.integer("n_layers", d.n_layers, 1);
  m.n_heads = s.integer("n_heads", d.n_heads, 1);
  m.head_dim = s.integer("head_dim", d.head_dim, 0);
  m.mlp = s.choice("mlp", d.mlp, kMlps);
  m.mlp_ratio = s.real("mlp_ratio", d.mlp_ratio, kPositive);
  m.attention = s.choice("attention", d.attention, kAttentions);
  const YAML::Node layers = s.raw("layers");
  if (!Section::absent(layers)) {
    if (!layers.IsSequence()) s.bad("layers", "a list of attention kinds, one per layer", layers);
    for (size_t i = 0; i < layers.size(); ++i)
      m.layers.push_back(s.parse_choice(fmt::format("layers[{}]", i), layers[i], kAttentions));
  }
  m.norm = s.choice("norm", d.norm, kNorms);
  m.norm_position = s.choice("norm_position", d.norm_position, kNormPositions);
  m.position = s.choice("position", d.position, kPositions);
  m.max_len = s.integer("max_len", d.max_len, 0);
  m.tied_embeddings = s.boolean("tied_embeddings", d.tied_embeddings);
  {
    Section init = s.sub("init");
    m.init.scheme = init.choice("scheme", d.init.scheme, kInits);
    m.init.std = init.real("std", d.init.std, kPositive);
    m.init.gate_bias = init.real("gate_bias", d.init.gate_bias, Range{-30, 30});
    init.done();
  }
  m.rope_theta = s.real("rope_theta", d.rope_theta, kPositive);
  {
    Section path = s.sub("path");
    m.path.rank = path.integer("rank", d.path.rank, 1);
    m.path.beta_clamp = path.real("beta_clamp", d.path.beta_clamp, Range{0, 2, false, false});
    m.path.block = path.integer("block", d.path.block, 1);
    m.path.conv_bias = path.boolean("conv_bias", d.path.conv_bias);
    m.path.scale_gate = path.boolean("scale_gate", d.path.scale_gate);
    path.done();
  }
  {
    Section sba = s.sub("sba");
    m.sba.remainder = sba.choice("remainder", d.sba.remainder, kSbaRemainders);
    sba.done();
  }
  s.done();
}

void map_optim(Section s, OptimConfig& o) {
  const OptimConfig d;
  o.lr = s.real("lr", d.lr, kPositive);
  const YAML::Node betas = s.raw("betas");
  if (!Section::absent(betas)) {
    double b[2] = {0, 0};
    const bool ok = betas.IsSequence() && betas.size() == 2 && betas[0].IsScalar() && betas[1].IsScalar() &&
                    parse_double(betas[0].Scalar(), b[0]) && parse_double(betas[1].Scalar(), b[1]) &&
                    b[0] >= 0 && b[0] < 1 && b[1] >= 0 && b[1] < 1;
    if (!ok) s.bad("betas", "a list of two numbers in [0, 1), e.g. [0.9, 0.999]", betas);
    o.betas = {b[0], b[1]};
  }
  o.eps = s.real("eps", d.eps, kPositive);
  o.weight_decay = s.real("weight_decay", d.weight_decay, kNonNegative);
  o.warmup_steps = s.integer("warmup_steps", d.warmup_steps, 0);
  o.schedule = s.choice("schedule", d.schedule, kSchedules);
  o.min_lr_ratio = s.real("min_lr_ratio", d.min_lr_ratio, Range{0, 1, false, false});
  o.grad_clip = s.real("grad_clip", d.grad_clip, kNonNegative);
  s.done();
}

void map_train(Section s, TrainSettings& t) {
  const TrainSettings d;
  t.steps = s.integer("steps", d.steps, 1);
  t.batch_size = s.integer("batch_size", d.batch_size, 1);
  t.train_examples = s.integer("train_examples", d.train_examples, 0);
  t.shuffle = s.choice("shuffle", d.shuffle, kShuffles);
  t.seed = static_cast<uint64_t>(s.integer("seed", static_cast<int64_t>(d.seed), 0));
  t.log_every = s.integer("log_every", d.log_every, 0);
  t.eval_every = s.integer("eval_every", d.eval_every, 0);
  t.eval_examples = s.integer("eval_examples", d.eval_examples, 1);
  t.checkpoint_every = s.integer("checkpoint_every", d.checkpoint_every, 0);
  t.target_accuracy = s.real("target_accuracy", d.target_accuracy, Range{0, 1, false, false});
  t.device = s.choice("device", d.device, kDevices);
  t.threads = s.integer("threads", d.threads, 0, 4096);
  t.precision = s.choice("precision", d.precision, kPrecisions);
  t.cuda_graphs = s.boolean("cuda_graphs", d.cuda_graphs);
  t.path_rows = s.choice("path_rows", d.path_rows, kPathRows);
  t.target_metric = s.choice("target_metric", d.target_metric, kTargetMetrics);
  const YAML::Node target_eval = s.raw("target_eval");
  if (!Section::absent(target_eval)) {
    if (target_eval.IsScalar()) {  // shorthand: one key
      t.target_eval.push_back(target_eval.Scalar());
    } else {
      if (!target_eval.IsSequence()) s.bad("target_eval", "a list of eval keys, e.g. [val]", target_eval);
      for (size_t i = 0; i < target_eval.size(); ++i) {
        if (!target_eval[i].IsScalar() || target_eval[i].Scalar().empty())
          s.bad("target_eval", "a list of eval keys, e.g. [val]", target_eval);
        t.target_eval.push_back(target_eval[i].Scalar());
      }
    }
  }
  s.done();
}

TrainConfig map_config(const YAML::Node& root, MapContext& ctx) {
  TrainConfig c;
  Section top(root, "", ctx);
  map_task(top.sub("task"), c.task);
  map_model(top.sub("model"), c.model);
  map_optim(top.sub("optim"), c.optim);
  map_train(top.sub("train"), c.train);
  c.out_dir = top.str("out_dir", "");
  top.done();
  return c;
}

// Every key path of the schema (mapping an empty tree with collection on).
const std::vector<std::string>& all_key_paths() {
  static const std::vector<std::string> paths = [] {
    std::vector<std::string> out;
    MapContext ctx;
    ctx.collect = &out;
    map_config(YAML::Node(), ctx);
    return out;
  }();
  return paths;
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Applies one "a.b=c" override to the tree; returns the key path (a.b).
std::string apply_override(YAML::Node& root, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) fail("--set '{}': expected key.path=value", text);
  const std::string key = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const auto dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (parts.back().empty()) fail("--set '{}': empty component in key path '{}'", text, key);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    fail("--set '{}': value is not valid YAML: {}", text, e.msg);
  }
  if (!root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node cur;
  cur.reset(root);
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (cur.IsSequence()) {
      if (!is_index(part) || std::stoul(part) >= cur.size())
        fail("--set '{}': '{}' is a list of {} entries; '{}' is not an index into it", text, walked, cur.size(), part);
      const size_t idx = std::stoul(part);
      if (last) {
        cur[idx] = value;
      } else {
        YAML::Node next = cur[idx];
        cur.reset(next);
      }
    } else {
      if (cur.IsNull() || !cur.IsDefined()) cur = YAML::Node(YAML::NodeType::Map);
      if (!cur.IsMap()) fail("--set '{}': '{}' is a single value, not a section", text, walked);
      if (last) {
        cur[part] = value;
      } else {
        YAML::Node next = cur[part];
        if (!next.IsDefined() || next.IsNull()) {
          cur[part] = YAML::Node(YAML::NodeType::Map);
          next.reset(cur[part]);
        }
        cur.reset(next);
      }
    }
    walked = join(walked, part);
  }
  return key;
}

// A run shortened by --set train.steps=N (or a sweep axis) below its config's warm-up keeps a
// warm-up of a tenth of its steps instead of failing, unless the warm-up was set the same way.
void fit_warmup(TrainConfig& c, const MapContext& ctx, std::vector<std::string>* notes) {
  int64_t& warmup = c.optim.warmup_steps;
  const int64_t steps = c.train.steps;
  if (steps < 1 || warmup <= steps) return;
  auto overridden = [&](const std::string& key) {
    return std::any_of(ctx.overrides.begin(), ctx.overrides.end(), [&](const auto& o) { return o.first == key; });
  };
  if (!overridden("train.steps") || overridden("optim.warmup_steps")) return;
  const int64_t fitted = steps / 10;
  if (notes)
    notes->push_back(fmt::format("optim.warmup_steps {} exceeds train.steps = {}; warm-up shortened to {} steps "
                                 "(a tenth of the run; --set optim.warmup_steps=N to choose)",
                                 warmup, steps, fitted));
  warmup = fitted;
}

}  // namespace

TrainConfig parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                         const std::string& origin, std::vector<std::string>* notes) {
  try {
    YAML::Node root;
    try {
      root = YAML::Load(yaml_text);
    } catch (const YAML::ParserException& e) {
      fail("YAML syntax error at line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg);
    }
    if (root.IsDefined() && !root.IsNull() && !root.IsMap()) fail("expected a map of sections at the top level");
    MapContext ctx;
    ctx.all_paths = &all_key_paths();
    for (const auto& o : overrides) ctx.overrides.emplace_back(apply_override(root, o), o);
    TrainConfig config = map_config(root, ctx);
    fit_warmup(config, ctx, notes);
    resolve_and_validate(config);
    return config;
  } catch (const Error& e) {
    fail("config '{}': {}", origin, e.what());
  } catch (const YAML::Exception& e) {
    fail("config '{}': {}", origin, e.what());
  }
}

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides,
                        std::vector<std::string>* notes) {
  return parse_config(read_file(path), overrides, path, notes);
}

}  // namespace sb
