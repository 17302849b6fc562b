// Text generation from a trained model: repeated next-token prediction, each token chosen by
// token_sampler.h (temperature, top-k, top-p; temperature 0 = greedy). Draws come from the
// counter-based RNG keyed by (seed, position), so a given seed always produces the same text.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "model/param_access.h"
#include "model/token_sampler.h"

namespace rm {

// Returns `count` new tokens that follow `prompt` (which must not be empty). params: the model's,
// on its compute (model/resident_params.h).
std::vector<int> generate(Model& model, ParamAccess& params, const std::vector<int>& prompt,
                          int count, const SamplingOptions& options, uint64_t seed);

}  // namespace rm
