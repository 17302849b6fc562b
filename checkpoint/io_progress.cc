#include "checkpoint/io_progress.h"

#include <atomic>

namespace rm {
namespace {

std::atomic<uint64_t> g_beats{0};
std::atomic<const char*> g_activity{""};
std::atomic<IoProgressHook> g_hook{nullptr};

}  // namespace

void note_io_progress() {
  g_beats.fetch_add(1, std::memory_order_relaxed);
  if (IoProgressHook hook = g_hook.load(std::memory_order_relaxed)) hook();
}

uint64_t io_progress_count() {
  return g_beats.load(std::memory_order_relaxed);
}

void set_io_activity(const char* what) {
  g_activity.store(what, std::memory_order_relaxed);
}

const char* io_activity() {
  return g_activity.load(std::memory_order_relaxed);
}

void set_io_progress_hook(IoProgressHook hook) {
  g_hook.store(hook);
}

}  // namespace rm
