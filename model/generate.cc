#include "model/generate.h"

#include <stdexcept>

#include "kernels/counter_rng.h"

namespace rm {

std::vector<int> generate(Model& model, ParamAccess& params, const std::vector<int>& prompt,
                          int count, const SamplingOptions& options, uint64_t seed) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  check_sampling_options(options);
  std::vector<int> context = prompt;
  std::vector<int> out;
  out.reserve(count);
  for (int i = 0; i < count; ++i) {
    const float* logits =
        model.next_token_logits(params, context.data(), static_cast<int>(context.size()));
    const float u = rng_uniform(seed, RngPurpose::kSample, static_cast<uint64_t>(i), 0);
    const int token = pick_token(logits, model.vocab_size(), options, u);
    context.push_back(token);
    out.push_back(token);
  }
  return out;
}

}  // namespace rm
