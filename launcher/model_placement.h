// Where a command that uses a trained model (`ringmaster eval`, `ringmaster sample`) runs it, and
// in what precision:
//   backend    --backend, else the job's parallel.backend, chosen as a one-rank run on this
//              machine would (worker/device_select.h): auto takes a visible GPU, else the cpu;
//              cuda with no usable GPU is a DeviceError naming why and the flag that helps.
//   precision  --precision, else the job's parallel.precision on a GPU (what its evaluations
//              during training read: the bf16 copy of a bf16 job's weights) and fp32 on the
//              cpu, whose bf16 is emulated and slower than its fp32. fp32 GEMMs on a GPU are
//              fp32, not TF32 (PyTorch's default; training's fp32 uses TF32).
// What the backend says of itself (cuDNN's attention) goes to stderr: stdout is the command's
// output.
#pragma once

#include <memory>
#include <string>

#include "configs/job_config.h"
#include "kernels/compute.h"
#include "launcher/loaded_run.h"

namespace rm {

struct ModelPlacement {
  std::unique_ptr<Compute> compute;  // must outlive the model made on it
  Precision precision = Precision::kFp32;
  std::string describe() const;  // "cuda:0 NVIDIA H100 ..., bf16" for the console
  // A ModelMaker (loaded_run.h) making the model on `compute` in `precision`.
  ModelMaker maker() const;
};

// command: "eval" or "sample", for messages. backend, precision: the flags' words ("auto",
// "cpu", "cuda"; "fp32", "bf16"), "" for the job's (as above). Throws DeviceError when the
// backend cannot be had here, std::invalid_argument for a word that is none of the choices.
ModelPlacement place_model(const JobConfig& job, const std::string& command,
                           const std::string& backend, const std::string& precision);

}  // namespace rm
