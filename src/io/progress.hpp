// progress.hpp: progress reporting for long CLI jobs (generate, later train/sweep). On a terminal
// it redraws one status line ("label [=====>    ] 45% 4.5k/10k 2.1s eta 2.6s"); in plain mode it
// prints an occasional full line (for logs); silent mode prints nothing. Thread-compatible: call
// update() from one thread.
#pragma once
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

  void update(int64_t done);  // cheap when nothing needs redrawing (rate-limited)
  void finish();              // the work is complete: final 100% line; idempotent
  void set_note(std::string note) { note_ = std::move(note); }  // shown after the counts (e.g. loss)
  ProgressMode mode() const { return mode_; }

 private:
  void draw(int64_t done, bool final);
  double elapsed() const;

  std::string label_, unit_, note_;
  int64_t total_;
  ProgressMode mode_;
  std::FILE* stream_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t last_done_ = -1;
  int last_plain_decile_ = -1;
  bool drawn_ = false, finished_ = false;
};

// Compact counts for status lines: 950, 12.3k, 4.50M, 1.20G.
std::string human_count(double n);

}  // namespace sb
