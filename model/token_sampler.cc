#include "model/token_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace rm {

void check_sampling_options(const SamplingOptions& o) {
  if (!(o.temperature >= 0)) throw std::invalid_argument("temperature must be >= 0");
  if (o.top_k < 0) throw std::invalid_argument("top-k must be >= 0 (0 = all tokens)");
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    throw std::invalid_argument("top-p must be in (0, 1] (1 = all tokens)");
  }
}

int pick_token(const float* logits, int V, const SamplingOptions& o, float u) {
  check_sampling_options(o);
  // A NaN or infinite logit (a forward that overflowed: bf16 to inf, then NaN in a layernorm)
  // would pick the last token every time, or index 0, or break the sort's ordering: said.
  for (int i = 0; i < V; ++i) {
    if (!std::isfinite(logits[i])) {
      throw std::runtime_error("the model's logit of token " + std::to_string(i) + " is " +
                               std::to_string(logits[i]) +
                               ": its forward did not stay finite (the weights, or the precision)");
    }
  }
  const int best = static_cast<int>(std::max_element(logits, logits + V) - logits);
  if (o.temperature <= 0) return best;
  const auto weight = [&](int i) { return std::exp((logits[i] - logits[best]) / o.temperature); };
  if ((o.top_k == 0 || o.top_k >= V) && o.top_p >= 1) {
    // Inverse-CDF over the whole vocabulary in id order (what sample did before filtering
    // existed: the same seed gives the same text).
    std::vector<double> p(V);
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += p[i] = weight(i);
    const double target = u * sum;
    double acc = 0;
    for (int i = 0; i < V; ++i) {
      acc += p[i];
      if (acc > target) return i;
    }
    return V - 1;
  }
  std::vector<int> rank(V);
  std::iota(rank.begin(), rank.end(), 0);
  const int k = o.top_k > 0 && o.top_k < V ? o.top_k : V;
  std::partial_sort(rank.begin(), rank.begin() + k, rank.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> p(k);
  double sum = 0;
  for (int r = 0; r < k; ++r) sum += p[r] = weight(rank[r]);
  // The nucleus: the shortest prefix of the ranking whose probability reaches top_p (at least
  // one token).
  int kept = 0;
  double mass = 0;
  while (kept < k && (kept == 0 || mass < o.top_p * sum)) mass += p[kept++];
  const double target = u * mass;
  double acc = 0;
  for (int r = 0; r < kept; ++r) {
    acc += p[r];
    if (acc > target) return rank[r];
  }
  return rank[kept - 1];
}

}  // namespace rm
