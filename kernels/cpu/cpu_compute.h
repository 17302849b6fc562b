// The cpu backend of the compute interface (kernels/compute.h): memory is host memory, kernels
// run now on the calling thread (OpenMP teams inside, OpenBLAS for the GEMMs), float layers are
// the kernels of this folder, bf16 layers are emulated (bf16_layers.h).
#pragma once

#include <memory>

#include "kernels/compute.h"

namespace rm::cpu {

// Sets the calling thread's OpenMP and BLAS thread count to `threads` (set_num_threads);
// threads <= 0 leaves it as it is.
std::unique_ptr<Compute> make_cpu_compute(int threads);

}  // namespace rm::cpu
