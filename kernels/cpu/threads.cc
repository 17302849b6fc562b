#include "kernels/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

namespace rm::cpu {

int set_num_threads(int n) {
  if (n < 1) n = 1;
  // OpenMP never gives a team more than OMP_THREAD_LIMIT threads, but OpenBLAS splits a GEMM
  // into as many parts as it is told and waits for each in a sched_yield loop: told 2 with a
  // limit of 1, its one thread spun for the part nobody ran (measured: a 100-step run that
  // takes 1 s took minutes beside one busy process). So both get the limit.
  n = std::min(n, std::max(1, omp_get_thread_limit()));
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  return n;
}

int num_threads() {
  return omp_get_max_threads();
}

int available_cpus() {
  return omp_get_num_procs();
}

}  // namespace rm::cpu
