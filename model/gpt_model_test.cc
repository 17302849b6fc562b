// Model-level checks of the GPT: the wiring of kernels into a network (gradients against
// finite differences of the whole model), causality through next_token_logits, the backward
// readiness contract the communicator relies on, and that it can learn (overfit one batch).
#include "model/gpt_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "kernels/counter_rng.h"
#include "model/adamw_optimizer.h"
#include "model/finite_difference_test_util.h"

namespace rm {
namespace {

ModelConfig tiny_gpt() {
  ModelConfig c;
  c.type = ModelType::kGpt;
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
  model.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f);

  expect_gradients_match_finite_differences(
      model, p, g, [&] { return model.forward_loss(p.data(), in.data(), tg.data(), B); });
}

// The same check at the shapes where kernels switch paths: a sequence longer than the attention
// kernel's 64-row block, one head, as many heads as channels, a sequence of one token, recompute,
// and the classifier in chunks that do not divide the tokens.
TEST(GptModel, GradientsMatchFiniteDifferencesAtEdgeShapes) {
  struct Shape {
    const char* name;
    int seq_len, layers, heads, width, vocab, batch, chunk;
    bool recompute;
  };
  for (const Shape& s : {Shape{"seq 70, one head", 70, 1, 1, 8, 11, 1, 0, false},
                         Shape{"heads == width, chunk 4", 6, 2, 6, 6, 13, 1, 4, false},
                         Shape{"one token, chunk 2", 1, 2, 2, 8, 7, 3, 2, false},
                         Shape{"seq 70, recompute, chunk 7", 70, 2, 2, 16, 9, 1, 7, true}}) {
    SCOPED_TRACE(s.name);
    ModelConfig c = tiny_gpt();
    c.seq_len = s.seq_len;
    c.layers = s.layers;
    c.heads = s.heads;
    c.width = s.width;
    c.vocab_size = s.vocab;
    c.classifier_chunk_tokens = s.chunk;
    c.recompute = s.recompute;
    const int N = s.batch * c.seq_len;
    GptModel model(c, s.batch);
    std::vector<float> p(model.layout().size()), g(p.size(), 0.0f);
    model.init_params(p.data(), 5);
    for (float& x : p) x *= 3.0f;
    std::vector<int> in(N), tg(N);
    random_tokens(in, c.vocab_size, 3);
    random_tokens(tg, c.vocab_size, 4);
    model.forward_backward(p.data(), g.data(), in.data(), tg.data(), s.batch, 1.0f);
    expect_gradients_match_finite_differences(
        model, p, g, [&] { return model.forward_loss(p.data(), in.data(), tg.data(), s.batch); });
  }
}

// A slice of the initial weights is the same slice of the whole, wherever it begins and ends
// (inside a tensor, across several): a ZeRO-3 rank makes only its shard, a GPU's upload goes in
// pieces, and both must give the bits of the whole.
TEST(GptModel, AnySliceOfTheInitialWeightsIsThatSliceOfTheWhole) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 1);
  const size_t n = model.layout().size();
  std::vector<float> whole(n);
  model.init_params(whole.data(), 7);
  for (const auto& [begin, end] :
       std::vector<std::pair<size_t, size_t>>{{0, n},
                                              {0, 1},
                                              {n - 1, n},
                                              {3, n / 3},
                                              {n / 3, n / 3 + 1},
                                              {n / 3, 2 * n / 3 + 5},
                                              {model.layout().tensors()[1].offset, n},
                                              {n / 2, n / 2}}) {
    std::vector<float> slice(end - begin, -1.0f);
    model.init_params(slice.data(), begin, end, 7);
    for (size_t i = begin; i < end; ++i) {
      ASSERT_EQ(slice[i - begin], whole[i])
          << "element " << i << " of slice [" << begin << ", " << end << ")";
    }
  }
}

TEST(GptModel, GradientsAccumulateAcrossCalls) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 1);
  std::vector<float> p(model.layout().size()), g1(p.size(), 0.0f), g2(p.size(), 0.0f);
  model.init_params(p.data(), 1);
  std::vector<int> in(c.seq_len), tg(c.seq_len);
  random_tokens(in, c.vocab_size, 5);
  random_tokens(tg, c.vocab_size, 6);
  model.forward_backward(p.data(), g1.data(), in.data(), tg.data(), 1, 1.0f);
  model.forward_backward(p.data(), g2.data(), in.data(), tg.data(), 1, 1.0f);
  model.forward_backward(p.data(), g2.data(), in.data(), tg.data(), 1, 1.0f);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_NEAR(g2[i], 2 * g1[i], 1e-5 + 1e-5 * std::abs(g1[i]));
}

// Records the ParamAccess calls a model makes, over whole buffers.
class RecordingAccess final : public ParamAccess {
 public:
  RecordingAccess(const Model& m, const float* p, float* g) : m_(m), flat_(m.units(), p, g) {}
  const void* acquire_params(int u) override {
    EXPECT_EQ(params_held_.count(u), 0u) << "unit " << u << " acquired twice";
    params_held_.insert(u);
    return flat_.acquire_params(u);
  }
  void release_params(int u) override { EXPECT_EQ(params_held_.erase(u), 1u) << u; }
  float* acquire_grads(int u) override {
    EXPECT_EQ(grads_held_.count(u), 0u) << "unit " << u << " acquired twice";
    grads_held_.insert(u);
    return flat_.acquire_grads(u);
  }
  void release_grads(int u) override {
    EXPECT_EQ(grads_held_.erase(u), 1u) << u;
    released_.push_back(u);
  }
  std::set<int> params_held_, grads_held_;
  std::vector<int> released_;

 private:
  const Model& m_;
  FlatParamAccess flat_;
};

TEST(GptModel, UnitsTileTheLayoutAndBackwardReleasesThemLastToFirst) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 1);
  size_t end = 0;
  for (const ParamUnit& u : model.units()) {
    EXPECT_EQ(u.begin, end);
    end = u.end;
  }
  EXPECT_EQ(end, model.layout().size());
  EXPECT_EQ(model.units().size(), static_cast<size_t>(c.layers + 2));

  // (Two statements: GCC 12 warns falsely on `vector p(n), g(p.size())` after the loop above.)
  const size_t n = model.layout().size();
  std::vector<float> p(n);
  std::vector<float> g(n, 0.0f);
  model.init_params(p.data(), 1);
  std::vector<int> in(c.seq_len, 1), tg(c.seq_len, 2);
  RecordingAccess access(model, p.data(), g.data());
  model.forward_backward(access, in.data(), tg.data(), 1, 1.0f);
  EXPECT_TRUE(access.params_held_.empty());
  EXPECT_TRUE(access.grads_held_.empty());
  std::vector<int> expected;
  for (int u = c.layers + 1; u >= 0; --u) expected.push_back(u);
  EXPECT_EQ(access.released_, expected);
  model.forward_loss(access, in.data(), tg.data(), 1);
  model.next_token_logits(access, in.data(), 3);
  EXPECT_TRUE(access.params_held_.empty()) << "inference releases what it acquires";
}

// model.recompute: the same loss and gradients, bit for bit, from a smaller arena, acquiring
// and releasing the units in the same order (ZeRO-3's prefetch records that order). Three
// blocks (recomputed, recomputed, kept), a batch below the planned one, and two accumulated
// calls.
TEST(GptModel, RecomputeGivesTheSameBitsFromLessMemory) {
  ModelConfig c = tiny_gpt();
  c.layers = 3;
  ModelConfig r = c;
  r.recompute = true;
  GptModel keep(c, 3), again(r, 3);
  ASSERT_EQ(keep.layout().size(), again.layout().size());
  EXPECT_LT(again.arena_bytes(), keep.arena_bytes());
  EXPECT_EQ(GptModel<float>::footprint(r, 3).arena_bytes, static_cast<double>(again.arena_bytes()));
  const size_t n = keep.layout().size();
  std::vector<float> p(n);
  std::vector<float> g_keep(n, 0.0f), g_again(n, 0.0f);
  keep.init_params(p.data(), 4);
  for (float& x : p) x *= 3.0f;
  std::vector<int> in(2 * c.seq_len), tg(2 * c.seq_len);
  RecordingAccess a_keep(keep, p.data(), g_keep.data()), a_again(again, p.data(), g_again.data());
  for (uint64_t call = 0; call < 2; ++call) {
    random_tokens(in, c.vocab_size, 10 + call);
    random_tokens(tg, c.vocab_size, 20 + call);
    const double l_keep = keep.forward_backward(a_keep, in.data(), tg.data(), 2, 0.5f);
    const double l_again = again.forward_backward(a_again, in.data(), tg.data(), 2, 0.5f);
    EXPECT_EQ(l_keep, l_again) << "call " << call;
  }
  EXPECT_EQ(g_keep, g_again);
  EXPECT_EQ(a_keep.released_, a_again.released_);
  EXPECT_TRUE(a_again.params_held_.empty());
  EXPECT_NE(std::count(g_again.begin(), g_again.end(), 0.0f), static_cast<long>(n));
}

// model.dropout: the backward is the forward's with its masks (finite differences of the training
// loss under one key: a backward that drew other masks, or none, would not match). The loss is a
// fixed function of the parameters for a fixed key, so the check is the whole model's.
TEST(GptModel, DropoutGradientsMatchFiniteDifferencesOfTheTrainingLoss) {
  ModelConfig c = tiny_gpt();
  c.dropout = 0.2;
  const int B = 2, N = B * c.seq_len;
  GptModel model(c, B);
  std::vector<float> p(model.layout().size()), g(p.size(), 0.0f), scratch(p.size());
  model.init_params(p.data(), 3);
  for (float& x : p) x *= 3.0f;
  std::vector<int> in(N), tg(N);
  random_tokens(in, c.vocab_size, 1);
  random_tokens(tg, c.vocab_size, 2);
  const MicroBatchKey key{11, 40};
  model.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f, key);
  expect_gradients_match_finite_differences(model, p, g, [&] {
    return model.forward_backward(p.data(), scratch.data(), in.data(), tg.data(), B, 1.0f, key);
  });
}

// Dropout acts in training only, draws by key (the same key the same loss, another key another),
// and leaves evaluation and sampling to the bit as a model without it.
TEST(GptModel, DropoutChangesTrainingByItsKeyAndNeverEvaluation) {
  ModelConfig c = tiny_gpt();
  ModelConfig d = c;
  d.dropout = 0.3;
  const int B = 2, N = B * c.seq_len;
  GptModel plain(c, B), dropped(d, B);
  std::vector<float> p(plain.layout().size()), g(p.size(), 0.0f);
  plain.init_params(p.data(), 5);
  std::vector<int> in(N), tg(N);
  random_tokens(in, c.vocab_size, 3);
  random_tokens(tg, c.vocab_size, 4);
  const double base = plain.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f);
  const double a =
      dropped.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f, {1, 0});
  const double a2 =
      dropped.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f, {1, 0});
  const double b =
      dropped.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f, {1, 2});
  const double s =
      dropped.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f, {2, 0});
  EXPECT_EQ(a, a2);
  EXPECT_NE(a, base);
  EXPECT_NE(a, b);
  EXPECT_NE(a, s);
  EXPECT_EQ(plain.forward_loss(p.data(), in.data(), tg.data(), B),
            dropped.forward_loss(p.data(), in.data(), tg.data(), B));
  const float* lp = plain.next_token_logits(p.data(), in.data(), c.seq_len);
  const std::vector<float> want(lp, lp + c.vocab_size);
  const float* ld = dropped.next_token_logits(p.data(), in.data(), c.seq_len);
  EXPECT_EQ(want, std::vector<float>(ld, ld + c.vocab_size));
}

// A sequence draws by its global sample index, not by its place in a call: one call over
// samples 10 and 11 gives what two calls of one sequence each give (the loss and every gradient,
// up to the order of the two sequences' sums), which is what makes a run's masks the same on any
// number of ranks and micro-batches. Recomputation draws them again to the bit.
TEST(GptModel, DropoutDrawsBySampleIndexAndAgainWhenRecomputing) {
  ModelConfig c = tiny_gpt();
  c.dropout = 0.25;
  ModelConfig r = c;
  r.recompute = true;
  const int N = 2 * c.seq_len;
  GptModel model(c, 2), again(r, 2);
  const size_t n = model.layout().size();
  std::vector<float> p(n), whole(n, 0.0f), split(n, 0.0f), recomputed(n, 0.0f);
  model.init_params(p.data(), 6);
  for (float& x : p) x *= 3.0f;
  std::vector<int> in(N), tg(N);
  random_tokens(in, c.vocab_size, 7);
  random_tokens(tg, c.vocab_size, 8);
  const double l_whole =
      model.forward_backward(p.data(), whole.data(), in.data(), tg.data(), 2, 1.0f, {9, 10});
  const double l_split =
      model.forward_backward(p.data(), split.data(), in.data(), tg.data(), 1, 1.0f, {9, 10}) +
      model.forward_backward(p.data(), split.data(), in.data() + c.seq_len, tg.data() + c.seq_len,
                             1, 1.0f, {9, 11});
  EXPECT_NEAR(l_whole, l_split, 1e-5 * std::abs(l_whole));
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(whole[i], split[i], 1e-5f + 1e-4f * std::abs(whole[i])) << i;
  const double l_again =
      again.forward_backward(p.data(), recomputed.data(), in.data(), tg.data(), 2, 1.0f, {9, 10});
  EXPECT_EQ(l_whole, l_again);
  EXPECT_EQ(whole, recomputed);
}

// model.classifier_chunk_tokens: the same loss, gradients, evaluation loss and sampling
// logits as the whole-batch classifier, up to the order of the chunks' sums, from logits of a
// chunk of rows; a chunk of at least the batch is the whole classifier, to the bit. 5-row
// chunks of 3 x 8 rows leave a last chunk of 4; a batch of 1 (8 rows) is below the planned 3.
TEST(GptModel, ClassifierInChunksGivesTheSameResultsFromSmallerLogits) {
  ModelConfig c = tiny_gpt();
  c.vocab_size = 300;  // the logits are the arena's largest array, as at GPT-2's vocabulary
  ModelConfig chunked = c, huge_chunk = c;
  chunked.classifier_chunk_tokens = 5;
  huge_chunk.classifier_chunk_tokens = 1000;
  const int max_batch = 3;
  EXPECT_EQ(gpt_classifier_rows(c, max_batch), 24u);
  EXPECT_EQ(gpt_classifier_rows(chunked, max_batch), 5u);
  EXPECT_EQ(gpt_classifier_rows(huge_chunk, max_batch), 24u);
  GptModel whole(c, max_batch), part(chunked, max_batch), same(huge_chunk, max_batch);
  // The logits shrink from 24 rows of V to 5 (floats; the arena pads each array a little).
  EXPECT_GE(whole.arena_bytes() - part.arena_bytes(), (24u - 5u) * 300u * sizeof(float) - 512);
  EXPECT_EQ(GptModel<float>::footprint(chunked, max_batch).arena_bytes,
            static_cast<double>(part.arena_bytes()));
  EXPECT_EQ(same.arena_bytes(), whole.arena_bytes());

  const size_t n = whole.layout().size();
  std::vector<float> p(n);
  whole.init_params(p.data(), 8);
  for (float& x : p) x *= 3.0f;
  std::vector<float> g_whole(n, 0.0f), g_part(n, 0.0f), g_same(n, 0.0f);
  RecordingAccess a_whole(whole, p.data(), g_whole.data()), a_part(part, p.data(), g_part.data()),
      a_same(same, p.data(), g_same.data());
  for (const int B : {3, 1}) {
    std::vector<int> in(B * c.seq_len), tg(B * c.seq_len);
    random_tokens(in, c.vocab_size, 30 + B);
    random_tokens(tg, c.vocab_size, 40 + B);
    const double l_whole = whole.forward_backward(a_whole, in.data(), tg.data(), B, 0.25f);
    const double l_part = part.forward_backward(a_part, in.data(), tg.data(), B, 0.25f);
    const double l_same = same.forward_backward(a_same, in.data(), tg.data(), B, 0.25f);
    EXPECT_NEAR(l_part, l_whole, 1e-6 * std::abs(l_whole)) << "B " << B;
    EXPECT_EQ(l_same, l_whole) << "B " << B;
    const double e_whole = whole.forward_loss(a_whole, in.data(), tg.data(), B);
    const double e_part = part.forward_loss(a_part, in.data(), tg.data(), B);
    EXPECT_NEAR(e_part, e_whole, 1e-6 * std::abs(e_whole)) << "B " << B;
    EXPECT_EQ(same.forward_loss(a_same, in.data(), tg.data(), B), e_whole) << "B " << B;
  }
  EXPECT_EQ(g_same, g_whole);
  float largest = 0, worst = 0;
  for (size_t i = 0; i < n; ++i) {
    largest = std::max(largest, std::abs(g_whole[i]));
    worst = std::max(worst, std::abs(g_part[i] - g_whole[i]));
  }
  EXPECT_GT(largest, 0.0f);
  EXPECT_LE(worst, 1e-5f * largest);
  EXPECT_EQ(a_part.released_, a_whole.released_);
  EXPECT_TRUE(a_part.params_held_.empty());

  // Sampling: a context longer than the chunk (8 > 5) reads only its last position's logits.
  std::vector<int> ctx(c.seq_len);
  random_tokens(ctx, c.vocab_size, 50);
  for (const int len : {8, 3}) {
    std::vector<float> expected(c.vocab_size);
    const float* w = whole.next_token_logits(p.data(), ctx.data(), len);
    std::copy(w, w + c.vocab_size, expected.begin());
    const float* got = part.next_token_logits(p.data(), ctx.data(), len);
    for (int v = 0; v < c.vocab_size; ++v) {
      EXPECT_NEAR(got[v], expected[v], 1e-5f + 1e-5f * std::abs(expected[v])) << len << " " << v;
    }
  }
}

TEST(GptModel, NextTokenLogitsAreCausalAndMatchTheFullForward) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 1);
  std::vector<float> p(model.layout().size());
  model.init_params(p.data(), 11);
  std::vector<int> ctx(c.seq_len);
  random_tokens(ctx, c.vocab_size, 9);
  std::vector<float> prefix(c.vocab_size);
  const float* logits3 = model.next_token_logits(p.data(), ctx.data(), 3);
  std::copy(logits3, logits3 + c.vocab_size, prefix.begin());
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

// span_losses (multiple-choice scoring) against next_token_logits, another path through the
// model: each position's loss is -log softmax of the logits that follow the row's prefix up to
// it. Rows shorter than seq_len, spans anywhere in them, a chunked classifier, and what a row
// holds after a span's end ignored (causal).
TEST(GptModel, SpanLossesAreTheNextTokenLossesOfTheirPositions) {
  for (int chunk : {0, 3}) {
    ModelConfig c = tiny_gpt();
    c.classifier_chunk_tokens = chunk;
    const int B = 3, len = 6;
    GptModel model(c, B);
    std::vector<float> p(model.layout().size());
    model.init_params(p.data(), 12);
    std::vector<int> in(B * len), tg(B * len);
    random_tokens(in, c.vocab_size, 31);
    random_tokens(tg, c.vocab_size, 32);
    const std::vector<TokenSpan> spans = {{0, 0, 6}, {1, 2, 3}, {2, 5, 1}, {2, 0, 0}, {1, 3, 1}};
    const std::vector<double> got =
        model.span_losses(p.data(), in.data(), tg.data(), B, len, spans);
    ASSERT_EQ(got.size(), spans.size());
    for (size_t s = 0; s < spans.size(); ++s) {
      double want = 0;
      for (int t = spans[s].first; t < spans[s].first + spans[s].count; ++t) {
        const int* row = in.data() + spans[s].row * len;
        const float* logits = model.next_token_logits(p.data(), row, t + 1);
        double sum = 0, top = *std::max_element(logits, logits + c.vocab_size);
        for (int v = 0; v < c.vocab_size; ++v) sum += std::exp(logits[v] - top);
        want += top + std::log(sum) - logits[tg[spans[s].row * len + t]];
      }
      EXPECT_NEAR(got[s], want, 1e-4 * (1 + want)) << "span " << s << ", chunk " << chunk;
    }
    // Row 1 past its spans' end (position 5) and the other rows' targets changed: no loss moves.
    std::vector<int> in2 = in, tg2 = tg;
    in2[1 * len + 5] = (in2[1 * len + 5] + 1) % c.vocab_size;
    tg2[0 * len + 0] = c.vocab_size - 1 - tg2[0];  // a target of span 0: it must move
    const std::vector<double> again =
        model.span_losses(p.data(), in2.data(), tg2.data(), B, len, spans);
    EXPECT_NE(again[0], got[0]);
    for (size_t s = 1; s < spans.size(); ++s) EXPECT_EQ(again[s], got[s]) << "span " << s;
  }
}

TEST(GptModel, SpanLossesRefuseSpansOutsideTheRows) {
  const ModelConfig c = tiny_gpt();
  GptModel model(c, 2);
  std::vector<float> p(model.layout().size());
  model.init_params(p.data(), 1);
  std::vector<int> t(2 * 4, 1);
  for (const TokenSpan& bad : {TokenSpan{2, 0, 1}, TokenSpan{0, 3, 2}, TokenSpan{0, -1, 1}}) {
    EXPECT_THROW(model.span_losses(p.data(), t.data(), t.data(), 2, 4, {bad}),
                 std::invalid_argument);
  }
  EXPECT_THROW(model.span_losses(p.data(), t.data(), t.data(), 2, c.seq_len + 1, {}),
               std::invalid_argument);
  std::vector<int> three(3 * 4, 1);
  EXPECT_THROW(model.span_losses(p.data(), three.data(), three.data(), 3, 4, {}),
               std::invalid_argument);  // more rows than the model holds
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
  AdamWOptimizer opt(oc, model.layout(), model.compute());
  double loss = 0;
  for (int step = 0; step < 300; ++step) {
    std::fill(g.begin(), g.end(), 0.0f);
    loss = model.forward_backward(p.data(), g.data(), in.data(), tg.data(), B, 1.0f / N) / N;
    StepScalars guard;  // host memory is the cpu backend's
    guard.grad_sq = model.compute().sum_squares(g.data(), g.size());
    opt.queue_step(p.data(), g.data(), 3e-3, &guard);
    ASSERT_TRUE(opt.finish_step(guard));
  }
  EXPECT_LT(loss, 0.1) << "random targets memorised by a 2-layer GPT";
}

}  // namespace
}  // namespace rm
