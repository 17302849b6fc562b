// Scoring a model on data: the mean loss per predicted token over evaluation windows
// (non-overlapping seq_len windows in file order, the same every time), and the accuracy on
// multiple-choice examples (worker/data/choice_file.h: HellaSwag as llm.c scores it).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "model/param_access.h"
#include "worker/data/choice_file.h"
#include "worker/data/dataset.h"

namespace rm {

struct EvalResult {
  double mean_loss = 0;  // nats per target
  int64_t targets = 0;
};

// Evaluates the first `max_windows` windows of data (0 or more than it has = all), in
// micro-batches of up to model.max_batch(). params: the model's, on its compute (ResidentParams,
// or a FlatParamAccess over fp32 values in its memory).
EvalResult evaluate_windows(Model& model, ParamAccess& params, const WindowDataset& data,
                            uint64_t max_windows);

struct ChoiceResult {
  int64_t examples = 0;
  int64_t correct = 0;  // examples whose right completion has the lowest mean loss
  double accuracy() const { return examples > 0 ? static_cast<double>(correct) / examples : 0; }
};

// Scores the first `max_examples` examples (0 or more than there are = all), each completion
// appended to its example's context: the model's pick is the completion of the lowest mean loss
// per token of the completion (the loss of a token, given the context and the completion's
// tokens before it), the first of equals -- llm.c's rule for HellaSwag (its
// evalloader_stat_losses), which normalises for the completions' lengths. model.max_batch()
// rows a forward pass (plan_choice_passes), each choice_row_len(model) tokens long. The examples
// must fit the model (check_choices_fit). A gpt model only.
ChoiceResult evaluate_choices(Model& model, ParamAccess& params,
                              const std::vector<ChoiceExample>& examples, size_t max_examples);

// The row length multiple-choice passes take on the model's backend: 0 (each pass as long as its
// longest row) on the cpu; seq_len elsewhere, as the cuda backend's kernels were tested at whole
// seq_len rows only.
int choice_row_len(const Model& model);

// A row of a multiple-choice forward pass: one completion of one example after its context.
struct ChoiceRow {
  size_t example = 0;
  size_t completion = 0;
};

struct ChoicePass {
  std::vector<ChoiceRow> rows;
  int len = 0;  // tokens a row
};

// Every completion of the examples `indices` (in their order, an example's completions in
// theirs) as rows of passes of at most max_rows rows: an example's completions may span two
// passes, as each row is scored alone. Each pass is as long as its longest row, or `row_len`
// tokens when that is > 0 (a backend that takes whole seq_len rows only).
std::vector<ChoicePass> plan_choice_passes(const std::vector<ChoiceExample>& examples,
                                           const std::vector<size_t>& indices, int max_rows,
                                           int row_len = 0);

// Runs one pass: each row's mean loss per completion token, in the pass's row order.
std::vector<double> score_choice_pass(Model& model, ParamAccess& access,
                                      const std::vector<ChoiceExample>& examples,
                                      const ChoicePass& pass);

// The picks of a plan's passes, fed in order: an example is decided when its last
// completion's loss comes.
class ChoiceTally {
 public:
  explicit ChoiceTally(const std::vector<ChoiceExample>& examples) : examples_(examples) {}
  void add(const ChoicePass& pass, const std::vector<double>& row_means);
  const ChoiceResult& result() const { return result_; }

 private:
  const std::vector<ChoiceExample>& examples_;
  ChoiceResult result_;
  size_t pick_ = 0;
  double best_ = 0;
};

}  // namespace rm
