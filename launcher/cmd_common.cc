#include "launcher/cmd_common.h"

#include <cstdio>
#include <thread>

#include "checkpoint/atomic_file.h"
#include "configs/job_loader.h"
#include "kernels/cpu/threads.h"
#include "launcher/exit_codes.h"
#include "worker/data/data_error.h"

namespace rm {

namespace {
std::string g_error_prefix;
}  // namespace

void set_error_prefix(const std::string& prefix) { g_error_prefix = prefix; }

void print_error(const std::string& message) {
  std::fprintf(stderr, "ringmaster: %s%s\n", g_error_prefix.c_str(), message.c_str());
}

int report_errors(const std::function<int()>& body) {
  try {
    return body();
  } catch (const JobConfigError& e) {
    for (const ConfigError& err : e.errors) std::fprintf(stderr, "%s\n", err.str().c_str());
    print_error(std::to_string(e.errors.size()) + (e.errors.size() == 1 ? " error" : " errors") +
                " in the job");
    return kExitBadInput;
  } catch (const DataError& e) {
    print_error(e.what());
    return kExitBadInput;
  } catch (const IoError& e) {
    print_error(e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitFailure;
  }
}

JobConfig load_job_args(const JobArgs& args) {
  return load_job(args.job, args.sets, args.nproc);
}

int configure_threads(const ParallelConfig& parallel, int local_ranks) {
  int threads = parallel.threads_per_rank;
  if (threads <= 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, cores / std::max(1, local_ranks));
  }
  cpu::set_num_threads(threads);
  return threads;
}

}  // namespace rm
