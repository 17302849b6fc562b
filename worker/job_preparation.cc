#include "worker/job_preparation.h"

#include <unistd.h>

#include <cstdlib>

#include "configs/job_loader.h"
#include "planning/host_memory.h"
#include "worker/initial_weights.h"
#include "worker/step_graph.h"

namespace rm {

CheckedJob check_job(const std::string& path, const std::vector<std::string>& sets,
                     const JobPlacement& where) {
  CheckedJob c;
  c.job = load_job(path, sets, where.ranks);
  c.data = open_training_data(c.job);
  c.device = choose_device(c.job.parallel.backend, where.local_rank, where.ranks_here,
                           where.own_gpus_possible);
  StepGraph::check_switch();
  if (where.checks_memory) {
    c.capacity.host = host_memory();
    c.capacity.gpu = c.device.kind == ComputeKind::kCuda ? gpu_memory() : 0;
    if (where.names_host) {
      char name[256] = {};
      ::gethostname(name, sizeof name - 1);
      c.capacity.slurm = std::getenv("SLURM_JOB_ID") != nullptr;
      c.capacity.host_name = std::string(c.capacity.slurm ? "node " : "host ") + name;
    }
    c.fit = check_memory_fit(c.job, where.ranks, where.ranks_here, c.device.kind, c.capacity);
  }
  check_initial_weights(
      c.job, where.verifies_initial_weights ? VerifyLevel::kChecksums : VerifyLevel::kStructure);
  return c;
}

}  // namespace rm
