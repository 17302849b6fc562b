// Model-level checks of the GPT: the wiring of kernels into a network (gradients against
// finite differences of the whole model), causality through next_token_logits, the backward
// readiness contract the communicator relies on, and that it can learn (overfit one batch).
#include "worker/gpt_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "worker/adamw_optimizer.h"
#include "worker/data/counter_rng.h"

namespace rm {
namespace {

ModelConfig tiny_gpt() {
  ModelConfig c;
  c.type = "gpt";
  c.vocab_size = 17;
  c.seq_len = 8;
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  return c;
}

void random_tokens(std::vector<int>& t, int vocab, uint64_t salt) {
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<int>(rng_u64(7, RngPurpose::kSample, salt, i) % vocab);
  }
}

TEST(GptModel, GradientsMatchFiniteDifferencesOfTheWholeModel) {
  const ModelConfig c = tiny_gpt();
  const int B = 2, N = B * c.seq_len;
  GptModel model(c, B);
  std::vector<float> p(model.layout().size()), g(p.size(), 0.0f);
  model.init_params(p.data(), 3);
  // Larger weights than GPT-2's init (x3) so that every path carries a visible gradient.
  for (float& x : p) x *= 3.0f;
  std::vector<int> in(N), tg(N);
  random_tokens(in, c.vocab_size, 1);
  random_tokens(tg, c.vocab_size, 2);
  model.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f, nullptr);

  // Check the two largest-gradient entries of every tensor (wte gets both the LM head and
  // the embedding contributions, so the tying is checked too).
  int checked = 0;
  for (const TensorSpec& t : model.layout().tensors()) {
    std::vector<size_t> idx(t.numel);
    std::iota(idx.begin(), idx.end(), t.offset);
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(),
                      [&](size_t a, size_t b) { return std::abs(g[a]) > std::abs(g[b]); });
    for (int k = 0; k < 2; ++k) {
      const size_t i = idx[k];
      const float saved = p[i], h = 4e-3f;
      p[i] = saved + h;
      const double up = model.forward_loss(p.data(), in.data(), tg.data(), B);
      p[i] = saved - h;
      const double down = model.forward_loss(p.data(), in.data(), tg.data(), B);
      p[i] = saved;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(g[i], numeric, 0.03 * std::abs(numeric) + 2e-3) << t.name << " [" << i - t.offset << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(model.layout().tensors().size()));
}

TEST(GptModel, GradientsAccumulateAcrossCalls) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 1);
  std::vector<float> p(model.layout().size()), g1(p.size(), 0.0f), g2(p.size(), 0.0f);
  model.init_params(p.data(), 1);
  std::vector<int> in(c.seq_len), tg(c.seq_len);
  random_tokens(in, c.vocab_size, 5);
  random_tokens(tg, c.vocab_size, 6);
  model.forward_backward(p.data(), g1.data(), in.data(), tg.data(), 1, 1.0f, nullptr);
  model.forward_backward(p.data(), g2.data(), in.data(), tg.data(), 1, 1.0f, nullptr);
  model.forward_backward(p.data(), g2.data(), in.data(), tg.data(), 1, 1.0f, nullptr);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_NEAR(g2[i], 2 * g1[i], 1e-5 + 1e-5 * std::abs(g1[i]));
}

TEST(GptModel, ReadyRangesCoverTheBufferFromTheEndDown) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 1);
  std::vector<float> p(model.layout().size()), g(p.size(), 0.0f);
  model.init_params(p.data(), 1);
  std::vector<int> in(c.seq_len, 1), tg(c.seq_len, 2);
  std::vector<std::pair<size_t, size_t>> ranges;
  model.forward_backward(p.data(), g.data(), in.data(), tg.data(), 1, 1.0f,
                         [&](size_t b, size_t e) { ranges.emplace_back(b, e); });
  ASSERT_FALSE(ranges.empty());
  size_t expected_end = p.size();
  for (auto [b, e] : ranges) {
    EXPECT_EQ(e, expected_end);
    EXPECT_LT(b, e);
    expected_end = b;
  }
  EXPECT_EQ(expected_end, 0u);
  EXPECT_EQ(ranges.size(), static_cast<size_t>(c.layers + 2));
}

TEST(GptModel, NextTokenLogitsAreCausalAndMatchTheFullForward) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 1);
  std::vector<float> p(model.layout().size());
  model.init_params(p.data(), 11);
  std::vector<int> ctx(c.seq_len);
  random_tokens(ctx, c.vocab_size, 9);
  const std::vector<float> prefix(model.next_token_logits(p.data(), ctx.data(), 3),
                                  model.next_token_logits(p.data(), ctx.data(), 3) + c.vocab_size);
  // Changing tokens after position 3 must not change the prediction made from the first 3.
  std::vector<int> changed = ctx;
  for (int t = 3; t < c.seq_len; ++t) changed[t] = (changed[t] + 1) % c.vocab_size;
  const float* again = model.next_token_logits(p.data(), changed.data(), 3);
  for (int v = 0; v < c.vocab_size; ++v) EXPECT_FLOAT_EQ(prefix[v], again[v]);
  // A longer context does change it.
  const float* longer = model.next_token_logits(p.data(), ctx.data(), 4);
  double diff = 0;
  for (int v = 0; v < c.vocab_size; ++v) diff += std::abs(prefix[v] - longer[v]);
  EXPECT_GT(diff, 1e-6);
}

TEST(GptModel, OverfitsOneBatch) {
  ModelConfig c = tiny_gpt();
  c.seq_len = 16;
  c.width = 32;
  c.heads = 4;
  const int B = 4, N = B * c.seq_len;
  GptModel model(c, B);
  std::vector<float> p(model.layout().size()), g(p.size());
  model.init_params(p.data(), 1);
  std::vector<int> in(N), tg(N);
  random_tokens(in, c.vocab_size, 21);
  random_tokens(tg, c.vocab_size, 22);
  OptimizerConfig oc;
  oc.weight_decay = 0;
  AdamWOptimizer opt(oc, model.layout());
  double loss = 0;
  for (int step = 0; step < 300; ++step) {
    std::fill(g.begin(), g.end(), 0.0f);
    loss = model.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f / N, nullptr) / N;
    opt.step(p.data(), g.data(), 3e-3, AdamWOptimizer::grad_norm(g.data(), g.size()));
  }
  EXPECT_LT(loss, 0.1) << "random targets memorised by a 2-layer GPT";
}

}  // namespace
}  // namespace rm
