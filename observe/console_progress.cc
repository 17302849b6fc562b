#include "observe/console_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/elapsed.h"

namespace rm {
namespace {

constexpr size_t kRecentSteps = 20;
constexpr const char* kEraseLine = "\r\033[K";

}  // namespace

std::string duration_text(double seconds) {
  // Bounded before the conversion (a hostile metrics line's step_ms of 1e300 made it undefined):
  // NaN reads as 0, anything past 100000 hours as that.
  const long long s = static_cast<long long>(std::min(std::max(0.0, seconds), 3.6e8) + 0.5);
  char buf[48];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

bool console_is_terminal() {
  if (const char* v = std::getenv(kConsoleTtyEnv)) return std::strcmp(v, "1") == 0;
  return ::isatty(STDOUT_FILENO) == 1;
}

ConsoleProgress::ConsoleProgress(int64_t total_steps, bool terminal, double flops_per_step,
                                 double sgemm_flops_per_s, double peak_flops_per_s)
    : total_(std::max<int64_t>(1, total_steps)),
      terminal_(terminal),
      flops_per_step_(flops_per_step),
      sgemm_rate_(sgemm_flops_per_s),
      peak_rate_(peak_flops_per_s),
      start_(std::chrono::steady_clock::now()) {}

std::string ConsoleProgress::progress_line(const StepMetrics& m) const {
  const double elapsed = seconds_since(start_);
  std::vector<double> sorted = recent_ms_;
  std::sort(sorted.begin(), sorted.end());
  const double step_ms = sorted.empty() ? m.step_ms : sorted[sorted.size() / 2];
  char buf[256];
  int n = std::snprintf(buf, sizeof buf,
                        "step %6lld/%lld %5.1f%% | %s elapsed, eta %s | loss %.4f | %.0f tok/s",
                        static_cast<long long>(m.step), static_cast<long long>(total_),
                        100.0 * static_cast<double>(m.step) / static_cast<double>(total_),
                        duration_text(elapsed).c_str(),
                        duration_text(step_ms / 1e3 * static_cast<double>(total_ - m.step)).c_str(),
                        m.loss, m.tokens_per_s);
  // snprintf returns the length it wanted: a loss of 1e300 in %.4f would not fit.
  std::string line(buf, static_cast<size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
  if (sgemm_rate_ > 0 && flops_per_step_ > 0 && step_ms > 0) {
    const double rate = flops_per_step_ / (step_ms / 1e3);
    std::snprintf(buf, sizeof buf, " | MFU %.0f%% of sgemm", 100.0 * rate / sgemm_rate_);
    line += buf;
    if (peak_rate_ > 0) {
      std::snprintf(buf, sizeof buf, ", %.0f%% of peak", 100.0 * rate / peak_rate_);
      line += buf;
    }
  }
  return line;
}

void ConsoleProgress::step(const StepMetrics& m, bool permanent) {
  recent_ms_.push_back(m.step_ms);
  if (recent_ms_.size() > kRecentSteps) recent_ms_.erase(recent_ms_.begin());
  std::string out;
  if (permanent) out += (drawn_ ? std::string(kEraseLine) : "") + format_log_line(m, total_) + "\n";
  if (terminal_) {
    out += kEraseLine + progress_line(m);
    drawn_ = true;
  } else {
    drawn_ = false;
  }
  if (out.empty()) return;
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

void ConsoleProgress::clear() {
  if (!drawn_) return;
  std::fputs(kEraseLine, stdout);
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace rm
