// Whether mpirun can start a process on each host of a hostfile, asked before every launch of
// `ringmaster run --hosts`. Open MPI waits forever for a daemon that cannot call back (a host
// whose link is down, seen on the test hosts: orte_startup_timeout does not cover it), so an
// unreachable host would hang the launch; asked host by host, in parallel, each under a
// deadline, it is named instead.
#pragma once

#include <string>
#include <vector>

#include "launcher/hostfile.h"

namespace rm {

// The hosts where `mpirun --host H -np 1 true` did not succeed within timeout_s (all asked at
// once), in hostfile order; empty when every host answered.
std::vector<std::string> unreachable_hosts(const std::vector<HostSlots>& hosts, double timeout_s);

}  // namespace rm
