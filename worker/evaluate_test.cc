// worker/evaluate.h's multiple-choice scoring on a scripted model, whose loss of a token is a
// number the test chooses: the pick is by mean loss per completion token (not the sum), the
// first of equals, whatever the rows a pass holds (an example's completions split over
// passes); and each row the model sees is the context, then the completion, each completion
// token the target of the position before it.
#include "worker/evaluate.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace rm {
namespace {

class ScriptedModel final : public Model {
 public:
  ScriptedModel(int max_batch, int seq_len, std::map<int, double> cost)
      : Model(nullptr), max_batch_(max_batch), seq_len_(seq_len), cost_(std::move(cost)) {}

  std::vector<double> span_losses(ParamAccess&, const int* inputs, const int* targets, int B,
                                  int len, const std::vector<TokenSpan>& spans) override {
    if (B > max_batch_ || len > seq_len_) throw std::logic_error("more than planned");
    rows_seen_ += B;
    std::vector<double> out;
    for (const TokenSpan& s : spans) {
      double sum = 0;
      for (int k = 0; k < s.count; ++k) {
        const size_t at = static_cast<size_t>(s.row) * len + s.first + k;
        sum += cost_.at(targets[at]);
        // The row reads the completion's tokens before the one predicted.
        if (k > 0 && inputs[at] != targets[at - 1]) misaligned_ = true;
      }
      out.push_back(sum);
    }
    return out;
  }
  int rows_seen_ = 0;
  bool misaligned_ = false;

  Precision precision() const override { return Precision::kFp32; }
  const ParamLayout& layout() const override { return layout_; }
  const std::vector<ParamUnit>& units() const override { return units_; }
  std::string unit_name(int) const override { return ""; }
  void init_params(float*, size_t, size_t, uint64_t) const override {}
  int max_batch() const override { return max_batch_; }
  int seq_len() const override { return seq_len_; }
  int vocab_size() const override { return 100; }
  int targets_per_sample() const override { return seq_len_; }
  void queue_forward_backward(ParamAccess&, const int*, const int*, int, float,
                              const MicroBatchKey&) override {}
  double take_loss_sum() override { return 0; }
  void queue_loss_copy(double*) override {}
  double forward_loss(ParamAccess&, const int*, const int*, int) override { return 0; }
  const float* next_token_logits(ParamAccess&, const int*, int) override { return nullptr; }
  std::vector<GemmShape> train_gemms(int) const override { return {}; }
  size_t arena_bytes() const override { return 0; }

 private:
  int max_batch_, seq_len_;
  std::map<int, double> cost_;
  ParamLayout layout_;
  std::vector<ParamUnit> units_;
};

// Token t costs t nats, but 7 costs 1 (cheap) and 9 costs 100.
std::map<int, double> costs() {
  std::map<int, double> c;
  for (int t = 0; t < 20; ++t) c[t] = t;
  c[7] = 1;
  c[9] = 100;
  return c;
}

std::vector<ChoiceExample> examples() {
  std::vector<ChoiceExample> e(4);
  // Mean, not sum: four 7s (sum 4, mean 1) against one 2 (sum 2, mean 2): the 7s win.
  e[0] = {0, {3, 4}, {{7, 7, 7, 7}, {2}}};
  // Equal means: the first wins, so a label on the second is missed.
  e[1] = {1, {5}, {{3, 3}, {3}, {9}}};
  // The label among four, the context longer.
  e[2] = {2, {1, 2, 3, 4, 5}, {{9}, {4}, {7, 7}, {9, 9}}};
  // A wrong pick: the cheap one is not the label.
  e[3] = {3, {6}, {{7}, {8}, {8}, {8}}};
  return e;
}

TEST(ChoiceScoring, PicksTheLowestMeanLossTheFirstOfEqualsOnAnyRowsAPass) {
  const std::vector<ChoiceExample> e = examples();
  for (int rows : {1, 2, 3, 4, 13}) {
    ScriptedModel model(rows, 8, costs());
    FlatParamAccess none(model.units(), nullptr, nullptr);
    const ChoiceResult r = evaluate_choices(model, none, e, 0);
    EXPECT_EQ(r.examples, 4) << rows << " rows";
    EXPECT_EQ(r.correct, 2) << rows << " rows: examples 0 and 2";
    EXPECT_EQ(model.rows_seen_, 2 + 3 + 4 + 4) << rows << " rows";
    EXPECT_FALSE(model.misaligned_);
  }
  ScriptedModel model(4, 8, costs());
  FlatParamAccess none(model.units(), nullptr, nullptr);
  EXPECT_EQ(evaluate_choices(model, none, e, 1).examples, 1);  // --max-examples
}

TEST(ChoiceScoring, PassesHoldUpToMaxRowsAsLongAsTheirLongestRow) {
  const std::vector<ChoiceExample> e = examples();
  const std::vector<ChoicePass> passes = plan_choice_passes(e, {0, 2}, 3);
  ASSERT_EQ(passes.size(), 2u);  // 2 + 4 completions
  ASSERT_EQ(passes[0].rows.size(), 3u);
  EXPECT_EQ(passes[0].rows[2].example, 2u);  // the second example begins in the first pass
  EXPECT_EQ(passes[0].rows[2].completion, 0u);
  EXPECT_EQ(passes[0].len, 5);  // example 0: 2 + 4 - 1; example 2's first row: 5 + 1 - 1
  EXPECT_EQ(passes[1].len, 6);  // 5 + 2 - 1
  EXPECT_EQ(plan_choice_passes(e, {0, 2}, 3, 8)[1].len, 8);  // whole seq_len rows
  EXPECT_THROW(plan_choice_passes(e, {0}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace rm
