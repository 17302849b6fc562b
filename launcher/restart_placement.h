// Where a restart of `ringmaster run --hosts` goes when hosts are unreachable (resilience,
// issue 22). Ranks fill the hostfile's slots host after host (hostfile.h), so the hosts left
// take the job at once when their slots hold every rank -- spare slots standing in for the lost
// host -- and otherwise only with resilience.shrink: then on the most ranks their slots hold for
// which train.global_batch is still a multiple of micro_batch x ranks (the batch arithmetic of
// configs/job_checks.h; the steps and the data order stay those of the job, only the gradient
// accumulation per rank grows), as DeepSpeed's elasticity picks a compatible GPU count.
// Pure: the supervisor (supervisor.h) probes the hosts and acts on the answer.
#pragma once

#include <string>
#include <vector>

#include "configs/job_config.h"
#include "launcher/hostfile.h"

namespace rm {

struct RestartPlacement {
  std::vector<HostSlots> hosts;  // the hosts left, in hostfile order
  int nproc = 0;                 // the ranks to start on them; 0: the job cannot go on there
  std::string why;               // what was chosen, or why the job cannot go on without `down`
};

// The placement of a job of `nproc` ranks on `hosts` without the hosts named in `down`.
RestartPlacement place_without(const JobConfig& job, const std::vector<HostSlots>& hosts,
                               int nproc, const std::vector<std::string>& down);

// The hostfile text of `hosts` ("name slots=K" a line).
std::string hostfile_text(const std::vector<HostSlots>& hosts);

}  // namespace rm
