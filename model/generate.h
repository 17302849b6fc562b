// Text generation from a trained model: repeated next-token prediction with temperature
// sampling (temperature 0 = greedy). Draws come from the counter-based RNG keyed by
// (seed, position), so a given seed always produces the same text.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace rm {

// Returns `count` new tokens that follow `prompt` (which must not be empty).
std::vector<int> generate(Model& model, const float* params, const std::vector<int>& prompt,
                          int count, double temperature, uint64_t seed);

}  // namespace rm
