// Time elapsed on the steady clock since t0 (how benchmarks, phases and steps are timed), and
// since this process started.
#pragma once

#include <chrono>

namespace rm {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Seconds since this process was started (by fork/exec), from /proc/self/stat's start time
// against /proc/uptime: to 10 ms (the kernel counts clock ticks). How a restarted rank tells
// how long its own start-up took. -1 where /proc cannot say.
double process_age_s();

}  // namespace rm
