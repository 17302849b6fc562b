#include "launcher/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "checkpoint/atomic_file.h"
#include "checkpoint/weights_file.h"
#include "configs/job_loader.h"

namespace rm {

namespace fs = std::filesystem;

std::string run_file(const std::string& run_dir, const char* name) {
  return (fs::path(run_dir) / name).string();
}

void prepare_run_dir(const std::string& run_dir, bool fresh) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw IoError(run_dir + ": cannot create run directory: " + ec.message());
  if (!fs::is_directory(run_dir)) throw IoError(run_dir + ": run_dir is not a directory");
  if (::access(run_dir.c_str(), W_OK | X_OK) != 0) {
    throw IoError(run_dir + ": run directory is not writable: " + std::strerror(errno));
  }
  for (const char* name : {"weights.bin", "metrics.jsonl"}) {
    if (!fresh && fs::exists(run_file(run_dir, name))) {
      throw IoError(run_dir + ": already holds a run (" + name +
                    "); pass --fresh to start it over, or set run_dir to a new directory");
    }
  }
}

LoadedRun load_run(const std::string& run_dir, int max_batch) {
  LoadedRun run;
  const std::string config = run_file(run_dir, "config.yaml");
  if (!fs::exists(config)) {
    throw IoError(config + ": no such file (is " + run_dir + " a run directory?)");
  }
  run.job = load_job(config);
  run.model = make_model(run.job.model, max_batch > 0 ? max_batch : run.job.train.micro_batch);
  run.params = load_weights(run_file(run_dir, "weights.bin"), run.model->layout().size());
  return run;
}

}  // namespace rm
