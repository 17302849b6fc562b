// RAII for a streaming XXH64 state (seed 0), shared by the writer (hashing while writing) and
// the reader (hashing while verifying). Internal to checkpoint/.
#pragma once

#include <xxhash.h>

#include <new>

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

}  // namespace rm
