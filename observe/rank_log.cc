#include "observe/rank_log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/rank_end.h"
#include "io/atomic_file.h"

namespace rm {
namespace {

// ---- The logger child: async-signal-safe calls only, no heap. ----------------------------

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // nowhere to write: drop it rather than spin
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// "2026-11-23T18:02:11.123Z" into out (24 characters), from CLOCK_REALTIME, without gmtime
// (which is not async-signal-safe): days since 1970 to a civil date (H. Hinnant's algorithm).
void format_utc_now(char* out) {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const long long secs = ts.tv_sec;
  long long days = secs / 86400, rem = secs % 86400;
  days += 719468;
  const long long era = days / 146097, doe = days - era * 146097;
  const long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  const long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
  const long long y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  const long long fields[] = {y, m, d, rem / 3600, rem / 60 % 60, rem % 60, ts.tv_nsec / 1000000};
  const int widths[] = {4, 2, 2, 2, 2, 2, 3};
  const char seps[] = {'-', '-', 'T', ':', ':', '.', 'Z'};
  for (int i = 0; i < 7; ++i) {
    long long v = fields[i];
    for (int k = widths[i] - 1; k >= 0; --k) {
      out[k] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
    out += widths[i];
    *out++ = seps[i];
  }
}

struct Stream {
  int in = -1;       // read end of the pipe
  int console = -1;  // where the bytes also go, or -1
  char line[16384];
  size_t used = 0;
};

void emit_line(int log, const char* prefix, size_t prefix_len, const char* text, size_t n) {
  char stamp[32];
  format_utc_now(stamp);
  stamp[24] = ' ';
  write_all(log, stamp, 25);
  write_all(log, prefix, prefix_len);
  write_all(log, text, n);
  if (n == 0 || text[n - 1] != '\n') write_all(log, "\n", 1);
}

// RUN_DIR/logs/rank-K.ended and the token it gets (base/rank_end.h), set before the fork: the
// logger writes it once the rank and all it started have exited. Empty path: none.
char g_end_marker[4096];
char g_end_token[512];

// The marker, written by the logger at its end (async-signal-safe calls only).
void write_end_marker() {
  if (g_end_marker[0] == '\0') return;
  const int fd = ::open(g_end_marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  write_all(fd, g_end_token, std::strlen(g_end_token));
  ::close(fd);
}

[[noreturn]] void logger_main(Stream* streams, int log, int rank) {
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
  char prefix[32] = "[rank ";
  size_t plen = 6;
  char digits[12];
  int nd = 0;
  do {
    digits[nd++] = static_cast<char>('0' + rank % 10);
    rank /= 10;
  } while (rank > 0);
  while (nd > 0) prefix[plen++] = digits[--nd];
  prefix[plen++] = ']';
  prefix[plen++] = ' ';
  int open = 2;
  while (open > 0) {
    pollfd fds[2];
    for (int i = 0; i < 2; ++i) fds[i] = {streams[i].in, POLLIN, 0};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      Stream& s = streams[i];
      if (s.in < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(s.in, s.line + s.used, sizeof s.line - s.used);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // end of file: the rank and all its children are gone
        if (s.used > 0) emit_line(log, prefix, plen, s.line, s.used);
        s.used = 0;
        ::close(s.in);
        s.in = -1;
        --open;
        continue;
      }
      if (s.console >= 0) write_all(s.console, s.line + s.used, static_cast<size_t>(n));
      s.used += static_cast<size_t>(n);
      size_t start = 0;
      for (size_t k = 0; k < s.used; ++k) {
        if (s.line[k] == '\n') {
          emit_line(log, prefix, plen, s.line + start, k + 1 - start);
          start = k + 1;
        } else if (s.line[k] == '\r') {
          // A terminal redraw ("\r\033[K" and the progress line, observe/console_progress.h):
          // the console shows it, the log keeps what stays on the screen. What came before on
          // this line is gone, and so is the erase sequence; a log line held every redraw
          // since the last permanent line, escapes and all, and long ones were cut. A CRLF's
          // \r is no redraw; one that ends what was read waits for the next read to say which.
          if (k + 3 >= s.used && s.used < sizeof s.line) break;  // "\r", "\r\033", "\r\033["
          if (k + 1 < s.used && s.line[k + 1] == '\n') continue;
          start = k + 1;
          if (k + 3 < s.used && std::memcmp(s.line + start, "\033[K", 3) == 0) start += 3;
          k = start - 1;
        }
      }
      if (start == 0 && s.used == sizeof s.line) {  // a line longer than the buffer: cut it
        emit_line(log, prefix, plen, s.line, s.used);
        start = s.used;
      }
      std::memmove(s.line, s.line + start, s.used - start);
      s.used -= start;
    }
  }
  write_end_marker();
  ::_exit(0);
}

pid_t g_logger = -1;

void check(bool ok, const std::string& what) {
  if (!ok) throw IoError(what + ": " + std::strerror(errno));
}

}  // namespace

void start_rank_log(const std::string& run_dir, int rank) {
  const std::string dir = run_dir + "/logs";
  check(::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST, dir + ": cannot create");
  const std::string path = dir + "/rank-" + std::to_string(rank) + ".log";
  // O_NONBLOCK: a FIFO there would hold the open (and the rank) until a reader came; without
  // one it fails at once. Only a regular file is appended to, then written blocking as usual.
  const int log =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
  if (log < 0 && errno == ENXIO) throw IoError(path + ": a FIFO, not a regular file");
  check(log >= 0, path + ": cannot open");
  struct stat st;
  if (::fstat(log, &st) != 0 || !S_ISREG(st.st_mode) ||
      ::fcntl(log, F_SETFL, ::fcntl(log, F_GETFL) & ~O_NONBLOCK) != 0) {
    ::close(log);
    throw IoError(path + ": not a regular file");
  }
  // This rank's end, for its supervisor (base/rank_end.h); a marker of an earlier start goes now.
  const std::string marker = rank_end_marker_path(run_dir, rank);
  const std::string token = rank_end_token();
  ::unlink(marker.c_str());
  g_end_marker[0] = '\0';
  if (!token.empty() && marker.size() < sizeof g_end_marker && token.size() < sizeof g_end_token) {
    std::memcpy(g_end_marker, marker.c_str(), marker.size() + 1);
    std::memcpy(g_end_token, token.c_str(), token.size() + 1);
  }
  int out[2], err[2];
  check(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, "rank log: pipe");
  std::fflush(stdout);
  std::fflush(stderr);
  static Stream streams[2];  // static: the child must not allocate, and its stack is small
  streams[0].in = out[0];
  streams[0].console = rank == 0 ? ::dup(STDOUT_FILENO) : -1;
  streams[1].in = err[0];
  streams[1].console = ::dup(STDERR_FILENO);
  const pid_t pid = ::fork();
  check(pid >= 0, "rank log: fork");
  if (pid == 0) {
    ::close(out[1]);
    ::close(err[1]);
    logger_main(streams, log, rank);
  }
  g_logger = pid;
  std::atexit([] { finish_rank_log(true); });
  check(::dup2(out[1], STDOUT_FILENO) >= 0 && ::dup2(err[1], STDERR_FILENO) >= 0, "rank log: dup2");
  for (int fd : {out[0], out[1], err[0], err[1], log, streams[0].console, streams[1].console}) {
    if (fd >= 0) ::close(fd);
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
}

void finish_rank_log(bool flush) {
  if (g_logger <= 0) return;
  const pid_t logger = g_logger;
  g_logger = -1;
  if (flush) {
    std::fflush(stdout);
    std::fflush(stderr);
  }
  ::close(STDOUT_FILENO);
  ::close(STDERR_FILENO);
  while (::waitpid(logger, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace rm
