// Time elapsed on the steady clock since t0 (how benchmarks, phases and steps are timed), and
// since this process started.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace rm {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// CLOCK_MONOTONIC in nanoseconds. Async-signal-safe (clock_gettime is, POSIX): for signal
// handlers, which std::chrono's clocks are not promised to be.
inline int64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// Seconds since this process was started (by fork/exec), from /proc/self/stat's start time
// against /proc/uptime: to 10 ms (the kernel counts clock ticks). How a restarted rank tells
// how long its own start-up took. -1 where /proc cannot say.
double process_age_s();

}  // namespace rm
