// How `ringmaster sample` chooses the next token from a model's logits: temperature, top-k and
// nucleus (top-p) filtering, as Hugging Face's generate() and nanoGPT's sample.py do.
//
// The draw is one uniform number u in [0, 1) (the caller's: generate.h keys it by seed and
// position), so the choice is a pure function of (logits, options, u):
//  - temperature 0: the largest logit (the first of equals), whatever else is set;
//  - no filtering (top_k 0, top_p 1): the softmax at the temperature, the token whose
//    cumulative probability, in vocabulary order, first exceeds u;
//  - filtering: the tokens ranked by logit (equals by id), cut to the first top_k, then to the
//    shortest prefix whose probability (at the temperature, over those kept) reaches top_p;
//    u picks within that prefix by its renormalised probabilities, in rank order.
#pragma once

namespace rm {

struct SamplingOptions {
  double temperature = 0.8;  // 0 = greedy
  int top_k = 0;             // keep this many most likely tokens; 0 = all
  double top_p = 1.0;        // keep the most likely tokens up to this much probability; 1 = all
};

// Throws std::invalid_argument for a negative temperature or top_k, or top_p outside (0, 1].
void check_sampling_options(const SamplingOptions& options);

int pick_token(const float* logits, int vocab, const SamplingOptions& options, float u);

}  // namespace rm
