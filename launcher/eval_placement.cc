#include "launcher/eval_placement.h"

#include "configs/job_choices.h"
#include "kernels/compute_factory.h"
#include "model/model.h"
#include "worker/device_select.h"

namespace rm {

std::string EvalPlacement::describe() const {
  return compute->describe() + ", " + choice_name(precision);
}

ModelMaker EvalPlacement::maker() {
  Compute* const on = compute.get();
  const Precision in = precision;
  return [on, in](const JobConfig& job, int max_batch) {
    return make_model(job.model, max_batch, on, in);
  };
}

EvalPlacement place_eval(const JobConfig& job, const std::string& backend,
                         const std::string& precision) {
  const Backend asked = backend.empty() ? job.parallel.backend : choice_of<Backend>(backend);
  std::string why_none;
  const int gpus = cuda_device_count(&why_none);
  if (asked == Backend::kCuda && gpus == 0) {
    // Said in eval's terms: the fix is a flag here, not the job file.
    throw DeviceError(std::string(backend.empty() ? "the run's parallel.backend is cuda"
                                                  : "eval --backend cuda") +
                      ", but no GPU is usable here: " + why_none + "; give eval --backend cpu");
  }
  const DeviceChoice choice =
      choose_device(asked, /*local_rank=*/0, /*local_ranks=*/1, gpus, why_none);
  EvalPlacement p;
  ComputeOptions options;
  options.device = choice.device < 0 ? 0 : choice.device;
  p.compute = make_compute(choice.kind, options);
  if (!precision.empty()) {
    p.precision = choice_of<Precision>(precision);
  } else {
    p.precision = choice.kind == ComputeKind::kCpu ? Precision::kFp32 : job.parallel.precision;
  }
  return p;
}

}  // namespace rm
