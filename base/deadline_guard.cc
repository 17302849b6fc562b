#include "base/deadline_guard.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace rm {

DeadlineGuard::DeadlineGuard(double seconds, std::string what, std::string likely_cause,
                             int exit_code) {
  watcher_ = std::thread([this, seconds, what = std::move(what),
                          cause = std::move(likely_cause), exit_code] {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    if (cv_.wait_until(lock, deadline, [this] { return disarmed_; })) return;
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    std::fprintf(stderr,
                 "ringmaster: [pid %d on %s] %s did not return within %g s (%s); ending this "
                 "process\n",
                 static_cast<int>(::getpid()), host, what.c_str(), seconds, cause.c_str());
    std::fflush(stderr);
    ::_exit(exit_code);
  });
}

DeadlineGuard::~DeadlineGuard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    disarmed_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

}  // namespace rm
