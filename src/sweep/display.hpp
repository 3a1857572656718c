// display.hpp: what `statebench sweep` shows while it runs. On a terminal (live mode) event lines
// scroll above a status block redrawn in place (counts, ETA, each running cell with its training
// step); otherwise (plain mode) one line per event, e.g.
// "[12/40] done attention=path,n_layers=2 val.token_accuracy=0.991 (3.2 s)". Ends with a summary.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "sweep/runner.hpp"

namespace sb::sweep {

enum class DisplayMode { live, plain, quiet };

class SweepDisplay final : public SweepObserver {
 public:
  SweepDisplay(const Plan& plan, std::string out_dir, size_t slots, DisplayMode mode, std::FILE* stream = stdout);

  void on_reused(const Cell& cell, const CellResult& result) override;
  void on_start(const Cell& cell, const RunningCell& running) override;
  void on_finish(const Cell& cell, const CellResult& result, const SweepCounts& counts, bool ran_here) override;
  void on_skip(const Cell& cell, const SweepCounts& counts) override;
  void on_waiting(const Cell& cell) override;
  void on_tick(const SweepCounts& counts, const std::vector<RunningCell>& running) override;

  // Clears the live block and prints the summary and the command that makes the table.
  void finish(const SweepResult& result);

 private:
  void event(const std::string& line);  // prints above the live block (or as a plain line)
  void clear_block();
  void announce_reuse();  // "resuming: K of N cells already finished", once, before anything else
  void draw_block(const SweepCounts& counts, const std::vector<RunningCell>& running);
  std::string eta(const SweepCounts& counts, const std::vector<RunningCell>& running) const;
  std::string result_text(const CellResult& r) const;
  int64_t current_step(const Cell& cell) const;  // from the cell's metrics.jsonl, -1 if unknown

  const Plan& plan_;
  std::string out_dir_;
  size_t slots_;
  DisplayMode mode_;
  std::FILE* stream_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int block_lines_ = 0;
  size_t reused_ = 0, ran_ = 0;
  bool announced_reuse_ = false;
  double ran_seconds_ = 0;  // wall seconds of cells run by this sweep
};

std::string format_seconds(double s);  // "0.8 s", "42 s", "3m05s", "2h14m"

}  // namespace sb::sweep
