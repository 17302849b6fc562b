#include "model/generate.h"

#include <cmath>
#include <stdexcept>

#include "kernels/counter_rng.h"

namespace rm {
namespace {

int pick(const float* logits, int V, double temperature, float u) {
  int best = 0;
  for (int i = 1; i < V; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  if (temperature <= 0) return best;
  // Softmax at temperature T, inverse-CDF draw with one uniform number.
  std::vector<double> p(V);
  double sum = 0;
  for (int i = 0; i < V; ++i) {
    p[i] = std::exp((logits[i] - logits[best]) / temperature);
    sum += p[i];
  }
  double target = u * sum, acc = 0;
  for (int i = 0; i < V; ++i) {
    acc += p[i];
    if (acc > target) return i;
  }
  return V - 1;
}

}  // namespace

std::vector<int> generate(Model& model, const float* params, const std::vector<int>& prompt,
                          int count, double temperature, uint64_t seed) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  std::vector<int> context = prompt;
  std::vector<int> out;
  out.reserve(count);
  for (int i = 0; i < count; ++i) {
    const float* logits =
        model.next_token_logits(params, context.data(), static_cast<int>(context.size()));
    const float u = rng_uniform(seed, RngPurpose::kSample, static_cast<uint64_t>(i), 0);
    const int token = pick(logits, model.vocab_size(), temperature, u);
    context.push_back(token);
    out.push_back(token);
  }
  return out;
}

}  // namespace rm
