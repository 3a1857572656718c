// interrupt_guard.cpp: InterruptGuard (interrupt_guard.hpp).
#include "cli/interrupt_guard.hpp"

namespace sb::cli {

namespace {
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");
extern "C" void on_interrupt(int) { g_interrupted.store(true, std::memory_order_relaxed); }
}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted.store(false);
  struct sigaction sa = {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

const std::atomic<bool>& InterruptGuard::flag() { return g_interrupted; }

}  // namespace sb::cli
