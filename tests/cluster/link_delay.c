// link_delay: a learning Ethernet switch between TAP devices that delivers every frame a fixed
// delay after it arrived. tests/cluster/cluster.sh puts it between its test hosts to add a link
// delay where the kernel has no netem (the qdisc that would normally add one).
//
//   link_delay --delay-us US [--ready FILE] TAP...
//
// Opens each TAP (IFF_TAP | IFF_NO_PI, created if it does not exist, gone again when this exits).
// A frame read from one TAP is written, US microseconds after it was read, to the TAP its
// destination MAC was last seen on as a source, or to every other TAP when that is unknown or the
// destination is broadcast/multicast. Each output TAP has a FIFO capped at QUEUE_BYTES: a frame
// that does not fit is dropped, as a full switch queue would drop it; so is a frame the TAP refuses
// (its host side is down, for instance). Writes FILE (its pid) once every TAP is open.
// Exits 0 on SIGTERM/SIGINT, printing the drop counts to stderr; a setup error exits 1 with a
// message naming the TAP and the error. Nothing is printed while it runs.
//
// Timing: a frame is stamped with CLOCK_MONOTONIC when read; the loop sleeps in epoll_pwait2 until
// the next frame falls due, with a 1 ns timer slack (the default 50 us would swamp a 0.2 ms delay).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { MAX_PORTS = 128, MAX_MACS = 1024, READ_BURST = 64, ETH_HEADER = 14 };
#define MAX_FRAME 65536  // a TAP's largest frame: MTU 65521 plus the 14-byte Ethernet header
#define QUEUE_BYTES ((size_t)64 << 20)  // per output port
#define NEVER INT64_MAX

struct frame {
  struct frame *next;
  int64_t due_ns;
  size_t len;
  unsigned char data[];
};
struct port {
  const char *name;
  int fd;
  struct frame *head, *tail;  // due times ascend: every frame waits the same delay
  size_t queued_bytes;
  uint64_t dropped_full, dropped_refused;
};
struct mac_entry {
  unsigned char mac[6];
  int port;
};

static struct port ports[MAX_PORTS];
static int nports;
static struct mac_entry macs[MAX_MACS];  // few hosts: a linear search beats hashing
static int nmacs;
static int64_t delay_ns, next_due = NEVER;
static volatile sig_atomic_t stopping;

static void die(const char *what, const char *name) {
  fprintf(stderr, "link_delay: %s %s: %s\n", what, name, strerror(errno));
  exit(1);
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int open_tap(const char *name) {
  struct ifreq ifr = {0};
  if (strlen(name) >= IFNAMSIZ) {
    errno = ENAMETOOLONG;
    die("cannot open tap", name);
  }
  strcpy(ifr.ifr_name, name);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("cannot open /dev/net/tun for", name);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("cannot attach to tap", name);
  return fd;
}

// The port MAC was last seen on as a source, or -1 (unknown, broadcast or multicast).
static int lookup(const unsigned char *mac) {
  if (mac[0] & 1) return -1;
  for (int i = 0; i < nmacs; i++)
    if (memcmp(macs[i].mac, mac, 6) == 0) return macs[i].port;
  return -1;
}

static void learn(const unsigned char *mac, int port) {
  if (mac[0] & 1) return;
  for (int i = 0; i < nmacs; i++)
    if (memcmp(macs[i].mac, mac, 6) == 0) {
      macs[i].port = port;
      return;
    }
  if (nmacs == MAX_MACS) return;  // full: frames to a new MAC keep being flooded
  memcpy(macs[nmacs].mac, mac, 6);
  macs[nmacs++].port = port;
}

static void enqueue(struct port *p, const unsigned char *data, size_t len, int64_t due) {
  if (p->queued_bytes + len > QUEUE_BYTES) {
    p->dropped_full++;
    return;
  }
  struct frame *f = malloc(sizeof *f + len);
  if (!f) die("out of memory queueing for", p->name);
  f->next = NULL;
  f->due_ns = due;
  f->len = len;
  memcpy(f->data, data, len);
  if (p->tail) p->tail->next = f; else p->head = f;
  p->tail = f;
  p->queued_bytes += len;
  if (due < next_due) next_due = due;
}

// Reads what `in` has (up to READ_BURST frames, fewer if a queued frame falls due meanwhile) and
// queues each frame for its output port(s).
static void forward(int in) {
  static unsigned char buf[MAX_FRAME];
  for (int n = 0; n < READ_BURST; n++) {
    ssize_t len = read(ports[in].fd, buf, sizeof buf);
    if (len < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (len < 0) die("cannot read from tap", ports[in].name);
    int64_t now = now_ns();
    if (len < ETH_HEADER) continue;
    learn(buf + 6, in);
    int out = lookup(buf);
    if (out < 0) {
      for (int i = 0; i < nports; i++)
        if (i != in) enqueue(&ports[i], buf, len, now + delay_ns);
    } else if (out != in) {
      enqueue(&ports[out], buf, len, now + delay_ns);
    }
    if (now >= next_due) return;
  }
}

// Writes every frame due by `now`, and sets next_due to the earliest one still queued.
static void deliver(int64_t now) {
  next_due = NEVER;
  for (int i = 0; i < nports; i++) {
    struct port *p = &ports[i];
    struct frame *f;
    while ((f = p->head) && f->due_ns <= now) {
      if (write(p->fd, f->data, f->len) != (ssize_t)f->len) p->dropped_refused++;
      p->head = f->next;
      if (!p->head) p->tail = NULL;
      p->queued_bytes -= f->len;
      free(f);
    }
    if (f && f->due_ns < next_due) next_due = f->due_ns;
  }
}

static void on_signal(int sig) {
  (void)sig;
  stopping = 1;
}

static void usage(void) {
  fprintf(stderr, "usage: link_delay --delay-us US [--ready FILE] TAP...  (at most %d TAPs)\n",
          MAX_PORTS);
  exit(2);
}

int main(int argc, char **argv) {
  static const struct option options[] = {
      {"delay-us", required_argument, NULL, 'd'}, {"ready", required_argument, NULL, 'r'}, {0}};
  const char *ready = NULL;
  long delay_us = -1;
  for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
    char *end;
    if (c == 'd') {
      delay_us = strtol(optarg, &end, 10);
      if (*optarg == '\0' || *end != '\0' || delay_us < 0 || delay_us > 10000000) usage();
    } else if (c == 'r') {
      ready = optarg;
    } else {
      usage();
    }
  }
  nports = argc - optind;
  if (delay_us < 0 || nports < 1 || nports > MAX_PORTS) usage();
  delay_ns = delay_us * 1000;

  // SIGTERM/SIGINT stay blocked except inside epoll_pwait2, so neither can slip in between the
  // check of `stopping` and the wait.
  sigset_t blocked, waiting;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  sigprocmask(SIG_BLOCK, &blocked, &waiting);
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  if (prctl(PR_SET_TIMERSLACK, 1UL) < 0) die("cannot set the timer slack", "");

  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("cannot create", "epoll");
  for (int i = 0; i < nports; i++) {
    ports[i].name = argv[optind + i];
    ports[i].fd = open_tap(ports[i].name);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ports[i].fd, &ev) < 0) die("cannot poll tap", ports[i].name);
  }
  if (ready) {
    FILE *f = fopen(ready, "w");
    if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0)
      die("cannot write", ready);
  }

  struct epoll_event events[MAX_PORTS];
  while (!stopping) {
    int64_t now = now_ns();
    deliver(now);
    struct timespec timeout = {(next_due - now) / 1000000000, (next_due - now) % 1000000000};
    int n = epoll_pwait2(ep, events, nports, next_due == NEVER ? NULL : &timeout, &waiting);
    if (n < 0 && errno != EINTR) die("cannot wait for", "the taps");
    for (int i = 0; i < n; i++) forward((int)events[i].data.u32);
  }
  for (int i = 0; i < nports; i++)
    fprintf(stderr, "link_delay: %s: %llu frames dropped (queue full), %llu refused by the tap\n",
            ports[i].name, (unsigned long long)ports[i].dropped_full,
            (unsigned long long)ports[i].dropped_refused);
  return 0;
}
