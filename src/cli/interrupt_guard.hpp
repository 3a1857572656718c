// interrupt_guard.hpp: SIGINT and SIGTERM turned into one flag while a command runs (`generate`
// stops between chunks, `train` after a step, `sweep` stops its cells), the previous handlers
// restored afterwards.
#pragma once
#include <signal.h>

#include <atomic>

namespace sb::cli {

class InterruptGuard {
 public:
  InterruptGuard();   // clears the flag and installs the handlers
  ~InterruptGuard();  // restores the handlers there were
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // Set by SIGINT or SIGTERM while a guard is alive.
  static const std::atomic<bool>& flag();
  static bool interrupted() { return flag().load(std::memory_order_relaxed); }

 private:
  struct sigaction old_int_ = {}, old_term_ = {};
};

}  // namespace sb::cli
