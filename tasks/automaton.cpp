// automaton.cpp: the `automaton` task: state tracking for any finite automaton given in YAML
// (schema in tasks/automaton_spec.hpp). Inputs are uniform symbols; the label at t is the state
// after reading x_1..x_t (labels=prefix) or only the final state (labels=final). Vocabulary =
// alphabet symbols, then state names: label ids are state ids offset by |alphabet|.
#include "core/error.hpp"
#include "tasks/automaton_spec.hpp"
#include "tasks/registry.hpp"

namespace sb {
namespace {

class Automaton final : public Task {
 public:
  Automaton(AutomatonSpec spec, std::string file, int64_t length, bool prefix)
      : spec_(std::move(spec)), file_(std::move(file)), length_(length), prefix_(prefix) {}

  std::string name() const override { return "automaton"; }
  int64_t seq_len() const override { return length_; }
  std::vector<std::string> vocab() const override {
    std::vector<std::string> v = spec_.alphabet;
    v.insert(v.end(), spec_.states.begin(), spec_.states.end());
    return v;
  }
  std::string details() const override {
    const int32_t A = spec_.num_symbols(), S = spec_.num_states();
    std::string out = fmt::format("automaton from '{}'{}{}: {} states, {} symbols, start state {}\n", file_,
                                  spec_.description.empty() ? "" : " - ", spec_.description, S, A,
                                  spec_.states[spec_.start]);
    out += fmt::format("vocabulary: ids 0..{} = symbols, ids {}..{} = states (label id = {} + state index)\n", A - 1,
                       A, A + S - 1, A);
    out += fmt::format("inputs: {} symbols, each uniform over the alphabet\n", length_);
    out += prefix_ ? "labels (prefix): at every position t, the state after reading x_1..x_t; all scored\n"
                   : "labels (final): only the last position, the state after the whole input; other labels -100\n";
    out += "YAML schema: description (optional text), states [names], alphabet [names], start (a state),\n"
           "             transitions {state: {symbol: next state}} with every (state, symbol) present\n";
    out += "transition table (row = current state, column = input symbol, entry = next state):\n";
    out += spec_.table_text();
    return out;
  }

  void sample(int /*split*/, Rng& rng, ExampleView out) const override {
    const int32_t A = spec_.num_symbols();
    const auto symbols = static_cast<uint32_t>(A);
    int32_t state = spec_.start;
    for (int64_t t = 0; t < length_; ++t) {
      const auto symbol = static_cast<int32_t>(rng.below(symbols));
      state = spec_.step(state, symbol);
      out.input_ids[t] = symbol;
      const bool labelled = prefix_ || t == length_ - 1;
      out.labels[t] = labelled ? A + state : kIgnoreLabel;
      out.score_mask[t] = labelled ? 1 : 0;
    }
  }

 private:
  AutomatonSpec spec_;
  std::string file_;
  int64_t length_;
  bool prefix_;
};

}  // namespace

void register_automaton(TaskRegistry& registry) {
  registry.add({"automaton",
                "any finite automaton from a YAML file: label = state after each input symbol",
                {{"file", "", "YAML file with states, alphabet, start, transitions (required)"},
                 {"length", "64", "input symbols per sequence (>= 1)"},
                 {"labels", "prefix", "prefix: state label at every position; final: last position only"}},
                [](const Params& p) -> std::unique_ptr<Task> {
                  if (!p.has_value("file")) fail("task 'automaton': parameter 'file' is required (a YAML automaton)");
                  const std::string file = p.str("file");
                  const int64_t length = p.integer("length", 1, int64_t{1} << 30);
                  const bool prefix = p.choice("labels", {"prefix", "final"}) == "prefix";
                  return std::make_unique<Automaton>(load_automaton_spec(file), file, length, prefix);
                },
                "built-in", "length"});
}

}  // namespace sb
