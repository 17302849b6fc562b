// The sgemm rate of this CPU at a model's own GEMM shapes: the baseline of `bench train` and of
// the console's MFU (model FLOP utilisation = a step's GEMM flops per second / this rate).
#pragma once

#include <vector>

#include "kernels/compute.h"
#include "model/model.h"

namespace rm {

// Seconds for one issue of `g` (all its `count` repetitions), the median of `reps` runs after a
// warm-up run. Attention's per-head GEMMs run as independent single-threaded sgemms in
// parallel, as the kernel does. Uses the calling thread's OpenMP thread count. The repetitions
// cycle through distinct operands (up to 128 MiB of them), as a step's layers do, so that the
// baseline does not run from cache where the step cannot.
double time_gemm(const GemmShape& g, int reps);

// Flops per second over all of `gemms`, each timed with time_gemm(g, reps).
double sgemm_rate(const std::vector<GemmShape>& gemms, int reps);

// On a device backend: seconds for one issue of `g` (count repetitions) through the backend's
// own GEMM -- bf16 linear_forward (cuBLAS, fp32 accumulation) for bf16, sgemm (TF32 where the
// backend allows it) for fp32 -- the median of `reps` runs after a warm-up, each run ended by a
// synchronize. Transposes are not varied: a tensor-core GEMM of the same m, n, k runs at the
// same rate. Per-head (attention) shapes are not timed here: the caller leaves them out.
double time_device_gemm(Compute& compute, const GemmShape& g, Precision precision, int reps);

}  // namespace rm
