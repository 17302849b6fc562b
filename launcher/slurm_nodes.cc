#include "launcher/slurm_nodes.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "launcher/shell_capture.h"
#include "launcher/slurm_job.h"

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

// A whole non-negative number of at most 15 digits, or -1.
long long whole_number(const std::string& text) {
  if (text.empty() || text.size() > 15) return -1;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  }
  return std::stoll(text);
}

std::string plural(long long n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The partitions of a comma list (sbatch takes one), in its order; nullopt when one is not
// listed (sbatch refuses it in its own words, so nothing is judged here).
std::optional<std::vector<const SlurmPartition*>> named_partitions(
    const SlurmPartitions& partitions, const std::string& list) {
  std::vector<const SlurmPartition*> out;
  for (const std::string& name : split(list, ',')) {
    const auto p = std::find_if(partitions.all.begin(), partitions.all.end(),
                                [&](const SlurmPartition& q) { return q.name == name; });
    if (p == partitions.all.end()) return std::nullopt;
    out.push_back(&*p);
  }
  return out;
}

// Why `p` cannot hold the job, without the closing clause; "" when it can, or when what sinfo
// shows of it may not be all there is.
std::string partition_refusal(const ClusterConfig& cluster, const SlurmPartition& p) {
  const auto listed = static_cast<long long>(p.nodes.size());
  if (p.total_nodes < 0 || p.total_nodes != listed) return "";
  const std::string where = "partition " + p.name;
  if (p.max_nodes >= 0 && cluster.nodes > p.max_nodes) {
    return "cluster.nodes: " + std::to_string(cluster.nodes) + ", but " + where + " allows a job " +
           plural(p.max_nodes, "node", "nodes") + " at most (MaxNodes)";
  }
  // Slurm's default is one CPU a task. 64-bit: neither key has an upper bound.
  const long long cpus =
      static_cast<long long>(cluster.tasks_per_node) * std::max(cluster.cpus_per_task, 1);
  const int gpus = cluster.gpus_per_node;
  long long holding = 0, most_cpus = 0, most_usable = 0, most_gpus = 0;
  for (const SlurmNode& node : p.nodes) {
    const long long usable =
        p.max_cpus_per_node >= 0 ? std::min<long long>(node.cpus, p.max_cpus_per_node) : node.cpus;
    if (usable >= cpus && node.gpus >= gpus) ++holding;
    most_cpus = std::max<long long>(most_cpus, node.cpus);
    most_usable = std::max(most_usable, usable);
    most_gpus = std::max<long long>(most_gpus, node.gpus);
  }
  if (holding >= cluster.nodes) return "";
  if (listed < cluster.nodes) {
    return "cluster.nodes: " + std::to_string(cluster.nodes) + ", but " + where + " (sinfo) has " +
           plural(listed, "node", "nodes");
  }
  if (most_usable < cpus) {
    const std::string share =
        cluster.cpus_per_task > 1
            ? "cluster.tasks_per_node x cluster.cpus_per_task: " +
                  std::to_string(cluster.tasks_per_node) + " x " +
                  std::to_string(cluster.cpus_per_task) + " = " + std::to_string(cpus) +
                  " CPUs a node"
            : "cluster.tasks_per_node: " + std::to_string(cluster.tasks_per_node) +
                  " ranks a node, a CPU each";
    if (most_cpus >= cpus) {
      return share + ", but " + where + " lets a job use " +
             plural(p.max_cpus_per_node, "CPU", "CPUs") + " of a node at most (MaxCPUsPerNode)";
    }
    return share + ", but the largest node of " + where + " (sinfo) has " +
           plural(most_cpus, "CPU", "CPUs");
  }
  if (most_gpus < gpus) {
    return "cluster.gpus_per_node: " + std::to_string(gpus) + ", but " +
           (most_gpus == 0 ? "no node of " + where + " (sinfo) has a GPU"
                           : "the nodes of " + where + " (sinfo) have at most " +
                                 plural(most_gpus, "GPU", "GPUs"));
  }
  // Each share fits some node, but too few nodes have all of it.
  return "cluster.nodes: " + std::to_string(cluster.nodes) + " nodes of " +
         plural(cpus, "CPU", "CPUs") + (gpus > 0 ? " and " + plural(gpus, "GPU", "GPUs") : "") +
         " each, but " + where + " (sinfo) has " + std::to_string(holding) + " such of its " +
         plural(listed, "node", "nodes");
}

}  // namespace

int gres_gpu_count(const std::string& gres) {
  int gpus = 0;
  for (std::string entry : split(gres, ',')) {
    entry = entry.substr(0, entry.find('('));  // "(S:0-1)", "(IDX:0-3)": where, not how many
    const std::vector<std::string> fields = split(entry, ':');
    if (fields.size() < 2 || fields.front() != "gpu") continue;
    const long long count = whole_number(fields.back());
    if (count > 0) gpus += static_cast<int>(std::min<long long>(count, 1 << 20));
  }
  return gpus;
}

SlurmPartitions parse_sinfo_nodes(const std::string& sinfo_output) {
  SlurmPartitions out;
  std::vector<std::unordered_set<std::string>> seen;  // node names, one set a partition
  std::istringstream in(sinfo_output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> f = split(line, '|');
    const long long cpus = f.size() == 5 ? whole_number(f[2]) : -1;
    if (cpus < 0 || f[0].empty() || f[1].empty() || f[1] == "*") return {};  // not all readable
    std::string name = f[1];
    const bool is_default = name.back() == '*';
    if (is_default) name.pop_back();
    size_t i = 0;
    while (i < out.all.size() && out.all[i].name != name) ++i;
    if (i == out.all.size()) {
      out.all.push_back({name, is_default, {}});
      seen.emplace_back();
    }
    if (seen[i].insert(f[0]).second) {
      const long long megabytes = whole_number(f[4]);  // 1: Slurm's default, not configured
      out.all[i].nodes.push_back({f[0], static_cast<int>(std::min(cpus, 1LL << 30)),
                                  gres_gpu_count(f[3]),
                                  megabytes > 1 ? megabytes * 1024.0 * 1024.0 : 0.0});
    }
  }
  return out;
}

void add_partition_limits(SlurmPartitions& partitions, const std::string& scontrol_output) {
  std::istringstream in(scontrol_output);
  std::string line;
  while (std::getline(in, line)) {
    const std::string name = scontrol_field(line, "PartitionName");
    for (SlurmPartition& p : partitions.all) {
      if (p.name != name) continue;
      // "UNLIMITED", or a figure; what is neither stays unknown (-1: no limit judged, and a
      // total not known judges nothing of the partition).
      p.total_nodes = whole_number(scontrol_field(line, "TotalNodes"));
      p.max_nodes = whole_number(scontrol_field(line, "MaxNodes"));
      p.max_cpus_per_node = whole_number(scontrol_field(line, "MaxCPUsPerNode"));
    }
  }
}

namespace {

// Whether an item of sbatch_extra is one of `names`, or an abbreviation of one: sbatch takes any
// unambiguous abbreviation of a long option ("--gre=gpu:4"), and one that could stand for several
// counts as each.
bool sbatch_extra_has(const std::vector<std::string>& sbatch_extra,
                      std::initializer_list<const char*> names) {
  for (const std::string& item : sbatch_extra) {
    const std::string option = item.substr(0, item.find_first_of("= \t"));
    if (option.size() < 4 || option.rfind("--", 0) != 0) continue;
    for (const char* name : names) {
      if (std::string(name).rfind(option, 0) == 0) return true;
    }
  }
  return false;
}

// Set at all, empty included: sbatch reads every variable of its list that is set, and an empty
// one turns a flag on (man sbatch, INPUT ENVIRONMENT VARIABLES).
bool set_here(const char* name) {
  return std::getenv(name) != nullptr;
}

}  // namespace

bool sbatch_extra_reshapes(const std::vector<std::string>& sbatch_extra) {
  // The partition, node count, tasks and CPUs a task are keys of their own: the job loader
  // refuses them in sbatch_extra (configs/cluster_checks.cc). These are the ones it lets pass
  // that change where the job may go or what a node must give it. (--overcommit: one CPU a
  // node, whatever the tasks.)
  return sbatch_extra_has(
      sbatch_extra,
      {"--gpus", "--gres", "--gpus-per-task", "--gpus-per-socket", "--cpus-per-gpu",
       "--tres-per-task", "--mincpus", "--ntasks-per-gpu", "--overcommit", "--clusters",
       "--cluster-constraint", "--sockets-per-node", "--cores-per-socket", "--threads-per-core"});
}

bool sbatch_extra_narrows_nodes(const std::vector<std::string>& sbatch_extra) {
  return sbatch_extra_has(sbatch_extra,
                          {"--constraint", "--nodelist", "--exclude", "--nodefile"}) ||
         set_here("SBATCH_CONSTRAINT");
}

bool sbatch_extra_sets_memory(const std::vector<std::string>& sbatch_extra) {
  return sbatch_extra_has(sbatch_extra, {"--mem-per-cpu", "--mem-per-gpu"});
}

std::string submitted_partition(const ClusterConfig& cluster, std::string* from) {
  // Read by sbatch after the script's #SBATCH lines, and winning over them (man sbatch, INPUT
  // ENVIRONMENT VARIABLES). Set but empty, it still replaces the script's partition: the job
  // goes to the default one.
  const char* value = std::getenv("SBATCH_PARTITION");
  if (from != nullptr) *from = value != nullptr ? std::string("SBATCH_PARTITION=") + value : "";
  return value != nullptr ? value : cluster.partition;
}

std::string sbatch_environment_override() {
  // As SBATCH_PARTITION (submitted_partition), these win over the script; set at all, they count.
  for (const char* name :
       {"SBATCH_CLUSTERS", "SLURM_CLUSTERS", "SBATCH_CLUSTER_CONSTRAINT", "SBATCH_OVERCOMMIT",
        "SBATCH_GRES", "SBATCH_GPUS", "SBATCH_GPUS_PER_NODE", "SBATCH_GPUS_PER_TASK",
        "SBATCH_CPUS_PER_GPU", "SBATCH_THREADS_PER_CORE"}) {
    if (set_here(name)) return name;
  }
  return "";
}

std::string slurm_shape_refusal(const ClusterConfig& cluster, const SlurmPartitions& partitions) {
  // Where the job may go, and the partition the message describes: the first listed, or the
  // default.
  std::string from_environment;
  const std::string partition = submitted_partition(cluster, &from_environment);
  std::vector<const SlurmPartition*> candidates;
  const SlurmPartition* described = nullptr;
  if (partition.empty()) {
    for (const SlurmPartition& p : partitions.all) {
      candidates.push_back(&p);
      if (p.is_default) described = &p;
    }
  } else {
    const auto named = named_partitions(partitions, partition);
    if (!named) return "";
    candidates = *named;
    described = candidates.front();
  }
  if (described == nullptr) return "";
  std::string why;
  for (const SlurmPartition* p : candidates) {
    const std::string refusal = partition_refusal(cluster, *p);
    if (refusal.empty()) return "";  // it holds the job, or may
    if (p == described) why = refusal;
  }
  const std::string listed = from_environment.empty() ? "cluster.partition" : "SBATCH_PARTITION";
  if (partition.empty() && candidates.size() > 1) {
    why += "; no other partition of the cluster holds it either";
  } else if (candidates.size() > 1) {
    why += (candidates.size() == 2 ? "; nor does the other partition of "
                                   : "; nor does any other partition of ") +
           listed;
  }
  if (!from_environment.empty()) why += " (" + from_environment + " in the environment)";
  return why + ": Slurm would never start the job";
}

double smallest_node_memory(const SlurmPartitions& partitions, const std::string& partition,
                            std::string* described) {
  std::vector<const SlurmPartition*> of;
  if (partition.empty()) {
    for (const SlurmPartition& p : partitions.all) {
      if (p.is_default) of = {&p};
    }
    // None marked default: a job_submit plugin chooses, and the smallest node of every partition
    // (hidden ones too: sinfo --all) would refuse on a guess.
    if (of.empty()) return 0;
    *described = "the default partition " + of.front()->name;
  } else {
    // A comma list: the job may start in any of them.
    *described =
        (partition.find(',') == std::string::npos ? "partition " : "partitions ") + partition;
    const auto named = named_partitions(partitions, partition);
    if (!named) return 0;
    of = *named;
  }
  double least = 0;
  for (const SlurmPartition* p : of) {
    for (const SlurmNode& node : p->nodes) {
      if (node.memory > 0) least = least == 0 ? node.memory : std::min(least, node.memory);
    }
  }
  return least;
}

SlurmPartitions query_slurm_partitions() {
  // --all: hidden partitions too (a job_submit plugin may route there). With --Node each line is
  // one node of one partition, format or not (Slurm's sinfo; its man page says --Node is
  // ignored with --format, which is not what it does).
  const CapturedCommand sinfo =
      capture_command("timeout 10 sinfo --all --Node --noheader --format='%N|%P|%c|%G|%m'");
  if (sinfo.exit_code != 0) return {};
  SlurmPartitions partitions = parse_sinfo_nodes(sinfo.output);
  if (partitions.all.empty()) return partitions;
  const CapturedCommand scontrol = capture_command("timeout 10 scontrol --all show partition -o");
  if (scontrol.exit_code == 0) add_partition_limits(partitions, scontrol.output);
  return partitions;
}

}  // namespace rm
