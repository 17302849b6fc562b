// `ringmaster run --hosts FILE`: the hosts a job's ranks run on, in Open MPI's hostfile syntax.
//
//   # comment
//   node-a slots=8
//   node-b slots=8 max_slots=8
//   node-c               (one slot)
//
// A host named twice adds its slots (as Open MPI counts them: a line per slot); a later line
// of a host already named may not give slots= (Open MPI refuses it). Names are letters, digits,
// '.' and '-', as Open MPI requires; "slots = 2" reads as "slots=2". Ranks are placed by slot, host
// after host in file order (mpirun's default), so ranks 0..7 share node-a above: what the
// communicator's hierarchical path expects of a uniform job.
#pragma once

#include <string>
#include <vector>

namespace rm {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// Throws ConfigError naming the file and line on anything else: a missing or unreadable file,
// an unknown key, a slot count that is not a positive number, no host at all, and what Open
// MPI would refuse once the run directory is written (a carriage return, a bad name, a second
// slot count).
std::vector<HostSlots> read_hostfile(const std::string& path);

int total_slots(const std::vector<HostSlots>& hosts);

}  // namespace rm
