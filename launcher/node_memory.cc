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

std::string memory_of_partition(const std::string& sinfo_output, const std::string& partition,
                                std::string* default_name) {
  std::istringstream in(sinfo_output);
  std::string line, all, kept;
  while (std::getline(in, line)) {
    const size_t bar = line.find('|');
    if (bar == std::string::npos) continue;
    const std::string memory = line.substr(bar + 1) + "\n";
    all += memory;
    if (bar > 0 && line[bar - 1] == '*') {
      *default_name = line.substr(0, bar - 1);
      kept += memory;
    }
  }
  if (!partition.empty() || default_name->empty()) return all;
  return kept;
}

MemoryCapacity slurm_node_capacity(const ClusterConfig& cluster) {
  MemoryCapacity c;
  c.slurm = true;
  if (!cluster.memory_per_node.empty()) {
    c.host = parse_slurm_memory(cluster.memory_per_node);
    c.host_name = "a node (cluster.memory_per_node: " + cluster.memory_per_node + ")";
    return c;
  }
  std::string command = "timeout 10 sinfo --noheader --format='%P|%m'";
  if (!cluster.partition.empty()) command += " --partition=" + shell_quote(cluster.partition);
  const CapturedCommand sinfo = capture_command(command);
  std::string default_name;
  if (sinfo.exit_code == 0) {
    c.host =
        smallest_node_memory(memory_of_partition(sinfo.output, cluster.partition, &default_name));
  }
  c.host_name = "the smallest node of " +
                (!cluster.partition.empty() ? "partition " + cluster.partition
                 : default_name.empty()     ? std::string("the cluster")
                                            : "the default partition " + default_name) +
                " (sinfo)";
  return c;
}

}  // namespace rm
