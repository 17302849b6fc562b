// A communicator of one rank, with no MPI underneath: every collective is the identity (avg
// over one rank too) and completes at once. It lets single-process training, sampling and
// tests run the same code path as N ranks without starting MPI.
//
// No operation reads or writes its buffer (with one rank there is nothing to move), so buffers
// may be any memory, including device memory of the CUDA compute backend; only allocate() needs
// to know which, through SelfMemory.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "collectives/communicator.h"

namespace rm {

// Where allocate() gets its memory. Both empty (the default): page-aligned, zero-filled host
// memory (Communicator::allocate). Otherwise allocate(bytes) must return zero-filled memory of
// at least `bytes` bytes (or throw), and release(p) frees it; the communicator calls release on
// every block when it is destroyed, from the destroying thread. Both functions (and whatever
// they capture, e.g. a kernels Compute) must outlive the communicator.
struct SelfMemory {
  std::function<void*(size_t)> allocate;
  std::function<void(void*)> release;
};

// Throws std::invalid_argument if exactly one of memory's functions is set.
std::unique_ptr<Communicator> make_self_communicator(SelfMemory memory = {});

}  // namespace rm
