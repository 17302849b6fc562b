// The rules of the cluster section beyond each key's type and range: what `ringmaster submit`
// puts into the batch script must be a value Slurm can take, and nothing in it may become shell.
#pragma once

#include <functional>
#include <string>

#include "configs/job_config.h"

namespace rm {

// Calls add(key, what is wrong) for each problem of cluster.sbatch_extra and cluster.env:
//  - an sbatch_extra item must be one option ("--constraint=a100"), starting with "--", with no
//    control character, and must not be one that another key or submit itself sets (e.g.
//    "--nodes": cluster.nodes; "--output": RUN_DIR/logs; "--no-requeue": requeue is the point);
//  - an env value must not hold NUL or any control character but tab (newlines included: a
//    value is exported in the script, and a stray line there is a trap for the reader).
void check_cluster(const ClusterConfig& cluster,
                   const std::function<void(const std::string& key, const std::string& msg)>& add);

}  // namespace rm
