// The mpi backend: collectives on host buffers over an MPI communicator.
//
// Paths behind the one interface:
//  - shared memory (all ranks on one node; the default there): ShmEngine over MPI-3 shared
//    windows allocated at creation. All-reduce, reduce-scatter, all-gather and barrier use it;
//    broadcast uses MPI_Ibcast. On a buffer from allocate() an operation is one pass: each rank
//    reduces its shard straight from every rank's buffer into every rank's buffer. On any other
//    buffer it is pipelined through preallocated staging (copy in, reduce, copy out).
//  - MPI (ranks across nodes, or when asked for): MPI's non-blocking collectives
//    (MPI_Iallreduce, MPI_Ireduce_scatter, MPI_Iallgatherv, MPI_Ibcast, MPI_Ibarrier), polled
//    with MPI_Test. Counts must fit in an int there. (A node-aware hierarchy -- shared memory
//    within nodes, a ring across them -- would be the next step for multi-node jobs.)
//    bf16 reductions there are an all-to-all of the shards (MPI_Ialltoallv), summed by the host
//    kernels in rank order as on the shm path (same bits), then for all-reduce an in-place
//    MPI_Iallgatherv on a second duplicated communicator; MPI has no bf16 type and its own
//    reductions would round in an order of MPI's choosing. Each such op allocates scratch of
//    size() times its own shard.
//
// Waiting: a rank spins ~20 us, then sleeps on the peer's counter (futex) so that ranks sharing
// a core with each other or with other processes do not burn each other's time slices.
//
// Requirements on the caller: MPI is initialised (any thread level; only the owning thread
// calls MPI through this communicator) and stays so until the communicator is destroyed.
// Destruction is collective (it frees the shared window) and completes outstanding operations.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>

#include "collectives/communicator.h"

namespace rm {

struct MpiOptions {
  enum class Algorithm {
    kAuto,          // shared memory if all ranks share this node, else MPI
    kSharedMemory,  // shared memory; creation throws if the ranks span nodes
    kMpi,           // MPI's non-blocking collectives
  };
  Algorithm algorithm = Algorithm::kAuto;
  // Shared-memory staging per rank per pipeline slot (two slots, allocated and touched once at
  // creation). One step moves shm_slot_bytes / size() bytes of every rank's shard.
  size_t shm_slot_bytes = size_t{128} << 10;
};

// Collective over `comm`, which is duplicated (the caller keeps ownership of `comm`).
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, CommOptions options = {},
                                                    MpiOptions mpi_options = {});

}  // namespace rm
