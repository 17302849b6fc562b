#include "worker/evaluate.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace rm {

EvalResult evaluate_windows(Model& model, ParamAccess& params, const WindowDataset& data,
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
  if (max_rows < 1) throw std::invalid_argument("plan_choice_passes: max_rows < 1");
  std::vector<ChoicePass> passes;
  for (size_t i : indices) {
    const ChoiceExample& e = examples[i];
    for (size_t c = 0; c < e.completions.size(); ++c) {
      if (passes.empty() || static_cast<int>(passes.back().rows.size()) == max_rows) {
        passes.emplace_back();
      }
      ChoicePass& p = passes.back();
      p.rows.push_back({i, c});
      // The last completion token is only predicted, never read.
      p.len =
          row_len > 0
              ? row_len
              : std::max(p.len, static_cast<int>(e.context.size() + e.completions[c].size() - 1));
    }
  }
  return passes;
}

std::vector<double> score_choice_pass(Model& model, ParamAccess& access,
                                      const std::vector<ChoiceExample>& examples,
                                      const ChoicePass& pass) {
  const int len = pass.len, rows = static_cast<int>(pass.rows.size());
  // Row r: the context, then the completion but its last token; 0 past its end, which a causal
  // model does not read for the positions scored.
  std::vector<int> inputs(static_cast<size_t>(rows) * len, 0), targets(inputs.size(), 0);
  std::vector<TokenSpan> spans;
  for (int r = 0; r < rows; ++r) {
    const ChoiceExample& e = examples[pass.rows[r].example];
    const std::vector<int>& c = e.completions[pass.rows[r].completion];
    const int context = static_cast<int>(e.context.size());
    int* in = inputs.data() + static_cast<size_t>(r) * len;
    int* out = targets.data() + static_cast<size_t>(r) * len;
    std::copy(e.context.begin(), e.context.end(), in);
    std::copy(c.begin(), c.end() - 1, in + context);
    // Position p predicts token p + 1: the completion's tokens are the targets of positions
    // context - 1 onwards.
    std::copy(c.begin(), c.end(), out + context - 1);
    spans.push_back({r, context - 1, static_cast<int>(c.size())});
  }
  std::vector<double> means =
      model.span_losses(access, inputs.data(), targets.data(), rows, len, spans);
  for (size_t r = 0; r < means.size(); ++r) means[r] /= static_cast<double>(spans[r].count);
  return means;
}

void ChoiceTally::add(const ChoicePass& pass, const std::vector<double>& row_means) {
  for (size_t r = 0; r < pass.rows.size(); ++r) {
    const ChoiceRow& row = pass.rows[r];
    if (row.completion == 0 || row_means[r] < best_) {
      best_ = row_means[r];
      pick_ = row.completion;
    }
    const ChoiceExample& e = examples_[row.example];
    if (row.completion + 1 == e.completions.size()) {
      result_.correct += pick_ == static_cast<size_t>(e.label) ? 1 : 0;
      ++result_.examples;
    }
  }
}

int choice_row_len(const Model& model) {
  return model.compute().kind() == ComputeKind::kCpu ? 0 : model.seq_len();
}

ChoiceResult evaluate_choices(Model& model, ParamAccess& params,
                              const std::vector<ChoiceExample>& examples, size_t max_examples) {
  const size_t total = max_examples > 0 ? std::min(max_examples, examples.size()) : examples.size();
  std::vector<size_t> indices(total);
  for (size_t i = 0; i < total; ++i) indices[i] = i;
  ChoiceTally tally(examples);
  for (const ChoicePass& pass :
       plan_choice_passes(examples, indices, model.max_batch(), choice_row_len(model))) {
    tally.add(pass, score_choice_pass(model, params, examples, pass));
  }
  return tally.result();
}

}  // namespace rm
