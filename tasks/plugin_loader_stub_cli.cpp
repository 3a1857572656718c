// plugin_loader_stub_cli.cpp: TEMPORARY no-op plugin loader so the cli branch links on its own.
// The real loader is tasks/plugin_loader.cpp (another branch); drop this file when merging.
#include "tasks/plugin_loader.hpp"

namespace sb {

void load_plugin(TaskRegistry& /*registry*/, const std::string& /*path*/) {}
void load_plugins_from_env(TaskRegistry& /*registry*/) {}

}  // namespace sb
