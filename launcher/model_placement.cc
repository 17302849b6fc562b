#include "launcher/model_placement.h"

#include "configs/job_choices.h"
#include "kernels/compute_factory.h"
#include "model/model.h"
#include "worker/device_select.h"

namespace rm {

std::string ModelPlacement::describe() const {
  return compute->describe() + ", " + choice_name(precision);
}

ModelMaker ModelPlacement::maker() const {
  Compute* const on = compute.get();
  const Precision in = precision;
  return [on, in](const JobConfig& job, int max_batch) {
    return make_model(job.model, max_batch, on, in);
  };
}

ModelPlacement place_model(const JobConfig& job, const std::string& command,
                           const std::string& backend, const std::string& precision) {
  const Backend asked = backend.empty() ? job.parallel.backend : choice_of<Backend>(backend);
  std::string why_none;
  // The cpu asked for: the CUDA driver is not even started.
  const int gpus = asked == Backend::kCpu ? 0 : cuda_device_count(&why_none);
  if (asked == Backend::kCuda && gpus == 0) {
    // Said in the command's terms: the fix is a flag here, not the job file.
    throw DeviceError(
        (backend.empty() ? "the run's parallel.backend is cuda" : command + " --backend cuda") +
        ", but no GPU is usable here: " + why_none + "; give " + command + " --backend cpu");
  }
  const DeviceChoice choice =
      choose_device(asked, /*local_rank=*/0, /*local_ranks=*/1, gpus, why_none);
  ModelPlacement p;
  if (!precision.empty()) {
    p.precision = choice_of<Precision>(precision);
  } else {
    p.precision = choice.kind == ComputeKind::kCpu ? Precision::kFp32 : job.parallel.precision;
  }
  ComputeOptions options;
  options.device = choice.device < 0 ? 0 : choice.device;
  // fp32 means fp32 here (PyTorch's default too): a score is compared with other tools'.
  options.allow_tf32 = false;
  // stdout is the command's output: what the backend chooses is said on stderr.
  options.notes = stderr;
  p.compute = make_compute(choice.kind, options);
  return p;
}

}  // namespace rm
