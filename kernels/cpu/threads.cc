#include "kernels/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

namespace rm::cpu {

void set_num_threads(int n) {
  if (n < 1) n = 1;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() {
  return omp_get_max_threads();
}

}  // namespace rm::cpu
