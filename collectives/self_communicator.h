// A communicator of one rank, with no MPI underneath: every collective is the identity (avg
// over one rank too) and completes at once. It lets single-process training, sampling and
// tests run the same code path as N ranks without starting MPI.
#pragma once

#include <memory>

#include "collectives/communicator.h"

namespace rm {

std::unique_ptr<Communicator> make_self_communicator();

}  // namespace rm
