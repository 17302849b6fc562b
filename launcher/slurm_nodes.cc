#include "launcher/slurm_nodes.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "launcher/shell_capture.h"
#include "launcher/slurm_script.h"

namespace rm {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) out.push_back(part);
  if (!text.empty() && text.back() == sep) out.emplace_back();
  return out;
}

// A whole non-negative number of at most 9 digits, or -1.
int whole_number(const std::string& text) {
  if (text.empty() || text.size() > 9) return -1;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  }
  return std::stoi(text);
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

int gres_gpu_count(const std::string& gres) {
  int gpus = 0;
  for (std::string entry : split(gres, ',')) {
    entry = entry.substr(0, entry.find('('));  // "(S:0-1)", "(IDX:0-3)": where, not how many
    const std::vector<std::string> fields = split(entry, ':');
    if (fields.size() < 2 || fields.front() != "gpu") continue;
    const int count = whole_number(fields.back());
    if (count > 0) gpus += count;
  }
  return gpus;
}

SlurmPartition parse_sinfo_nodes(const std::string& sinfo_output, const std::string& partition) {
  const std::vector<std::string> wanted = split(partition, ',');  // sbatch takes a list
  SlurmPartition out;
  std::istringstream in(sinfo_output);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() != 4 || f[0].empty()) continue;  // an error line, or another format
    std::string name = f[1];
    const bool is_default = !name.empty() && name.back() == '*';
    if (is_default) name.pop_back();
    const bool kept = partition.empty()
                          ? is_default
                          : std::find(wanted.begin(), wanted.end(), name) != wanted.end();
    const int cpus = whole_number(f[2]);
    if (!kept || cpus < 0) continue;
    if (out.name.empty()) out.name = partition.empty() ? name : partition;
    // A node in two of the partitions listed is one node.
    const bool seen = std::any_of(out.nodes.begin(), out.nodes.end(),
                                  [&](const SlurmNode& n) { return n.name == f[0]; });
    if (!seen) out.nodes.push_back({f[0], cpus, gres_gpu_count(f[3])});
  }
  return out;
}

bool sbatch_extra_reshapes(const std::vector<std::string>& sbatch_extra) {
  // The partition, node count, tasks and CPUs a task are keys of their own: the job loader
  // refuses them in sbatch_extra (configs/cluster_checks.cc). These are the ones it lets pass.
  static const char* const kReshaping[] = {"--gpus",
                                           "--gres",
                                           "--gpus-per-task",
                                           "--cpus-per-gpu",
                                           "--mincpus",
                                           "--ntasks-per-gpu",
                                           "--sockets-per-node",
                                           "--cores-per-socket",
                                           "--threads-per-core"};
  for (const std::string& item : sbatch_extra) {
    const std::string option = item.substr(0, item.find_first_of("= \t"));
    if (option.size() < 4 || option.rfind("--", 0) != 0) continue;
    for (const char* name : kReshaping) {
      // sbatch takes any unambiguous abbreviation of a long option ("--gre=gpu:4").
      if (std::string(name).rfind(option, 0) == 0) return true;
    }
  }
  return false;
}

std::string slurm_shape_refusal(const ClusterConfig& cluster, const SlurmPartition& partition) {
  if (partition.nodes.empty()) return "";
  const int cpus_a_task = std::max(cluster.cpus_per_task, 1);  // Slurm's default is one
  const int cpus = cluster.tasks_per_node * cpus_a_task;
  const int gpus = cluster.gpus_per_node;
  int holding = 0, most_cpus = 0, most_gpus = 0;
  for (const SlurmNode& node : partition.nodes) {
    if (node.cpus >= cpus && node.gpus >= gpus) ++holding;
    most_cpus = std::max(most_cpus, node.cpus);
    most_gpus = std::max(most_gpus, node.gpus);
  }
  if (holding >= cluster.nodes) return "";
  const int total = static_cast<int>(partition.nodes.size());
  const std::string where = "partition " + partition.name + " (sinfo)";
  const std::string never = ": Slurm would never start the job";
  if (total < cluster.nodes) {
    return "cluster.nodes: " + std::to_string(cluster.nodes) + ", but " + where + " has " +
           plural(total, "node", "nodes") + never;
  }
  if (most_cpus < cpus) {
    const std::string share =
        cluster.cpus_per_task > 1
            ? "cluster.tasks_per_node x cluster.cpus_per_task: " +
                  std::to_string(cluster.tasks_per_node) + " x " +
                  std::to_string(cluster.cpus_per_task) + " = " + std::to_string(cpus) +
                  " CPUs a node"
            : "cluster.tasks_per_node: " + std::to_string(cluster.tasks_per_node) +
                  " ranks a node, a CPU each";
    return share + ", but the largest node of " + where + " has " +
           plural(most_cpus, "CPU", "CPUs") + never;
  }
  if (most_gpus < gpus) {
    return "cluster.gpus_per_node: " + std::to_string(gpus) + ", but " +
           (most_gpus == 0
                ? "no node of " + where + " has a GPU"
                : "the nodes of " + where + " have at most " + plural(most_gpus, "GPU", "GPUs")) +
           never;
  }
  // Each share fits some node, but too few nodes have all of it.
  return "cluster.nodes: " + std::to_string(cluster.nodes) + " nodes of " +
         plural(cpus, "CPU", "CPUs") + (gpus > 0 ? " and " + plural(gpus, "GPU", "GPUs") : "") +
         " each, but " + where + " has " + std::to_string(holding) + " such of its " +
         plural(total, "node", "nodes") + never;
}

SlurmPartition query_slurm_partition(const std::string& partition) {
  std::string command = "timeout 10 sinfo --Node --noheader --format='%N|%P|%c|%G'";
  if (!partition.empty()) command += " --partition=" + shell_quote(partition);
  const CapturedCommand sinfo = capture_command(command);
  if (sinfo.exit_code != 0) return {};
  return parse_sinfo_nodes(sinfo.output, partition);
}

}  // namespace rm
