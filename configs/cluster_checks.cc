#include "configs/cluster_checks.h"

#include <utility>

namespace rm {
namespace {

bool has_control_char(const std::string& s, bool allow_tab) {
  for (unsigned char c : s) {
    if ((c < 0x20 && !(allow_tab && c == '\t')) || c == 0x7f) return true;
  }
  return false;
}

// sbatch options that a key or submit itself sets, and what to use instead.
const std::pair<const char*, const char*> kOwnedOptions[] = {
    {"--job-name", "name"},
    {"--nodes", "cluster.nodes"},
    {"--ntasks-per-node", "cluster.tasks_per_node"},
    {"--ntasks", "cluster.nodes and cluster.tasks_per_node"},
    {"--gpus-per-node", "cluster.gpus_per_node"},
    {"--cpus-per-task", "cluster.cpus_per_task"},
    {"--partition", "cluster.partition"},
    {"--account", "cluster.account"},
    {"--qos", "cluster.qos"},
    {"--time", "cluster.time"},
    {"--mem", "cluster.memory_per_node"},
    {"--signal", "cluster.signal_grace_s"},
    {"--output", "run_dir (the log is RUN_DIR/logs/slurm-%j.out)"},
    {"--error", "run_dir (the log is RUN_DIR/logs/slurm-%j.out)"},
    {"--open-mode", "nothing: submit appends, so a requeued job keeps its earlier log"},
    {"--requeue", "nothing: submit always sets it"},
    {"--no-requeue", "nothing: requeue after preemption is what submit is for"},
    {"--chdir", "nothing: the job runs where it was submitted, as its relative paths expect"},
    {"--export", "cluster.env"},
};

// sbatch options that would break what submit does, and why.
const std::pair<const char*, const char*> kRefusedOptions[] = {
    {"--wait", "submit would hold the run's lock until the job ends, and the job wait for it"},
    {"--test-only", "nothing would be queued, though submit records a job"},
    {"--parsable", "submit reads sbatch's usual answer for the job id"},
    {"--array", "the array's jobs would all train in one run directory"},
    {"--wrap", "the batch script is the one submit writes"},
};

// Whether `item` holds a space or tab outside a double-quoted value (--comment="a b"): sbatch
// reads each word of an #SBATCH line as an option of its own.
bool words_outside_quotes(const std::string& item) {
  const size_t eq = item.find('=');
  const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
  const bool quoted = value.size() >= 2 && value.front() == '"' && value.back() == '"' &&
                      value.find('"', 1) == value.size() - 1;
  const std::string outside = quoted ? item.substr(0, eq) : item;
  return outside.find_first_of(" \t") != std::string::npos;
}

}  // namespace

void check_cluster(const ClusterConfig& cluster,
                   const std::function<void(const std::string&, const std::string&)>& add) {
  for (const std::string& item : cluster.sbatch_extra) {
    if (item.rfind("--", 0) != 0 || item.size() < 3) {
      add("cluster.sbatch_extra", "'" + item +
                                      "' must be one long option starting with '--' "
                                      "(e.g. --constraint=a100)");
      continue;
    }
    if (has_control_char(item, false)) {
      add("cluster.sbatch_extra", "an item holds a newline or another control character");
      continue;
    }
    if (words_outside_quotes(item)) {
      add("cluster.sbatch_extra",
          "'" + item +
              "' holds a space: sbatch would read each word as an option of its own; give one "
              "option per item (a value with spaces in double quotes)");
      continue;
    }
    const std::string option = item.substr(0, item.find('='));
    for (const auto& [refused, why] : kRefusedOptions) {
      if (option == refused) add("cluster.sbatch_extra", "'" + item + "': not with submit: " + why);
    }
    for (const auto& [owned, instead] : kOwnedOptions) {
      if (option == owned) {
        add("cluster.sbatch_extra",
            "'" + item + "': " + owned + " is set by submit; use " + instead);
      }
    }
  }
  for (const auto& [name, value] : cluster.env) {
    if (has_control_char(value, true)) {
      add("cluster.env." + name, "holds a newline or another control character");
    }
  }
}

}  // namespace rm
