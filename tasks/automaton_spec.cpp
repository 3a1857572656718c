// automaton_spec.cpp: reading and validating an automaton YAML file (schema in automaton_spec.hpp).
// Every problem is reported once, as "automaton file 'F', line L: key.path: what is wrong".
#include "tasks/automaton_spec.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.hpp"

namespace sb {
namespace {

constexpr size_t kMaxNames = 1u << 16;        // per list (states, alphabet)
constexpr size_t kMaxTableEntries = 1u << 24;  // |states| * |alphabet|

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

class SpecReader {
 public:
  explicit SpecReader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void error(const YAML::Node& at, const std::string& path, const std::string& what) const {
    const YAML::Mark mark = at.Mark();
    const std::string where = path.empty() ? "(top level)" : path;
    if (mark.is_null()) fail("automaton file '{}': {}: {}", origin_, where, what);
    fail("automaton file '{}', line {}: {}: {}", origin_, mark.line + 1, where, what);
  }

  // A non-empty scalar, the text of a name; `what` says what it names ("a state name").
  std::string name(const YAML::Node& node, const std::string& path, const char* what) const {
    if (!node.IsScalar() || node.Scalar().empty()) error(node, path, fmt::format("expected {} (non-empty text)", what));
    return node.Scalar();
  }

  // A non-empty sequence of unique names; `what` is the plural ("states") and `item` the singular.
  std::vector<std::string> name_list(const YAML::Node& node, const std::string& path, const char* what,
                                     const char* item) const {
    if (!node.IsSequence()) error(node, path, fmt::format("expected a list of {} names", item));
    if (node.size() == 0) error(node, path, fmt::format("the list of {} is empty", what));
    if (node.size() > kMaxNames) error(node, path, fmt::format("more than {} {}", kMaxNames, what));
    std::vector<std::string> names;
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string item_path = fmt::format("{}[{}]", path, i);
      std::string n = name(node[i], item_path, fmt::format("a {} name", item).c_str());
      if (std::find(names.begin(), names.end(), n) != names.end())
        error(node[i], item_path, fmt::format("duplicate name '{}'", n));
      names.push_back(std::move(n));
    }
    return names;
  }

  // The entries of a mapping as (key name, value) in file order; duplicate keys are an error
  // (yaml-cpp keeps both, so they are caught here rather than silently shadowed).
  std::vector<std::pair<std::string, YAML::Node>> entries(const YAML::Node& node, const std::string& path,
                                                          const char* what) const {
    if (!node.IsMap()) error(node, path, fmt::format("expected a mapping of {}", what));
    std::vector<std::pair<std::string, YAML::Node>> out;
    for (const auto& kv : node) {
      std::string key = name(kv.first, path, "a key");
      for (const auto& [seen, unused] : out)
        if (seen == key) error(kv.first, join_path(path, key), "duplicate key");
      out.emplace_back(std::move(key), kv.second);
    }
    return out;
  }

  static std::string join_path(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::string origin_;
};

int32_t index_of(const std::vector<std::string>& names, const std::string& n) {
  const auto it = std::find(names.begin(), names.end(), n);
  return it == names.end() ? -1 : static_cast<int32_t>(it - names.begin());
}

}  // namespace

AutomatonSpec parse_automaton_spec(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    fail("automaton file '{}', line {}, column {}: YAML syntax error: {}", origin, e.mark.line + 1,
         e.mark.column + 1, e.msg);
  }
  const SpecReader reader(origin);
  if (!root.IsDefined() || root.IsNull()) fail("automaton file '{}': the file is empty", origin);

  static const std::vector<std::string> kKeys = {"description", "states", "alphabet", "start", "transitions"};
  std::map<std::string, YAML::Node> top;
  for (auto& [key, value] : reader.entries(root, "", "keys")) {
    if (index_of(kKeys, key) < 0)
      reader.error(value, key, fmt::format("unknown key (known: {})", join(kKeys)));
    top.emplace(key, value);
  }
  for (const char* required : {"states", "alphabet", "start", "transitions"})
    if (!top.count(required)) reader.error(root, required, "missing required key");

  AutomatonSpec spec;
  if (top.count("description")) spec.description = reader.name(top.at("description"), "description", "a description");
  spec.states = reader.name_list(top.at("states"), "states", "states", "state");
  spec.alphabet = reader.name_list(top.at("alphabet"), "alphabet", "symbols", "symbol");
  for (size_t i = 0; i < spec.alphabet.size(); ++i)
    if (index_of(spec.states, spec.alphabet[i]) >= 0)
      reader.error(top.at("alphabet")[i], fmt::format("alphabet[{}]", i),
                   fmt::format("'{}' is also a state name; states and symbols share one vocabulary", spec.alphabet[i]));
  const size_t S = spec.states.size(), A = spec.alphabet.size();
  if (S * A > kMaxTableEntries)
    reader.error(top.at("transitions"), "transitions", fmt::format("{} x {} table is larger than {} entries", S, A, kMaxTableEntries));

  const std::string start = reader.name(top.at("start"), "start", "a state name");
  spec.start = index_of(spec.states, start);
  if (spec.start < 0)
    reader.error(top.at("start"), "start", fmt::format("unknown state '{}' (states: {})", start, join(spec.states)));

  spec.next.assign(S * A, -1);
  const auto table = reader.entries(top.at("transitions"), "transitions", "states to rows");
  std::vector<const YAML::Node*> rows(S, nullptr);  // each state's row in `table`, once read
  for (const auto& [state, row] : table) {
    const std::string row_path = "transitions." + state;
    const int32_t s = index_of(spec.states, state);
    if (s < 0) reader.error(row, row_path, fmt::format("unknown state '{}' (states: {})", state, join(spec.states)));
    rows[s] = &row;
    for (const auto& [symbol, target] : reader.entries(row, row_path, "symbols to next states")) {
      const std::string cell_path = row_path + "." + symbol;
      const int32_t a = index_of(spec.alphabet, symbol);
      if (a < 0) reader.error(target, cell_path, fmt::format("unknown symbol '{}' (alphabet: {})", symbol, join(spec.alphabet)));
      const std::string to = reader.name(target, cell_path, "a next-state name");
      const int32_t t = index_of(spec.states, to);
      if (t < 0) reader.error(target, cell_path, fmt::format("unknown state '{}' (states: {})", to, join(spec.states)));
      spec.next[static_cast<size_t>(s) * A + a] = t;
    }
  }
  for (size_t s = 0; s < S; ++s) {
    if (rows[s] == nullptr)
      reader.error(top.at("transitions"), "transitions." + spec.states[s],
                   fmt::format("missing row for state '{}' (every state needs a next state for every symbol)", spec.states[s]));
    for (size_t a = 0; a < A; ++a)
      if (spec.next[s * A + a] < 0)
        reader.error(*rows[s], "transitions." + spec.states[s] + "." + spec.alphabet[a],
                     "missing transition (every state needs a next state for every symbol)");
  }
  return spec;
}

AutomatonSpec load_automaton_spec(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("cannot read automaton file '{}': it is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read automaton file '{}': {}", path, std::filesystem::exists(path, ec) ? "permission denied or unreadable" : "no such file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("cannot read automaton file '{}'", path);
  return parse_automaton_spec(text.str(), path);
}

std::string AutomatonSpec::table_text() const {
  size_t width = 0;
  for (const auto& n : states) width = std::max(width, n.size());
  for (const auto& n : alphabet) width = std::max(width, n.size());
  std::string out = fmt::format("{:>{}}", "", width);
  for (const auto& a : alphabet) out += fmt::format("  {:>{}}", a, width);
  for (size_t s = 0; s < states.size(); ++s) {
    out += fmt::format("\n{:>{}}", states[s], width);
    for (size_t a = 0; a < alphabet.size(); ++a) out += fmt::format("  {:>{}}", states[next[s * alphabet.size() + a]], width);
  }
  return out;
}

}  // namespace sb
