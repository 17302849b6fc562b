#include "testing/order_ledger.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace rm {

bool OrderLedger::Span::overlaps(const void* q, size_t n) const {
  const char* c = static_cast<const char*>(q);
  return n > 0 && bytes > 0 && c < p + bytes && p < c + n;
}

void OrderLedger::name_memory(const void* base, size_t bytes, const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  names_.push_back({{static_cast<const char*>(base), bytes}, name});
}

void OrderLedger::forget_memory(const void* base) {
  std::lock_guard<std::mutex> lock(mutex_);
  names_.erase(std::remove_if(names_.begin(), names_.end(),
                              [&](const Named& n) { return n.span.p == base; }),
               names_.end());
}

std::string OrderLedger::describe(const void* p, size_t bytes) const {
  const char* c = static_cast<const char*>(p);
  std::string where;
  for (const Named& n : names_) {
    if (c >= n.span.p && c < n.span.p + std::max<size_t>(n.span.bytes, 1)) {
      where = n.name + "+" + std::to_string(c - n.span.p);
      break;
    }
  }
  if (where.empty()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%p", p);
    where = buf;
  }
  return "[" + where + ", " + std::to_string(bytes) + " bytes)";
}

void OrderLedger::violation(const std::string& what) { violations_.push_back(what); }

void OrderLedger::device_access(const char* call, const void* p, size_t bytes, Access access) {
  std::lock_guard<std::mutex> lock(mutex_);
  const char* verb = access == Access::kWrite ? " writes " : " reads ";
  exposure_.beside_collectives += !collectives_.empty();
  exposure_.beside_downloads += !downloads_.empty();
  for (const Collective& c : collectives_) {
    if (c.buf.overlaps(p, bytes)) {
      violation(std::string(call) + verb + describe(p, bytes) + " while " + c.what + " on " +
                describe(c.buf.p, c.buf.bytes) + " is in flight");
    }
  }
  if (access != Access::kWrite) return;  // reading a download's source alongside it is fine
  for (const Download& d : downloads_) {
    if (d.src.overlaps(p, bytes)) {
      violation(std::string(call) + verb + describe(p, bytes) + " while download_async#" +
                std::to_string(d.id) + " still reads " + describe(d.src.p, d.src.bytes) +
                " (not fenced)");
    }
  }
}

void OrderLedger::host_access(const char* call, const void* p, size_t bytes, Access access) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Download& d : downloads_) {
    if (d.dst.overlaps(p, bytes)) {
      violation(std::string(call) + (access == Access::kWrite ? " writes host " : " reads host ") +
                describe(p, bytes) + " while download_async#" + std::to_string(d.id) +
                " still fills " + describe(d.dst.p, d.dst.bytes) + " (not fenced)");
    }
  }
}

void OrderLedger::release(const char* call, const void* base) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 1;  // an unnamed block: its first byte stands for it
  for (const Named& n : names_) {
    if (n.span.p == base) bytes = std::max<size_t>(n.span.bytes, 1);
  }
  for (const Collective& c : collectives_) {
    if (c.buf.overlaps(base, bytes)) {
      violation(std::string(call) + " frees " + describe(base, bytes) + " while " + c.what +
                " on " + describe(c.buf.p, c.buf.bytes) + " is in flight");
    }
  }
}

uint64_t OrderLedger::begin_collective(const std::string& what, const void* buf, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Download& d : downloads_) {
    if (d.src.overlaps(buf, bytes)) {
      violation(what + " writes " + describe(buf, bytes) + " while download_async#" +
                std::to_string(d.id) + " still reads " + describe(d.src.p, d.src.bytes) +
                " (not fenced)");
    }
  }
  // Two operations in flight on the same bytes: ordered on one nccl stream, but the mpi
  // backend's MPI path completes them in any order, and the contract wants a buffer untouched
  // until its operation completes.
  for (const Collective& c : collectives_) {
    if (c.buf.overlaps(buf, bytes)) {
      violation(what + " on " + describe(buf, bytes) + " is issued while " + c.what + " on " +
                describe(c.buf.p, c.buf.bytes) + " is in flight");
    }
  }
  collectives_.push_back({++next_collective_, what, {static_cast<const char*>(buf), bytes}});
  return next_collective_;
}

void OrderLedger::end_collective(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  collectives_.erase(std::remove_if(collectives_.begin(), collectives_.end(),
                                    [&](const Collective& c) { return c.id == id; }),
                     collectives_.end());
}

void OrderLedger::end_all_collectives() {
  std::lock_guard<std::mutex> lock(mutex_);
  collectives_.clear();
}

size_t OrderLedger::collectives_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return collectives_.size();
}

uint64_t OrderLedger::add_download(void* host_dst, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  downloads_.push_back({++next_download_,
                        {static_cast<const char*>(host_dst), bytes},
                        {static_cast<const char*>(src), bytes}});
  return next_download_;
}

void OrderLedger::fence_downloads(uint64_t last_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  // In id order, as the side stream runs them.
  auto done = [&](const Download& d) { return d.id <= last_id; };
  for (const Download& d : downloads_) {
    if (done(d)) std::memcpy(const_cast<char*>(d.dst.p), d.src.p, d.dst.bytes);
  }
  downloads_.erase(std::remove_if(downloads_.begin(), downloads_.end(), done), downloads_.end());
}

uint64_t OrderLedger::last_download_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_download_;
}

std::vector<std::string> OrderLedger::violations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return violations_;
}

OrderLedger::Exposure OrderLedger::exposure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exposure_;
}

void OrderLedger::clear_violations() {
  std::lock_guard<std::mutex> lock(mutex_);
  violations_.clear();
}

}  // namespace rm
