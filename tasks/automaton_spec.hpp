// automaton_spec.hpp: a deterministic finite automaton read from YAML (the `automaton` task's
// input). Owns the file schema, its validation (one-line sb::Error naming the file, the line and
// the key path of the first problem) and the transition table as text.
#pragma once

// Schema (every key required except `description`; no other top-level keys):
//   description: "mod-3 counter"  # optional free text shown by `statebench tasks show`
//   states: [s0, s1, s2]          # state names, unique, non-empty list
//   alphabet: [a, b]              # input symbol names, unique, non-empty list
//   start: s0                     # one of states
//   transitions:                  # state -> symbol -> next state
//     s0: {a: s1, b: s0}          # every (state, symbol) pair must appear exactly once
//     s1: {a: s2, b: s1}
//     s2: {a: s0, b: s2}
// A name may not be both a state and a symbol: they share one token vocabulary.
#include <cstdint>
#include <string>
#include <vector>

namespace sb {

struct AutomatonSpec {
  std::string description;
  std::vector<std::string> states;    // S names, state id = position
  std::vector<std::string> alphabet;  // A names, symbol id = position
  int32_t start = 0;                  // state id
  std::vector<int32_t> next;          // [S, A] row-major: next[s * A + a] = state after reading a in s

  int32_t num_states() const { return static_cast<int32_t>(states.size()); }
  int32_t num_symbols() const { return static_cast<int32_t>(alphabet.size()); }
  int32_t step(int32_t state, int32_t symbol) const { return next[static_cast<size_t>(state) * alphabet.size() + symbol]; }
  // The table as aligned text: one row per state, one column per symbol.
  std::string table_text() const;
};

// Parses and validates YAML text; `origin` names the source in error messages (a file path).
AutomatonSpec parse_automaton_spec(const std::string& yaml_text, const std::string& origin);
// Reads `path` and parses it; a missing or unreadable file is an sb::Error naming it.
AutomatonSpec load_automaton_spec(const std::string& path);

}  // namespace sb
