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
// once), in hostfile order; empty when every host answered. *reasons (if given) gets one entry
// per host returned: "no answer within N s", or "mpirun exited C: " and the first line mpirun
// printed (say, "ORTE was unable to reliably start one or more daemons."), so that a host
// refused at once is told apart from a host that never answered.
std::vector<std::string> unreachable_hosts(const std::vector<HostSlots>& hosts, double timeout_s,
                                           std::vector<std::string>* reasons = nullptr);

}  // namespace rm
