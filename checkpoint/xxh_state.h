// RAII for a streaming XXH64 state (seed 0), shared by the writer (hashing while writing) and
// the reader (hashing while verifying), and the one way a hash is written as text (manifests,
// messages). Internal to checkpoint/.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <new>
#include <string>

namespace rm {

struct XxhState {
  XXH64_state_t* s = XXH64_createState();
  XxhState() {
    if (s == nullptr) throw std::bad_alloc();
    XXH64_reset(s, 0);
  }
  ~XxhState() { XXH64_freeState(s); }
  XxhState(const XxhState&) = delete;
  XxhState& operator=(const XxhState&) = delete;
};

// 16 lower-case hex digits, as manifests store an XXH64 (manifest_parse.cc reads them back).
inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace rm
