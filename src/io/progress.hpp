// progress.hpp: progress reporting for long CLI jobs (generate, train). On a terminal it redraws
// one status line ("label [=====>    ] 45% 4.5k/10k 2.1s eta 2.6s  note"); in plain mode it prints
// an occasional full line (for logs), the last one once; silent mode prints nothing. The one ETA
// is the rate of this process's work (a resumed job's earlier work excluded) applied to what is
// left. Thread-compatible: call update() from one thread.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace sb {

enum class ProgressMode {
  kAuto,    // kBar when the stream is a terminal, else kSilent
  kBar,     // redraw a single line with '\r'
  kPlain,   // a full line roughly every 10% (at most one per second, plus the final one)
  kSilent,  // nothing
};

// True when `stream` is attached to a terminal.
bool is_terminal(std::FILE* stream);

class Progress {
 public:
  // total: the amount of work (e.g. examples); `unit` names it in the status text.
  Progress(std::string label, int64_t total, ProgressMode mode = ProgressMode::kAuto,
           std::FILE* stream = stderr, std::string unit = "");
  ~Progress();  // ends an unfinished bar line so later messages start on a fresh line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Work done before this process started (a resumed run): counted as done, not in the rate.
  void set_start(int64_t done) { start_done_ = std::max<int64_t>(done, 0); }
  void update(int64_t done);  // cheap when nothing needs redrawing (rate-limited)
  // The work has ended at `done` (default: total; less when stopped early): the final line, unless
  // plain mode printed that very line already. Idempotent.
  void finish(int64_t done = -1);
  void set_note(std::string note) { note_ = std::move(note); }  // shown after the counts (e.g. loss)
  ProgressMode mode() const { return mode_; }

 private:
  void draw(int64_t done, bool final);
  double elapsed() const;

  std::string label_, unit_, note_;
  int64_t total_, start_done_ = 0;
  ProgressMode mode_;
  std::FILE* stream_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t last_done_ = -1;
  int last_plain_decile_ = -1;
  bool drawn_ = false, finished_ = false;
};

// Compact counts for status lines: 950, 12.3k, 4.50M, 1.20G.
std::string human_count(double n);
// Compact durations for status lines: 4.2s, 2m05s, 1h02m; "?" when not finite or negative.
std::string human_duration(double seconds);

}  // namespace sb
