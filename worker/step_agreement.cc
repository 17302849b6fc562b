#include "worker/step_agreement.h"

#include <sys/resource.h>

#include <vector>

namespace rm {

StepAgreement agree_on_step(Communicator& comm, const RankContribution& mine) {
  constexpr size_t kFields = 4;
  const int ranks = comm.size();
  std::vector<double> all(kFields * static_cast<size_t>(ranks), 0.0);
  double* own = all.data() + kFields * static_cast<size_t>(comm.rank());
  own[0] = mine.loss_sum;
  own[1] = mine.stop ? 1.0 : 0.0;
  own[2] = mine.busy_ms;
  own[3] = mine.peak_rss_mib;
  comm.all_gather(all.data(), std::vector<size_t>(static_cast<size_t>(ranks), kFields),
                  DType::kFloat64)
      ->wait();
  StepAgreement out;
  out.busy_ms_max = out.busy_ms_min = all[2];
  for (int r = 0; r < ranks; ++r) {
    const double* f = all.data() + kFields * static_cast<size_t>(r);
    out.loss_sum += f[0];
    out.stop = out.stop || f[1] != 0;
    if (f[2] > out.busy_ms_max) out.busy_ms_max = f[2], out.slowest_rank = r;
    if (f[2] < out.busy_ms_min) out.busy_ms_min = f[2];
    if (f[3] > out.peak_rss_mib) out.peak_rss_mib = f[3];
  }
  return out;
}

double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: KiB
}

}  // namespace rm
