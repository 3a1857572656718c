// builtin.cpp: register_builtin_tasks(), the one place built-in tasks are wired in.
// Each task file defines its register_<name>() function; add a line here for a new one.
#include "tasks/registry.hpp"

namespace sb {

void register_flipflop(TaskRegistry& registry);
void register_parity(TaskRegistry& registry);
void register_automaton(TaskRegistry& registry);
void register_word_problem(TaskRegistry& registry);
void register_mqar(TaskRegistry& registry);
void register_mqrar(TaskRegistry& registry);

void register_builtin_tasks(TaskRegistry& registry) {
  register_flipflop(registry);
  register_parity(registry);
  register_automaton(registry);
  register_word_problem(registry);
  register_mqar(registry);
  register_mqrar(registry);
}

}  // namespace sb
