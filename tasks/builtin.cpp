// builtin.cpp: register_builtin_tasks(), the one place built-in tasks are wired in.
// Each task file defines its register_<name>() function; add a line here for a new one.
#include "tasks/registry.hpp"

namespace sb {

void register_flipflop(TaskRegistry& registry);
void register_parity(TaskRegistry& registry);
void register_automaton(TaskRegistry& registry);

void register_builtin_tasks(TaskRegistry& registry) {
  register_flipflop(registry);
  register_parity(registry);
  register_automaton(registry);
}

}  // namespace sb
