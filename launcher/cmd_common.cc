#include "launcher/cmd_common.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/retention.h"
#include "configs/config_error.h"
#include "configs/job_loader.h"
#include "launcher/hostfile.h"
#include "planning/host_memory.h"
#include "worker/data/encoded_text.h"

namespace rm {

JobConfig load_job_args(const JobArgs& args) {
  return load_job(args.job, args.sets, args.nproc);
}

MpiLaunch resolve_launch(const std::string& hosts, bool nproc_given, int& nproc) {
  MpiLaunch launch;
  if (!hosts.empty()) {
    const int slots = total_slots(read_hostfile(hosts));
    if (!nproc_given) {
      nproc = slots;
    } else if (nproc > slots) {
      throw JobConfigError(
          {ConfigError{hosts, 0, 0, "",
                       "--nproc " + std::to_string(nproc) + " but the hostfile has " +
                           std::to_string(slots) + " slot" + (slots == 1 ? "" : "s")}},
          "the hostfile");
    }
    launch.hostfile = std::filesystem::absolute(hosts).string();
  }
  launch.nproc = nproc;
  return launch;
}

int ranks_on_busiest_host(const std::string& hosts, int nproc) {
  if (hosts.empty()) return nproc;
  int left = nproc, busiest = 0;
  for (const HostSlots& h : read_hostfile(hosts)) {
    const int here = std::min(h.slots, left);
    busiest = std::max(busiest, here);
    left -= here;
  }
  return std::max(busiest, 1);
}

MemoryFit check_job_memory(const JobConfig& job, const JobArgs& args, ComputeKind backend,
                           MemoryCapacity& capacity) {
  capacity.host = host_memory();
  capacity.gpu = backend == ComputeKind::kCuda ? gpu_memory() : 0;
  return check_memory_fit(job, args.nproc, ranks_on_busiest_host(args.hosts, args.nproc), backend,
                          capacity, tokenized_text_bytes(job.data));
}

std::string describe_best_checkpoint(const std::string& run_dir) {
  const std::filesystem::path link = std::filesystem::path(checkpoints_root(run_dir)) / kBestLink;
  std::error_code ec;
  if (!std::filesystem::is_symlink(link, ec)) return "";
  const std::string said =
      link.string() + " -> " + std::filesystem::read_symlink(link, ec).string();
  try {
    const Manifest m = load_manifest(link.string());
    // Only a checkpoint saved as the best ("best": true) holds its own loss: one linked by hand,
    // or of an older format, says so rather than show the best loss so far (0 before any) as its.
    const bool known = m.state.is_object() && m.state.value("best", false) &&
                       m.state.contains("best_val_loss") && m.state["best_val_loss"].is_number();
    char tail[96];
    if (known) {
      std::snprintf(tail, sizeof tail, " (val_loss %.4f at step %lld)",
                    m.state["best_val_loss"].get<double>(), static_cast<long long>(m.step));
    } else {
      std::snprintf(tail, sizeof tail, " (step %lld; its manifest does not mark it the best)",
                    static_cast<long long>(m.step));
    }
    return said + tail;
  } catch (const std::exception& e) {
    return said + " (unreadable: " + e.what() + ")";
  }
}

}  // namespace rm
