// The mpi backend: collectives on host buffers over an MPI communicator.
//
// Paths behind the one interface:
//  - shared memory (all ranks on one node; the default there): ShmEngine over MPI-3 shared
//    windows allocated at creation. All-reduce, reduce-scatter, all-gather and barrier use it;
//    broadcast uses MPI_Ibcast. On a buffer from allocate() an operation is one pass: each rank
//    reduces its shard straight from every rank's buffer into every rank's buffer. On any other
//    buffer it is pipelined through preallocated staging (copy in, reduce, copy out).
//  - hierarchical (ranks on several nodes, the same number on each, node after node; the
//    default there): shared memory within nodes, MPI between them (hier_path.h). bf16
//    reductions and broadcasts take the MPI path below.
//  - MPI (other layouts across nodes, or when asked for): MPI's non-blocking collectives
//    (MPI_Iallreduce, MPI_Ireduce_scatter, MPI_Iallgatherv, MPI_Ibcast, MPI_Ibarrier), polled
//    with MPI_Test. Counts must fit in an int there.
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
#include "collectives/mpi/hier_path.h"

namespace rm {

struct MpiOptions {
  enum class Algorithm {
    kAuto,            // shared memory on one node; across nodes hierarchical where it fits
    kSharedMemory,    // shared memory; creation throws if the ranks span nodes
    kMpi,             // MPI's non-blocking collectives, always
    kMpiAcrossHosts,  // shared memory on one node, else MPI's collectives (no hierarchy)
  };
  Algorithm algorithm = Algorithm::kAuto;
  // The hierarchical path's inter-host layout (hier_path.h).
  detail::HierLayout hier_layout = detail::HierLayout::kRails;
  // Shared-memory staging per rank per pipeline slot (two slots, allocated and touched once at
  // creation). One step moves shm_slot_bytes / size() bytes of every rank's shard.
  size_t shm_slot_bytes = size_t{128} << 10;
};

// Collective over `comm`, which is duplicated (the caller keeps ownership of `comm`).
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, CommOptions options = {},
                                                    MpiOptions mpi_options = {});

}  // namespace rm
