#include "worker/evaluate.h"

#include <algorithm>
#include <vector>

namespace rm {

EvalResult evaluate_windows(Model& model, const float* params, const WindowDataset& data,
                            uint64_t max_windows) {
  uint64_t total = data.num_eval_windows();
  if (max_windows > 0) total = std::min(total, max_windows);
  const int T = model.seq_len();
  const int max_b = model.max_batch();
  std::vector<int> inputs(static_cast<size_t>(max_b) * T), targets(inputs.size());
  double loss = 0;
  EvalResult r;
  for (uint64_t first = 0; first < total; first += max_b) {
    const int B = static_cast<int>(std::min<uint64_t>(max_b, total - first));
    data.fill_eval_batch(first, B, inputs.data(), targets.data());
    loss += model.forward_loss(params, inputs.data(), targets.data(), B);
    r.targets += static_cast<int64_t>(B) * model.targets_per_sample();
  }
  r.mean_loss = r.targets > 0 ? loss / static_cast<double>(r.targets) : 0.0;
  return r;
}

}  // namespace rm
