#include "base/run_lease.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

namespace rm {
namespace {

std::string read_small_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[1024];
  const ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// The renewing holder's state. Allocated once and never freed: the renewal thread is detached
// and may still run while static objects are destroyed at exit.
struct Held {
  std::mutex mu;
  int fd = -1;
  std::string holder;
  Lease lease;
  bool released = false;
};
Held* g_held = nullptr;

// Rewrites the whole lock file (it only grows while N counts up; "released" is shorter, hence
// the truncate) and pushes it to the disk, or the NFS server, where other hosts read it.
// Plain system calls, not io/: the file is rewritten in place because the flock lives on its
// inode (an atomic replace by rename would drop it), and from a detached thread, even during
// exit, that must never throw. A failed renewal needs no handling: other hosts then see the
// counter stand still and take over after the lease time, which is the lease's contract.
void write_lock_file(const Held& h) {
  const std::string text = lock_file_text(h.holder, h.lease);
  if (h.lease.state == Lease::State::kReleased && ::ftruncate(h.fd, 0) != 0) return;
  if (::pwrite(h.fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size())) {
    ::fdatasync(h.fd);
  }
}

void release_at_exit() {
  std::lock_guard<std::mutex> guard(g_held->mu);
  g_held->released = true;
  g_held->lease.state = Lease::State::kReleased;
  write_lock_file(*g_held);
}

}  // namespace

Lease read_lease(const std::string& path) {
  std::istringstream lines(read_small_file(path));
  Lease lease;
  for (std::string line; std::getline(lines, line);) {
    if (line == "released") {
      lease.state = Lease::State::kReleased;
    } else if (line.rfind("lease ", 0) == 0) {
      std::istringstream f(line.substr(6));
      Lease l;
      l.state = Lease::State::kHeld;
      if (f >> l.host >> l.pid >> l.n) lease = l;
    }
  }
  return lease;
}

std::string lock_file_text(const std::string& holder, const Lease& lease) {
  std::string text = holder + "\n";
  if (lease.state == Lease::State::kReleased) return text + "released\n";
  if (lease.state == Lease::State::kHeld) {
    text += "lease " + lease.host + " " + std::to_string(lease.pid) + " " +
            std::to_string(lease.n) + "\n";
  }
  return text;
}

PreviousHolder check_previous_holder(const std::string& path, const std::string& my_host,
                                     double lease_s) {
  PreviousHolder p;
  p.holder = first_line(read_small_file(path));
  const Lease first = read_lease(path);
  if (first.state != Lease::State::kHeld) return p;
  if (first.host == my_host) {
    p.message = "taking over the lock of a run that did not release it (" + p.holder +
                "): it has exited, since this host holds no lock on it";
    return p;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto poll = std::chrono::duration<double>(lease_s / 20);
  while (Clock::now() - start < std::chrono::duration<double>(lease_s)) {
    std::this_thread::sleep_for(poll);
    const Lease now = read_lease(path);
    if (now.state != Lease::State::kHeld || now.host != first.host || now.pid != first.pid ||
        now.n != first.n) {
      // Renewed, released or replaced: someone on another host holds it, or just did.
      p.live = now.state != Lease::State::kReleased;
      if (!p.live) return p;
      p.holder = first_line(read_small_file(path));
      return p;
    }
  }
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  std::ostringstream msg;
  msg.precision(3);
  msg << "taking over the lock of a run on another host (" << p.holder << "): its lease was not "
      << "renewed for " << waited << " s (its node died?)";
  p.message = msg.str();
  return p;
}

void hold_lease(int fd, const std::string& holder, const std::string& host, double renew_s) {
  if (g_held != nullptr) return;
  g_held = new Held;
  g_held->fd = fd;
  g_held->holder = holder;
  g_held->lease = Lease{Lease::State::kHeld, host, static_cast<long>(::getpid()), 1};
  write_lock_file(*g_held);
  std::atexit(release_at_exit);
  std::thread([renew_s] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::duration<double>(renew_s));
      std::lock_guard<std::mutex> guard(g_held->mu);
      if (g_held->released) return;
      ++g_held->lease.n;
      write_lock_file(*g_held);
    }
  }).detach();
}

double run_lock_lease_s() {
  if (const char* v = std::getenv("RM_RUN_LOCK_LEASE_S")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end != v && *end == '\0' && s > 0 && s <= 3600) return s;
  }
  return 30.0;
}

}  // namespace rm
