// error.hpp: the one exception type library code throws for bad input or failed I/O.
// Library code never exits; the CLI catches sb::Error, prints its one-line message and exits 2.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace sb {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace sb
