#include "launcher/node_memory.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "configs/slurm_memory.h"
#include "launcher/shell_capture.h"
#include "launcher/slurm_script.h"

namespace rm {

double smallest_node_memory(const std::string& sinfo_output) {
  std::istringstream in(sinfo_output);
  std::string line;
  double least = 0;
  while (std::getline(in, line)) {
    size_t digits = 0;
    while (digits < line.size() && digits < 15 && std::isdigit(static_cast<unsigned char>(line[digits]))) {
      ++digits;
    }
    if (digits == 0) continue;
    const double mb = std::stod(line.substr(0, digits));
    if (mb <= 1) continue;  // RealMemory not configured
    const double bytes = mb * 1024 * 1024;
    least = least == 0 ? bytes : std::min(least, bytes);
  }
  return least;
}

MemoryCapacity slurm_node_capacity(const ClusterConfig& cluster) {
  MemoryCapacity c;
  c.slurm = true;
  if (!cluster.memory_per_node.empty()) {
    c.host = parse_slurm_memory(cluster.memory_per_node);
    c.host_name = "a node (cluster.memory_per_node: " + cluster.memory_per_node + ")";
    return c;
  }
  std::string command = "timeout 10 sinfo --noheader --format=%m";
  if (!cluster.partition.empty()) command += " --partition=" + shell_quote(cluster.partition);
  const CapturedCommand sinfo = capture_command(command);
  if (sinfo.exit_code == 0) c.host = smallest_node_memory(sinfo.output);
  c.host_name = "the smallest node of " +
                (cluster.partition.empty() ? std::string("the cluster")
                                           : "partition " + cluster.partition) +
                " (sinfo)";
  return c;
}

}  // namespace rm
