#include "configs/cluster_checks.h"

#include <algorithm>
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

// Whether `item` is more than one option: sbatch reads each word of an #SBATCH line as an
// option or an option's value. One option is `--opt`, `--opt=value`, `--opt="a value"` or
// `--opt value` (one word, not an option).
bool several_options(const std::string& item) {
  const size_t space = item.find_first_of(" \t");
  if (space == std::string::npos) return false;
  const size_t eq = item.find('=');
  if (eq != std::string::npos && eq < space) {
    const std::string value = item.substr(eq + 1);
    return !(value.size() >= 2 && value.front() == '"' && value.back() == '"' &&
             value.find('"', 1) == value.size() - 1);
  }
  const std::string value = item.substr(space + 1);
  return value.empty() || value[0] == '-' || value.find_first_of(" \t") != std::string::npos;
}

// The option `name` stands for: itself, or the one of `options` it abbreviates (sbatch, as
// getopt_long, takes a unique prefix: --arr for --array).
template <typename Options>
std::string meant(const std::string& name, const Options& options) {
  if (name.size() < 4) return name;  // "--" and one letter: ambiguous to sbatch anyway
  // An option of its own that is also the start of one listed (--gpus, --gpus-per-node).
  if (name == "--gpus") return name;
  for (const auto& [option, why] : options) {
    if (name == option) return name;
  }
  for (const auto& [option, why] : options) {
    const std::string full = option;
    if (full.size() > name.size() && full.compare(0, name.size(), name) == 0) return full;
  }
  return name;
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
    if (several_options(item)) {
      add("cluster.sbatch_extra",
          "'" + item +
              "' holds more than one option: sbatch reads each word of it; give one option "
              "per item (a value with spaces in double quotes)");
      continue;
    }
    const std::string name = item.substr(0, std::min(item.find('='), item.find_first_of(" \t")));
    for (const auto& [refused, why] : kRefusedOptions) {
      if (meant(name, kRefusedOptions) == refused) {
        add("cluster.sbatch_extra", "'" + item + "': not with submit: " + why);
      }
    }
    const std::string option = meant(name, kOwnedOptions);
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
