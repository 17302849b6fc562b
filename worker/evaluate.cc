#include "worker/evaluate.h"

#include <algorithm>
#include <stdexcept>
#include <string>
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

ChoiceResult evaluate_choices(Model& model, const float* params,
                              const std::vector<ChoiceExample>& examples, size_t max_examples) {
  const size_t total = max_examples > 0 ? std::min(max_examples, examples.size()) : examples.size();
  const int max_rows = model.max_batch();
  ChoiceResult result;
  std::vector<int> inputs, targets;
  for (size_t first = 0; first < total;) {
    // Whole examples while their rows fit; the pass is as long as its longest row.
    size_t end = first;
    int rows = 0, len = 1;
    while (end < total && rows + static_cast<int>(examples[end].completions.size()) <= max_rows) {
      const ChoiceExample& e = examples[end];
      rows += static_cast<int>(e.completions.size());
      for (const auto& c : e.completions) {
        len = std::max(len, static_cast<int>(e.context.size() + c.size() - 1));
      }
      ++end;
    }
    if (end == first) {
      throw std::invalid_argument(
          "evaluate_choices: an example of " + std::to_string(examples[first].completions.size()) +
          " completions, the model holds " + std::to_string(max_rows) + " rows");
    }
    // Row r: the context, then the completion (its last token only a target); 0 past its end,
    // which a causal model does not read for the positions scored.
    inputs.assign(static_cast<size_t>(rows) * len, 0);
    targets.assign(inputs.size(), 0);
    std::vector<TokenSpan> spans;
    int row = 0;
    for (size_t i = first; i < end; ++i) {
      const ChoiceExample& e = examples[i];
      const int context = static_cast<int>(e.context.size());
      for (const auto& c : e.completions) {
        int* in = inputs.data() + static_cast<size_t>(row) * len;
        int* out = targets.data() + static_cast<size_t>(row) * len;
        std::copy(e.context.begin(), e.context.end(), in);
        std::copy(c.begin(), c.end() - 1, in + context);
        // Position p predicts token p + 1: the completion's tokens are the targets of positions
        // context - 1 onwards.
        std::copy(c.begin(), c.end(), out + context - 1);
        spans.push_back({row, context - 1, static_cast<int>(c.size())});
        ++row;
      }
    }
    const std::vector<double> losses =
        model.span_losses(params, inputs.data(), targets.data(), rows, len, spans);
    size_t span = 0;
    for (size_t i = first; i < end; ++i) {
      const ChoiceExample& e = examples[i];
      size_t pick = 0;
      double best = 0;
      for (size_t c = 0; c < e.completions.size(); ++c, ++span) {
        const double mean = losses[span] / static_cast<double>(e.completions[c].size());
        if (c == 0 || mean < best) best = mean, pick = c;
      }
      result.correct += pick == static_cast<size_t>(e.label) ? 1 : 0;
      ++result.examples;
    }
    first = end;
  }
  return result;
}

}  // namespace rm
