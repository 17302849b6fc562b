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

std::vector<ChoicePass> plan_choice_passes(const std::vector<ChoiceExample>& examples,
                                           const std::vector<size_t>& indices, int max_rows,
                                           int row_len) {
  std::vector<ChoicePass> passes;
  for (size_t i : indices) {
    const ChoiceExample& e = examples[i];
    const int rows = static_cast<int>(e.completions.size());
    if (rows > max_rows) {
      throw std::invalid_argument("plan_choice_passes: example " + std::to_string(i) + " has " +
                                  std::to_string(rows) + " completions, a pass holds " +
                                  std::to_string(max_rows) + " rows");
    }
    if (passes.empty() || passes.back().rows + rows > max_rows) passes.emplace_back();
    ChoicePass& p = passes.back();
    p.examples.push_back(i);
    p.rows += rows;
    for (const auto& c : e.completions) {
      // The last completion token is only predicted, never read.
      p.len = std::max(p.len, static_cast<int>(e.context.size() + c.size() - 1));
    }
    if (row_len > 0) p.len = row_len;
  }
  return passes;
}

int64_t score_choice_pass(Model& model, ParamAccess& access,
                          const std::vector<ChoiceExample>& examples, const ChoicePass& pass) {
  const int len = pass.len;
  // Row r: the context, then the completion but its last token; 0 past its end, which a causal
  // model does not read for the positions scored.
  std::vector<int> inputs(static_cast<size_t>(pass.rows) * len, 0), targets(inputs.size(), 0);
  std::vector<TokenSpan> spans;
  int row = 0;
  for (size_t i : pass.examples) {
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
      model.span_losses(access, inputs.data(), targets.data(), pass.rows, len, spans);
  int64_t correct = 0;
  size_t span = 0;
  for (size_t i : pass.examples) {
    const ChoiceExample& e = examples[i];
    size_t pick = 0;
    double best = 0;
    for (size_t c = 0; c < e.completions.size(); ++c, ++span) {
      const double mean = losses[span] / static_cast<double>(e.completions[c].size());
      if (c == 0 || mean < best) best = mean, pick = c;
    }
    correct += pick == static_cast<size_t>(e.label) ? 1 : 0;
  }
  return correct;
}

ChoiceResult evaluate_choices(Model& model, const float* params,
                              const std::vector<ChoiceExample>& examples, size_t max_examples) {
  const size_t total = max_examples > 0 ? std::min(max_examples, examples.size()) : examples.size();
  std::vector<size_t> indices(total);
  for (size_t i = 0; i < total; ++i) indices[i] = i;
  FlatParamAccess access(model.units(), params, nullptr);
  ChoiceResult result;
  for (const ChoicePass& pass : plan_choice_passes(examples, indices, model.max_batch())) {
    result.correct += score_choice_pass(model, access, examples, pass);
    result.examples += static_cast<int64_t>(pass.examples.size());
  }
  return result;
}

}  // namespace rm
