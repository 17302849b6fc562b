// The Slurm job a run directory was submitted as (RUN_DIR/slurm/job_id, written by `submit`),
// and what scontrol says of it now: for `status`, and for `submit`, which refuses to submit a run
// whose job is still queued or running.
#pragma once

#include <string>

namespace rm {

// The id in RUN_DIR/slurm/job_id (at most 4 KiB read, newlines removed), or "" if the run was
// never submitted.
std::string submitted_job_id(const std::string& run_dir);

// `scontrol show job -o ID`'s one line, within 5 s; "" when scontrol does not know the job (any
// more) or does not answer, *why set to what it said then.
std::string scontrol_job_line(const std::string& id, std::string* why = nullptr);

// KEY's value in that line ("JobState" -> "PENDING"), or "".
std::string scontrol_field(const std::string& line, const std::string& key);

// Whether a job in `state` (JobState) may still start or is running: anything but a final state
// (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...). COMPLETING counts: a job being requeued passes
// through it before it is REQUEUED and PENDING again.
bool slurm_job_may_run(const std::string& state);

// Whether a pending job's Reason says Slurm will not start it as it asks until an administrator
// changes the cluster: more nodes or time than the partition allows (PartitionNodeLimit,
// PartitionTimeLimit), a shape no node has (PartitionConfig), constraints no node meets
// (BadConstraints), a per-job or per-node limit of its QOS or association (QOSMaxCpuPerJobLimit,
// QOSMaxGRESPerNode, ...), a QOS minimum it is below (QOSMinCpuNotSatisfied).
// Reasons that clear by themselves (Resources, Priority, a node down, a dependency) are not.
bool slurm_reason_blocks_for_good(const std::string& reason);

}  // namespace rm
