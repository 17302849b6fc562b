// Thread control for the CPU kernels.
//
// The kernels parallelise with OpenMP and call OpenBLAS (its OpenMP build), so both share one
// OpenMP runtime: a BLAS call made inside a kernel's parallel region runs single-threaded, one
// made outside uses the whole team. set_num_threads sets the team size for both.
#pragma once

namespace rm::cpu {

// Sets the thread count of the OpenMP kernels and of OpenBLAS and returns it: n, at least 1 and
// at most OMP_THREAD_LIMIT (omp_get_thread_limit()). Affects the calling thread's OpenMP ICV
// (like omp_set_num_threads): call it from the thread that runs the kernels, before the step
// loop.
int set_num_threads(int n);

// The thread count the next parallel kernel will use (omp_get_max_threads()).
int num_threads();

// The CPUs this process may run on (omp_get_num_procs(): its affinity mask).
int available_cpus();

}  // namespace rm::cpu
