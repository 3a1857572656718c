// sweep_runner_fixture.hpp: the fake launcher of the sweep runner tests (test_sweep_runner.cpp,
// test_sweep_protocols.cpp): cells "end" one per wait() with a scripted outcome (exit code, status,
// metric, log), summaries written as a real child would; plus plan, directory and manifest helpers.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <csignal>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "sweep/manifest.hpp"
#include "sweep/runner.hpp"
#include "train/run_summary.hpp"
#include "test_util.hpp"

namespace sb::sweep::runner_test {

namespace fs = std::filesystem;

// What a fake cell does when the runner waits for it.
struct Outcome {
  int exit_code = 0, signal = 0;
  std::string status = "completed";  // empty: write no summary.json
  std::optional<double> metric = 0.95;
  std::string log;                   // appended to log.txt
};

class FakeLauncher final : public Launcher {
 public:
  explicit FakeLauncher(const Plan& plan) : plan_(plan) {}
  std::function<Outcome(const Cell&)> outcome = [](const Cell&) { return Outcome{}; };
  std::function<void()> before_wait;                 // runs at each wait()
  std::vector<LaunchSpec> started;                   // in start order
  std::map<std::string, int>* summaries_written = nullptr;  // by cell id, across launchers
  size_t max_running = 0;
  int signalled = 0;

  int64_t start(const LaunchSpec& spec) override {
    EXPECT_TRUE(fs::is_directory(spec.dir));
    EXPECT_GE(spec.lock_fd, 0);
    started.push_back(spec);
    running_.push_back(next_);
    specs_[next_] = spec;
    max_running = std::max(max_running, running_.size());
    return next_++;
  }
  std::vector<LaunchExit> wait(double) override {
    if (before_wait) before_wait();
    std::vector<LaunchExit> out;
    if (signalled) {  // every running cell dies without a summary
      for (const int64_t h : running_) out.push_back({h, 0, signalled});
      running_.clear();
      return out;
    }
    if (running_.empty()) return out;
    const int64_t h = running_.front();  // one cell ends per wait, oldest first
    running_.pop_front();
    const LaunchSpec& spec = specs_[h];
    const Cell& cell = plan_.cells[spec.cell];
    const Outcome o = outcome(cell);
    if (!o.log.empty()) {
      const std::string log = (fs::path(spec.dir) / "log.txt").string();
      write_file_atomic(log, (fs::exists(log) ? read_file(log) : "") + o.log);
    }
    if (!o.status.empty()) {
      EvalSummary val;
      if (o.metric) val.token_accuracy = *o.metric;
      RunSummary s;
      s.status = o.status;
      s.wall_seconds = 0.5;
      s.eval.emplace_back("val", val);
      write_run_summary((fs::path(spec.dir) / "summary.json").string(), s);
      if (summaries_written) ++(*summaries_written)[cell.id];
    }
    out.push_back({h, o.exit_code, o.signal});
    return out;
  }
  void signal_all(int sig) override { signalled = sig; }

  std::set<std::string> started_labels() const {
    std::set<std::string> s;
    for (const auto& spec : started) s.insert(plan_.cells[spec.cell].label());
    return s;
  }

 private:
  const Plan& plan_;
  std::deque<int64_t> running_;
  std::map<int64_t, LaunchSpec> specs_;
  int64_t next_ = 1;
};

inline const char* kBase =
    "config:\n"
    "  task: {name: parity, params: {length: 8}}\n"
    "  model: {d_model: 16, n_heads: 2}\n"
    "  train: {steps: 10, batch_size: 4}\n";

inline Plan plan_of(const std::string& body) { return make_plan(parse_study(std::string(kBase) + body, "s.yaml", "")); }

inline fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(SB_TEST_TMP) / ("sweep_runner_" + name);
  fs::remove_all(dir);
  return dir;
}

inline RunnerOptions options(const fs::path& out, size_t slots = 2) {
  RunnerOptions o;
  o.out_dir = out.string();
  o.slots.assign(slots, "cpu");
  o.poll_seconds = 0;
  return o;
}

inline bool has_summary(const fs::path& out, const Cell& c) { return fs::exists(out / c.dir / "summary.json"); }

// A second sweep over a finished one, with the same outcomes: it must start no cell.
inline SweepResult rerun_starting_nothing(const Plan& plan, const std::function<Outcome(const Cell&)>& outcome,
                                          const fs::path& out, size_t slots) {
  FakeLauncher again(plan);
  again.outcome = outcome;
  const SweepResult r = run_sweep(plan, again, options(out, slots));
  EXPECT_TRUE(again.started.empty());
  return r;
}

inline YAML::Node manifest(const fs::path& out) { return YAML::Load(read_file((out / "manifest.json").string())); }

}  // namespace sb::sweep::runner_test
