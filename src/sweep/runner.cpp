// runner.cpp: the sweep's execution loop (slots, locks, resume, failure records, interrupt) and
// the fork/exec process launcher (see runner.hpp; the mechanisms are documented in docs/sweeps.md).
#include "sweep/runner.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "core/utc_time.hpp"
#include "io/atomic_file.hpp"
#include "io/output_dir.hpp"
#include "sweep/manifest.hpp"
#include "train/run_summary.hpp"

namespace sb::sweep {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---- ProcessLauncher ----------------------------------------------------------------------------

ProcessLauncher::ProcessLauncher(std::string exe) : exe_(std::move(exe)) {}

int64_t ProcessLauncher::start(const LaunchSpec& spec) {
  const std::string log_path = (fs::path(spec.dir) / "log.txt").string();
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) fail("cannot open '{}': {}", log_path, std::strerror(errno));
  std::string command = "statebench";
  for (const auto& a : spec.args) command += " " + a;
  const std::string header = fmt::format("==== {} statebench sweep runs: {}\n", utc_now(), command);
  if (::write(log, header.data(), header.size()) < 0) { /* the log is best effort */ }

  // Everything the child needs is prepared before fork (no allocation after it).
  std::vector<std::string> argv_s{"statebench"};
  argv_s.insert(argv_s.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* exe = exe_.c_str();
  const int lock_fd = spec.lock_fd;

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(log);
    fail("cannot start a cell process: fork: {}", std::strerror(err));
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // own process group: Ctrl-C reaches the sweep only, which then stops it
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    if (lock_fd >= 0) ::fcntl(lock_fd, F_SETFD, 0);  // keep the cell's lock across exec
    ::execv(exe, argv.data());
    const char msg[] = "statebench sweep: cannot execute the cell command\n";
    if (::write(2, msg, sizeof msg - 1) < 0) {}
    _exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so signal_all never races the child's setpgid
  ::close(log);
  pids_.push_back(pid);
  return pid;
}

std::vector<LaunchExit> ProcessLauncher::wait(double timeout_s) {
  std::vector<LaunchExit> out;
  const auto deadline = Clock::now() + std::chrono::duration<double>(std::max(0.0, timeout_s));
  for (;;) {
    for (auto it = pids_.begin(); it != pids_.end();) {
      int status = 0;
      const pid_t r = ::waitpid(static_cast<pid_t>(*it), &status, WNOHANG);
      if (r == static_cast<pid_t>(*it)) {
        LaunchExit e;
        e.handle = *it;
        if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
        else e.exit_code = WEXITSTATUS(status);
        out.push_back(e);
        it = pids_.erase(it);
      } else if (r < 0 && errno == ECHILD) {  // reaped elsewhere: report it as lost
        out.push_back({*it, 255, 0});
        it = pids_.erase(it);
      } else {
        ++it;
      }
    }
    if (!out.empty() || Clock::now() >= deadline) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ProcessLauncher::signal_all(int sig) {
  for (const int64_t pid : pids_) ::kill(-static_cast<pid_t>(pid), sig);
}

// ---- devices and slots ------------------------------------------------------------------------

std::vector<std::string> parse_devices(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    std::string d = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (d == "cuda") d = "cuda:0";
    bool ok = d == "cpu";
    if (d.rfind("cuda:", 0) == 0 && d.size() > 5 && d.size() < 9)
      ok = std::all_of(d.begin() + 5, d.end(), [](unsigned char c) { return std::isdigit(c); });
    if (!ok) fail("--devices: '{}' is not a device (cpu, cuda or cuda:N)", d);
    if (std::find(out.begin(), out.end(), d) != out.end()) fail("--devices: '{}' is listed twice", d);
    out.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

double concurrent_lanes(const std::vector<std::string>& slots) {
  std::map<std::string, int> per_gpu;
  double lanes = 0;
  for (const auto& d : slots) {
    if (d == "cpu")
      lanes += 1;
    else
      ++per_gpu[d];
  }
  for (const auto& [device, n] : per_gpu) lanes += std::min(n, 2);
  return lanes;
}

std::vector<std::string> make_slots(const std::vector<std::string>& devices, int workers, int cores, int cpu_threads) {
  if (devices.empty()) fail("no devices to run cells on");
  std::vector<std::string> slots;
  if (workers > 0) {
    for (int i = 0; i < workers; ++i) slots.push_back(devices[static_cast<size_t>(i) % devices.size()]);
    return slots;
  }
  const int cpu_slots = std::max(1, std::max(1, cores) / std::max(1, cpu_threads));
  // Interleaved, so the first free slot alternates between devices.
  for (int round = 0;; ++round) {
    bool any = false;
    for (const auto& d : devices)
      if (d != "cpu" ? round == 0 : round < cpu_slots) {
        slots.push_back(d);
        any = true;
      }
    if (!any) break;
  }
  return slots;
}

// ---- helpers ----------------------------------------------------------------------------------

std::string base_config_path(const Plan& plan, const std::string& out_dir) {
  if (!plan.study.base_file.empty()) return fs::absolute(plan.study.base_file).lexically_normal().string();
  return fs::absolute(fs::path(out_dir) / "base.yaml").lexically_normal().string();
}

void write_failed_summary(const std::string& dir, const std::string& message, double wall_seconds,
                          const LaunchExit& exit, const std::optional<Provenance>& provenance) {
  std::string tail;
  try {
    const std::string log = read_file((fs::path(dir) / "log.txt").string());
    tail = log.substr(log.size() > 2000 ? log.size() - 2000 : 0);
  } catch (const Error&) {
  }
  RunSummary s;
  s.status = "failed";
  s.message = message;
  s.wall_seconds = wall_seconds;
  if (exit.signal) s.signal = exit.signal;
  else s.exit_code = exit.exit_code;
  s.log_tail = tail;
  s.written_by = "statebench sweep";
  s.provenance = provenance;
  write_run_summary((fs::path(dir) / "summary.json").string(), s);
}

namespace {

std::string last_log_line(const std::string& dir) {
  try {
    std::string log = read_file((fs::path(dir) / "log.txt").string());
    while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
    const auto nl = log.rfind('\n');
    std::string line = log.substr(nl == std::string::npos ? 0 : nl + 1);
    if (line.rfind("==== ", 0) == 0) return "";  // only our own header: the child printed nothing
    return line.size() > 300 ? line.substr(0, 300) + "..." : line;
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

std::string missing_summary_message(const std::string& dir, const LaunchExit& e) {
  const std::string why = e.signal ? fmt::format("was killed by signal {} ({})", e.signal, strsignal(e.signal))
                                   : fmt::format("exited with code {}", e.exit_code);
  const std::string line = last_log_line(dir);
  return fmt::format("statebench train {} without writing summary.json{}{}", why, line.empty() ? "" : ": ", line);
}

FdCloser::~FdCloser() {
  if (fd >= 0) ::close(fd);
}

// The descriptor is close-on-exec (the launcher clears that flag for the one child that should
// inherit it).
int lock_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot open lock file '{}': {}", path, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::vector<std::string> cell_train_args(const CellCommand& c) {
  std::vector<std::string> args;
  for (const auto& p : c.plugins) args.insert(args.end(), {"--plugin", p});
  args.insert(args.end(), {"train", c.base_config});
  for (const auto& o : c.set) args.insert(args.end(), {"--set", o});
  if (c.device == "cpu" && c.cpu_threads > 0) args.insert(args.end(), {"--set", fmt::format("train.threads={}", c.cpu_threads)});
  args.insert(args.end(), {"--out", c.dir, "--device", c.device});
  if (c.resume) args.push_back("--resume");
  return args;
}

bool cell_run_with_other_config(const Cell& cell, const std::string& out) {
  const fs::path config = fs::path(out) / cell.dir / "config.yaml";
  if (!fs::exists(config)) return false;
  uint64_t fingerprint = 0;
  try {
    fingerprint = config_fingerprint(load_config(config.string()));
  } catch (const Error& e) {
    fail("cell '{}': its config.yaml cannot be read ({}); delete the cell directory to rerun it", cell.id, e.what());
  }
  return fingerprint != config_fingerprint(cell.config);
}

void prepare_sweep_dir(const Plan& plan, const std::string& out) {
  fs::create_directories(fs::path(out) / "cells");
  const std::string manifest = (fs::path(out) / "manifest.json").string();
  if (fs::exists(manifest)) {
    std::string other;
    try {
      other = read_manifest(manifest).study_name();
    } catch (const Error& e) {
      fail("{}; use another --out", e.what());
    }
    if (other != plan.study.name)
      fail("'{}' holds the sweep '{}', not '{}'; use another --out", out, other, plan.study.name);
  }
  for (const auto& cell : plan.cells)
    if (cell_run_with_other_config(cell, out))
      fail("cell '{}' in '{}' was run with another config (the base config or `set` changed?): use another --out, "
           "or delete that cell directory to rerun it", cell.id, out);
  write_file_atomic((fs::path(out) / "study.yaml").string(), plan.study.text);
  if (plan.study.base_file.empty()) write_file_atomic((fs::path(out) / "base.yaml").string(), plan.study.base_yaml);
}

// ---- run_sweep ----------------------------------------------------------------------------------

SweepResult run_sweep(const Plan& plan, Launcher& launcher, const RunnerOptions& opt, SweepObserver* observer) {
  SweepObserver silent;
  SweepObserver& obs = observer ? *observer : silent;
  if (opt.slots.empty()) fail("no worker slots");
  const fs::path out = fs::absolute(opt.out_dir).lexically_normal();
  create_output_dir(out.string(), "--out");
  FdCloser sweep_lock{lock_file((out / "sweep.lock").string())};
  if (sweep_lock.fd < 0) fail("another statebench sweep is running in '{}' (it holds {}/sweep.lock)", out.string(), out.string());
  prepare_sweep_dir(plan, out.string());

  ManifestInfo info;
  info.study_source = plan.study.file == "<string>" ? plan.study.file : fs::absolute(plan.study.file).lexically_normal().string();
  info.base_config = base_config_path(plan, out.string());
  info.started = utc_now();

  Scheduler scheduler(plan);
  SweepCounts counts;
  counts.total = plan.cells.size();
  auto cell_dir = [&](size_t c) { return (out / plan.cells[c].dir).string(); };
  auto summary_of = [&](size_t c) { return (fs::path(cell_dir(c)) / "summary.json").string(); };

  // Cells finished by an earlier sweep are reused (failed ones are retried below).
  for (const auto& cell : plan.cells) {
    const auto r = read_cell_result(summary_of(cell.index), plan.metric);
    if (!r || !r->final()) continue;
    ++counts.reused;
    obs.on_reused(cell, *r);
    scheduler.restore(cell.index, *r);
  }
  const std::vector<size_t> skipped_at_start = scheduler.settle();  // staged protocols: groups decided on disk

  struct Active {
    RunningCell info;
    size_t slot = 0;
    int lock_fd = -1;
  };
  std::map<int64_t, Active> active;
  std::vector<bool> slot_busy(opt.slots.size(), false);
  std::set<size_t> waiting;  // runnable cells whose lock another process holds
  bool interrupting = false;
  size_t ran_ok = 0, ran_failed = 0;
  std::string first_failure;

  auto refresh_counts = [&] {
    counts.finished = scheduler.count(CellState::finished);
    counts.skipped = scheduler.count(CellState::skipped);
    counts.running = scheduler.count(CellState::running);
    counts.pending = scheduler.count(CellState::pending);
    counts.waiting = waiting.size();
    counts.failed = 0;
    for (size_t c = 0; c < plan.cells.size(); ++c)
      if (scheduler.result(c) && !scheduler.result(c)->final()) ++counts.failed;
  };
  auto manifest = [&] {
    info.complete = scheduler.done();
    write_manifest(out.string(), make_manifest(plan, scheduler, info));
  };
  auto record = [&](size_t c, const CellResult& r, bool ran_here) {
    const auto skipped = scheduler.finish(c, r);
    if (ran_here && r.final()) ++ran_ok;
    if (ran_here && !r.final() && ran_failed++ == 0) first_failure = fmt::format("cell '{}': {}", plan.cells[c].id, r.message);
    refresh_counts();
    obs.on_finish(plan.cells[c], r, counts, ran_here);
    for (const size_t s : skipped) obs.on_skip(plan.cells[s], counts);
  };
  auto handle_exit = [&](const LaunchExit& e) {
    auto it = active.find(e.handle);
    if (it == active.end()) return;
    Active a = it->second;
    active.erase(it);
    slot_busy[a.slot] = false;
    const size_t c = a.info.cell;
    const double wall = std::chrono::duration<double>(Clock::now() - a.info.started).count();
    auto r = read_cell_result(summary_of(c), plan.metric);
    if (!r && interrupting) {  // stopped by us: unfinished, resumed by the next sweep
      scheduler.abandon(c);
      ::close(a.lock_fd);
      return;
    }
    if (!r) {
      write_failed_summary(cell_dir(c), missing_summary_message(cell_dir(c), e), wall, e);
      r = read_cell_result(summary_of(c), plan.metric);
    }
    ::close(a.lock_fd);  // after the summary is in place: a waiting sweep then sees it
    record(c, *r, true);
  };

  refresh_counts();
  for (const size_t s : skipped_at_start) obs.on_skip(plan.cells[s], counts);
  manifest();
  for (;;) {
    if (opt.interrupt && opt.interrupt->load()) break;
    if (opt.stop_after_initial_failures > 0 && ran_ok == 0 &&
        ran_failed >= static_cast<size_t>(opt.stop_after_initial_failures))
      break;
    bool changed = false;
    for (const size_t c : scheduler.runnable()) {
      const auto free_slot = std::find(slot_busy.begin(), slot_busy.end(), false);
      if (free_slot == slot_busy.end()) break;
      const std::string dir = cell_dir(c);
      fs::create_directories(dir);
      const int lock = lock_file((fs::path(dir) / "lock").string());
      if (lock < 0) {
        if (waiting.insert(c).second) obs.on_waiting(plan.cells[c]);
        continue;
      }
      waiting.erase(c);
      // Re-read under the lock: an orphaned child of a killed sweep may have just finished it.
      if (const auto r = read_cell_result(summary_of(c), plan.metric)) {
        if (r->final()) {
          ::close(lock);
          ++counts.reused;
          record(c, *r, false);
          changed = true;
          continue;
        }
        fs::rename(summary_of(c), (fs::path(dir) / "summary.failed.json").string());  // retried now
      }
      const size_t slot = static_cast<size_t>(free_slot - slot_busy.begin());
      LaunchSpec spec;
      spec.cell = c;
      spec.dir = dir;
      spec.device = opt.slots[slot];
      spec.lock_fd = lock;
      CellCommand command{opt.plugins, info.base_config, plan.study.set, dir, spec.device, opt.cpu_threads, false};
      for (const auto& o : plan.cells[c].overrides()) command.set.push_back(o);
      const bool resume = command.resume = fs::exists(fs::path(dir) / "checkpoint.bin");
      spec.args = cell_train_args(command);
      Active a{{c, spec.device, resume, Clock::now()}, slot, lock};
      int64_t handle = -1;
      try {
        handle = launcher.start(spec);
      } catch (const Error& e) {
        write_failed_summary(dir, e.what(), 0, {-1, 127, 0});
        ::close(lock);
        scheduler.start(c);
        record(c, *read_cell_result(summary_of(c), plan.metric), true);
        changed = true;
        continue;
      }
      scheduler.start(c);
      slot_busy[slot] = true;
      active.emplace(handle, a);
      refresh_counts();
      obs.on_start(plan.cells[c], a.info);
      changed = true;
    }
    if (scheduler.done()) break;
    const auto exits = launcher.wait(changed ? 0 : opt.poll_seconds);  // changed: more may be runnable
    for (const auto& e : exits) handle_exit(e);
    if (changed || !exits.empty()) manifest();
    refresh_counts();
    std::vector<RunningCell> running;
    for (const auto& [h, a] : active) running.push_back(a.info);
    obs.on_tick(counts, running);
  }

  SweepResult result;
  if (!scheduler.done()) {  // interrupted: stop the children, leave their cells resumable
    result.interrupted = true;
    if (!(opt.interrupt && opt.interrupt->load())) result.stopped_because = first_failure;
    interrupting = true;
    launcher.signal_all(SIGTERM);
    const auto deadline = Clock::now() + std::chrono::duration<double>(opt.terminate_grace_seconds);
    bool killed = false;
    while (!active.empty()) {
      for (const auto& e : launcher.wait(opt.poll_seconds)) handle_exit(e);
      if (!killed && Clock::now() >= deadline) {
        launcher.signal_all(SIGKILL);
        killed = true;
      }
    }
  }
  refresh_counts();
  manifest();
  result.counts = counts;
  result.groups = scheduler.groups();
  return result;
}

}  // namespace sb::sweep
