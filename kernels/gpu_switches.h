// The cuda backend's environment switches, each a small integer: what values each takes, read
// in one place. The kernels read theirs where they apply (kernels/cuda: once per process, at
// the first attention or loss); gpu_switches_error() checks them all as a job is checked
// (worker/job_preparation.h), so that a value none of them takes is refused before anything is
// written, naming the variable -- not thrown from inside the first training step, after the run
// directory and the first events were made. Checked on every backend: a cpu job given
// RM_CUDNN_ATTENTION=yes is as much a typo, and the same job file runs on a GPU next.
// RM_CUDA_GRAPH, which tells "unset" from "1", is worker/step_graph.h's.
// Header-only and host-only (no CUDA): the worker includes it in a build without CUDA.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace rm {

struct GpuSwitch {
  const char* name;
  int unset;   // the value when unset or empty
  int lowest;  // the values taken: lowest..highest
  int highest;
  const char* values;  // what each value means, for the message
};

// RM_CUDNN_ATTENTION (kernels/cuda/cudnn_sdpa.h): cuDNN's fused attention, on by default.
inline constexpr GpuSwitch kCudnnAttentionSwitch{
    "RM_CUDNN_ATTENTION", 1, 0, 2,
    "0 (off), 1 (cuDNN, deterministic backward) or 2 (cuDNN, dQ accumulated)"};
// RM_CUDA_CE_ROW_IN_SMEM (kernels/cuda/cross_entropy.h): the classifier's row in shared memory.
inline constexpr GpuSwitch kCrossEntropyRowSwitch{"RM_CUDA_CE_ROW_IN_SMEM", 0, 0, 1,
                                                  "0 or 1 (the cross-entropy kernel's row kept "
                                                  "in shared memory)"};
// RM_FLASH_DKV_FRAGMENTS / RM_FLASH_DQ_FRAGMENTS (kernels/cuda/flash_attention.h).
inline constexpr GpuSwitch kFlashDkvFragmentsSwitch{
    "RM_FLASH_DKV_FRAGMENTS", 1, 1, 2, "1 or 2 (row fragments a warp of the flash dK/dV kernel)"};
inline constexpr GpuSwitch kFlashDqFragmentsSwitch{
    "RM_FLASH_DQ_FRAGMENTS", 1, 1, 2, "1 or 2 (row fragments a warp of the flash dQ kernel)"};

inline constexpr GpuSwitch kGpuSwitches[] = {kCudnnAttentionSwitch, kCrossEntropyRowSwitch,
                                             kFlashDkvFragmentsSwitch, kFlashDqFragmentsSwitch};

// The switch's value from the environment; throws std::invalid_argument "NAME=VALUE: expected
// ..." for anything but one decimal digit in its range.
inline int gpu_switch_value(const GpuSwitch& s) {
  const char* v = std::getenv(s.name);
  if (v == nullptr || *v == '\0') return s.unset;
  const std::string text = v;
  if (text.size() == 1 && text[0] >= '0' + s.lowest && text[0] <= '0' + s.highest) {
    return text[0] - '0';
  }
  throw std::invalid_argument(std::string(s.name) + "=" + text + ": expected " + s.values);
}

// Every switch of kGpuSwitches checked: the first bad one's message, or "".
inline std::string gpu_switches_error() {
  for (const GpuSwitch& s : kGpuSwitches) {
    try {
      gpu_switch_value(s);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  }
  return "";
}

}  // namespace rm
