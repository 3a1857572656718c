// display.cpp: live status block / plain event lines / final summary of a sweep (see display.hpp).
#include "sweep/display.hpp"

#include <fmt/ranges.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sb::sweep {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {
constexpr double kRedrawSeconds = 0.25;
constexpr size_t kMaxRunningShown = 8;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string fit(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return width < 4 ? s.substr(0, width) : s.substr(0, width - 3) + "...";
}
}  // namespace

std::string format_seconds(double s) {
  if (s < 10) return fmt::format("{:.1f} s", s);
  if (s < 60) return fmt::format("{:.0f} s", s);
  const long t = static_cast<long>(s + 0.5);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

SweepDisplay::SweepDisplay(const Plan& plan, std::string out_dir, size_t slots, DisplayMode mode, std::FILE* stream)
    : plan_(plan), out_dir_(std::move(out_dir)), slots_(std::max<size_t>(1, slots)), mode_(mode), stream_(stream),
      start_(Clock::now()), last_draw_(start_ - std::chrono::seconds(1)) {}

std::string SweepDisplay::result_text(const CellResult& r) const {
  std::string s = r.metric ? fmt::format("{}={:.4g}", plan_.metric, *r.metric) : fmt::format("{}=n/a", plan_.metric);
  if (!r.final()) s = r.message;
  return s;
}

void SweepDisplay::clear_block() {
  if (mode_ != DisplayMode::live || block_lines_ == 0) return;
  fmt::print(stream_, "\x1b[{}F\x1b[J", block_lines_);  // to the block's first line, clear below
  block_lines_ = 0;
}

void SweepDisplay::announce_reuse() {
  if (!announced_reuse_ && reused_ > 0)
    fmt::print(stream_, "resuming: {} of {} cells already finished\n", reused_, plan_.cells.size());
  announced_reuse_ = true;
}

void SweepDisplay::event(const std::string& line) {
  if (mode_ == DisplayMode::quiet) return;
  clear_block();
  announce_reuse();
  fmt::print(stream_, "{}\n", line);
  std::fflush(stream_);
  last_draw_ = start_;  // redraw the block at the next tick
}

void SweepDisplay::on_reused(const Cell&, const CellResult&) { ++reused_; }

void SweepDisplay::on_start(const Cell& cell, const RunningCell& running) {
  if (mode_ == DisplayMode::live) return;  // the live block lists the running cells
  event(fmt::format("        start {} on {}{}", cell.label(), running.device, running.resumed ? " (resumed from checkpoint)" : ""));
}

void SweepDisplay::on_finish(const Cell& cell, const CellResult& r, const SweepCounts& counts, bool ran_here) {
  if (ran_here) {
    ++ran_;
    ran_seconds_ += r.wall_seconds;
  } else {
    ++reused_;
  }
  const std::string verb = r.status == "completed" ? "done" : r.status == "early_stopped" ? "done (early stop)"
                           : r.status == "diverged"  ? "DIVERGED" : "FAILED";
  event(fmt::format("[{}/{}] {} {} {} ({}{})", counts.finished + counts.skipped, counts.total, verb, cell.label(),
                    result_text(r), format_seconds(r.wall_seconds), ran_here ? "" : ", run by another process"));
}

void SweepDisplay::on_skip(const Cell& cell, const SweepCounts& counts) {
  const bool by_depth = plan_.study.protocol == Protocol::min_depth;
  const std::string why = plan_.gate_first ? "the deepest depth did not reach the threshold, or a shallower one did"
                          : by_depth       ? "a shallower depth reached the threshold"
                                           : fmt::format("an earlier {} reached stop_at {:g}", plan_.stage_axis, plan_.threshold);
  event(fmt::format("[{}/{}] skip {} ({})", counts.finished + counts.skipped, counts.total, cell.label(), why));
}

void SweepDisplay::on_waiting(const Cell& cell) {
  event(fmt::format("        wait {}: another process holds its lock (a run left by an earlier sweep?)", cell.label()));
}

int64_t SweepDisplay::current_step(const Cell& cell) const {
  std::ifstream in(fs::path(out_dir_) / cell.dir / "metrics.jsonl", std::ios::binary | std::ios::ate);
  if (!in) return -1;
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  const auto at = tail.rfind("\"step\":");
  if (at == std::string::npos) return -1;
  return std::strtoll(tail.c_str() + at + 7, nullptr, 10);
}

std::string SweepDisplay::eta(const SweepCounts& counts, const std::vector<RunningCell>& running) const {
  if (ran_ == 0) return "eta ?";
  const double mean = ran_seconds_ / static_cast<double>(ran_);
  double work = static_cast<double>(counts.pending) * mean;
  for (const auto& r : running) work += std::max(0.0, mean - since(r.started));
  const bool upper = !plan_.groups.empty() && counts.pending > 0;
  return fmt::format("eta {}{}", upper ? "<= " : "~", format_seconds(work / static_cast<double>(slots_)));
}

void SweepDisplay::draw_block(const SweepCounts& counts, const std::vector<RunningCell>& running) {
  winsize ws{};
  const size_t width = ::ioctl(::fileno(stream_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 ? ws.ws_col - 1 : 99;
  std::vector<std::string> lines;
  lines.push_back(fmt::format("sweep {} [{}/{}] {} running, {} failed, {} skipped, {} pending{} | {} elapsed, {}", plan_.study.name,
                              counts.finished + counts.skipped, counts.total, counts.running, counts.failed, counts.skipped,
                              counts.pending, counts.waiting ? fmt::format(" ({} waiting for a lock)", counts.waiting) : "",
                              format_seconds(since(start_)), eta(counts, running)));
  for (size_t i = 0; i < running.size() && i < kMaxRunningShown; ++i) {
    const Cell& cell = plan_.cells[running[i].cell];
    const int64_t step = current_step(cell);
    const std::string where = step >= 0 ? fmt::format("step {}/{}", step, cell.config.train.steps) : "starting";
    lines.push_back(fmt::format("  {:<7} {:>16} {:>8}  {}", running[i].device, where, format_seconds(since(running[i].started)),
                                cell.label()));
  }
  if (running.size() > kMaxRunningShown) lines.push_back(fmt::format("  ... and {} more", running.size() - kMaxRunningShown));
  for (const auto& l : lines) fmt::print(stream_, "{}\x1b[K\n", fit(l, width));
  block_lines_ = static_cast<int>(lines.size());
}

void SweepDisplay::on_tick(const SweepCounts& counts, const std::vector<RunningCell>& running) {
  if (mode_ != DisplayMode::live || since(last_draw_) < kRedrawSeconds) return;
  last_draw_ = Clock::now();
  clear_block();
  announce_reuse();
  draw_block(counts, running);
  std::fflush(stream_);
}

void SweepDisplay::finish(const SweepResult& result) {
  if (mode_ == DisplayMode::quiet) return;
  clear_block();
  const SweepCounts& c = result.counts;
  fmt::print(stream_, "sweep {}: {} cells: {} finished ({} failed), {} skipped, {} unfinished; {} reused, {} run now in {}\n",
             plan_.study.name, c.total, c.finished, c.failed, c.skipped, c.pending + c.running, c.reused, ran_,
             format_seconds(since(start_)));
  if (!plan_.groups.empty() && result.groups.size() == plan_.groups.size()) {
    const bool by_depth = plan_.study.protocol == Protocol::min_depth;
    if (by_depth) {
      const MinDepthOptions& o = plan_.study.min_depth;
      fmt::print(stream_, "min {} with best {} >= {}{}{}:\n", o.axis, o.metric, o.threshold,
                 o.best_over.empty() ? "" : fmt::format(" over {}", fmt::join(o.best_over, ", ")),
                 o.deepest_first ? " (deepest first)" : "");
    } else {
      fmt::print(stream_, "first {} (in the order listed) whose mean {} >= {:g}:\n", plan_.stage_axis, plan_.metric,
                 plan_.threshold);
    }
    for (size_t g = 0; g < plan_.groups.size(); ++g) {
      const auto& status = result.groups[g];
      const auto& group = plan_.groups[g];
      const std::string deepest = plan_.gate_first ? group.labels.front() : group.labels.back();
      const std::string none = by_depth ? fmt::format("none up to {}", deepest) : "none (every value ran)";
      fmt::print(stream_, "  {}: {}\n", group.key,
                 status.reached ? group.labels[*status.reached] : status.decided ? none : "undecided");
    }
  }
  if (result.interrupted)
    fmt::print(stream_, "{}: the unfinished cells resume when the same command is run again\n",
               result.stopped_because.empty() ? "interrupted" : "stopped after repeated failures");
  else if (c.failed > 0)
    fmt::print(stream_, "failed cells keep their log in CELLDIR/log.txt and are retried when the same command is run again\n");
  fmt::print(stream_, "results: {}/manifest.json\nmake the table: statebench table {}\n", out_dir_, out_dir_);
  std::fflush(stream_);
}

}  // namespace sb::sweep
