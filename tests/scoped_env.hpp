// scoped_env.hpp: ScopedEnv, an environment variable set for one scope (tests of the developer
// switches and plugin search paths, which are read per call).
#pragma once
#include <cstdlib>
#include <string>

namespace sb::test {

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { setenv(n, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace sb::test
