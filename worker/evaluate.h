// Scoring a model on data: the mean loss per predicted token over evaluation windows
// (non-overlapping seq_len windows in file order, the same every time).
#pragma once

#include <cstdint>

#include "model/model.h"
#include "worker/data/dataset.h"

namespace rm {

struct EvalResult {
  double mean_loss = 0;  // nats per target
  int64_t targets = 0;
};

// Evaluates the first `max_windows` windows of data (0 or more than it has = all), in
// micro-batches of up to model.max_batch().
EvalResult evaluate_windows(Model& model, const float* params, const WindowDataset& data,
                            uint64_t max_windows);


}  // namespace rm
