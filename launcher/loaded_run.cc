#include "launcher/loaded_run.h"

#include <filesystem>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_pin.h"
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

LoadedRun load_checkpoint_as_is(const std::string& ckpt_dir, int max_batch,
                                const ModelMaker& make) {
  if (const std::string refusal = uncommitted_save_refusal(ckpt_dir); !refusal.empty()) {
    throw CheckpointError(ckpt_dir + ": " + refusal);
  }
  const auto pin = CheckpointPin::take(ckpt_dir);  // a live run's retention leaves it alone
  if (!pin) throw IoError(ckpt_dir + ": no such directory (removed by its run's retention?)");
  pause_before_reading_for_tests();
  CheckpointReader reader(pin->path());  // checkpoints/best resolved once, read whole
  const Manifest& m = reader.manifest();
  LoadedRun run;
  run.job = load_stored_job(m.job, (fs::path(ckpt_dir) / "manifest.json").string());
  run.model = make_for(run.job, max_batch, make);
  // A checkpoint whose job and tensors disagree was not written by Ringmaster.
  check_checkpoint_matches_model(m, *run.model, ckpt_dir);
  run.params = reader.read_buffer("params");
  run.source = ckpt_dir;
  run.step = m.step;
  return run;
}

LoadedRun load_checkpoint(const std::string& ckpt_dir, int max_batch, const ModelMaker& make) {
  try {
    return load_checkpoint_as_is(ckpt_dir, max_batch, make);
  } catch (const CheckpointError& e) {
    // A damaged checkpoint given to eval, sample or export is bad input (exit 2), as a damaged
    // weights.bin is; `ckpt verify` is what reports damage as its finding (exit 1).
    throw IoError(e.what());
  }
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
    // The checkpoint chosen is pinned (checkpoint_pin.h) until it is read. Where pins hold
    // nothing (no flock on directories), a run still training may remove it (checkpoint.keep)
    // first: a failed read is tried again while the newest checkpoint that verifies is another
    // one by then (if it is the same one, the failure is the checkpoint's own).
    constexpr int kAttempts = 5;
    for (int attempt = 1;; ++attempt) {
      std::vector<std::string> skipped;
      const auto ckpt = find_resume_checkpoint(path, &skipped);
      if (!ckpt) {
        std::string why;
        for (const std::string& s : skipped) why += "\n  " + s;
        throw IoError(path +
                      ": has neither weights.bin (the run has not finished) nor a "
                      "checkpoint that verifies" +
                      why);
      }
      try {
        return load_checkpoint(ckpt->path, max_batch, make);
      } catch (const IoError&) {
        const auto now = find_resume_checkpoint(path);
        if (attempt == kAttempts || !now || now->path == ckpt->path) throw;
      }
    }
  }
  LoadedRun run;
  run.job = load_stored_job_file(config);
  run.model = make_for(run.job, max_batch, make);
  run.params = load_weights(weights, run.model->layout().size());
  run.source = weights;
  return run;
}

}  // namespace rm
