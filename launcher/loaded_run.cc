#include "launcher/loaded_run.h"

#include <filesystem>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/weights_file.h"
#include "configs/job_loader.h"
#include "io/atomic_file.h"
#include "worker/checkpointing.h"

namespace rm {

namespace fs = std::filesystem;

namespace {

std::unique_ptr<Model> make_for(const JobConfig& job, int max_batch, const ModelMaker& make) {
  const int batch = max_batch > 0 ? max_batch : job.train.micro_batch;
  return make ? make(job, batch) : make_model(job.model, batch);
}

LoadedRun load_checkpoint(const std::string& ckpt_dir, int max_batch, const ModelMaker& make) {
  CheckpointReader reader(ckpt_dir);
  const Manifest& m = reader.manifest();
  LoadedRun run;
  run.job = load_job_from_string(m.job, (fs::path(ckpt_dir) / "manifest.json").string());
  run.model = make_for(run.job, max_batch, make);
  // A checkpoint whose job and tensors disagree was not written by Ringmaster.
  check_checkpoint_matches_model(m, *run.model, ckpt_dir);
  run.params = reader.read_buffer("params");
  run.source = ckpt_dir;
  run.step = m.step;
  return run;
}

}  // namespace

LoadedRun load_trained_model(const std::string& path, int max_batch, const ModelMaker& make) {
  if (!fs::is_directory(path)) {
    throw IoError(path + ": no such directory (expected a run directory or a checkpoint)");
  }
  if (fs::exists(fs::path(path) / "manifest.json")) return load_checkpoint(path, max_batch, make);

  const std::string config = (fs::path(path) / "config.yaml").string();
  const std::string weights = (fs::path(path) / "weights.bin").string();
  if (!fs::exists(config)) {
    throw IoError(config + ": no such file (is " + path + " a run directory or a checkpoint?)");
  }
  if (!fs::exists(weights)) {
    std::vector<std::string> skipped;
    const auto ckpt = find_resume_checkpoint(path, &skipped);
    if (!ckpt) {
      std::string why;
      for (const std::string& s : skipped) why += "\n  " + s;
      throw IoError(path + ": has neither weights.bin (the run has not finished) nor a "
                    "checkpoint that verifies" + why);
    }
    return load_checkpoint(ckpt->path, max_batch, make);
  }
  LoadedRun run;
  run.job = load_job(config);
  run.model = make_for(run.job, max_batch, make);
  run.params = load_weights(weights, run.model->layout().size());
  run.source = weights;
  return run;
}

}  // namespace rm
