// progress.cpp: the terminal / plain / silent progress reporter (see progress.hpp).
#include "io/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace sb {

namespace {
constexpr int kBarWidth = 30;
constexpr double kBarRedrawSeconds = 0.1;
constexpr double kPlainMinSeconds = 1.0;
}  // namespace

bool is_terminal(std::FILE* stream) { return stream && ::isatty(::fileno(stream)) == 1; }

std::string human_count(double n) {
  const double a = std::fabs(n);
  if (a < 1e3) return fmt::format("{:.0f}", n);
  if (a < 1e6) return fmt::format("{:.3g}k", n / 1e3);
  if (a < 1e9) return fmt::format("{:.3g}M", n / 1e6);
  return fmt::format("{:.3g}G", n / 1e9);
}

std::string human_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 59.95) return fmt::format("{:.1f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
}

Progress::Progress(std::string label, int64_t total, ProgressMode mode, std::FILE* stream, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(std::max<int64_t>(total, 0)), mode_(mode),
      stream_(stream), start_(std::chrono::steady_clock::now()), last_draw_(start_) {
  if (mode_ == ProgressMode::kAuto) mode_ = is_terminal(stream_) ? ProgressMode::kBar : ProgressMode::kSilent;
  if (!stream_) mode_ = ProgressMode::kSilent;
}

Progress::~Progress() {
  if (mode_ == ProgressMode::kBar && drawn_ && !finished_) {
    std::fputc('\n', stream_);
    std::fflush(stream_);
  }
}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done) {
  if (mode_ == ProgressMode::kSilent || finished_ || done == last_done_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since_draw = std::chrono::duration<double>(now - last_draw_).count();
  if (mode_ == ProgressMode::kBar) {
    if (drawn_ && since_draw < kBarRedrawSeconds) return;
  } else {
    const int decile = total_ > 0 ? static_cast<int>(std::min<int64_t>(done, total_) * 10 / total_) : 0;
    if (decile <= last_plain_decile_ || since_draw < kPlainMinSeconds) return;
    last_plain_decile_ = decile;
  }
  last_draw_ = now;
  draw(done, false);
}

void Progress::finish(int64_t done) {
  if (finished_) return;
  if (done < 0) done = total_;
  // Plain mode prints lines, not redraws: the line of the last update() stands as the final one.
  const bool already_printed = mode_ == ProgressMode::kPlain && drawn_ && last_done_ == done;
  if (mode_ != ProgressMode::kSilent && !already_printed) draw(done, true);
  finished_ = true;
}

void Progress::draw(int64_t done, bool final) {
  last_done_ = done;
  drawn_ = true;
  const double t = elapsed();
  const double frac = total_ > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0) : 1.0;
  std::string text = fmt::format("{} {:3.0f}% {}/{}{}{} {}", label_, 100 * frac, human_count(static_cast<double>(done)),
                                 human_count(static_cast<double>(total_)), unit_.empty() ? "" : " ", unit_, human_duration(t));
  const double done_here = static_cast<double>(done - std::min(start_done_, done));
  if (!final && done_here > 0 && frac < 1)
    text += " eta " + human_duration(t * static_cast<double>(std::max<int64_t>(total_ - done, 0)) / done_here);
  if (!note_.empty()) text += "  " + note_;
  if (mode_ == ProgressMode::kBar) {
    const int filled = static_cast<int>(frac * kBarWidth);
    std::string bar(kBarWidth, ' ');
    std::fill(bar.begin(), bar.begin() + filled, '=');
    if (filled < kBarWidth) bar[filled] = '>';
    // \r returns to the line start, \x1b[K clears what a longer previous line left behind.
    fmt::print(stream_, "\r{} [{}] {}\x1b[K{}", label_, bar, text.substr(label_.size() + 1), final ? "\n" : "");
  } else {
    fmt::print(stream_, "{}\n", text);
  }
  std::fflush(stream_);
}

}  // namespace sb
