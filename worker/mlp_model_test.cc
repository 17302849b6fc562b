// The MLP through the real trainer: a synthetic text whose next byte is determined by the
// previous mlp_context bytes must be learned to near-zero loss.
#include "model/mlp_model.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "collectives/self_communicator.h"
#include "kernels/counter_rng.h"
#include "model/finite_difference_test_util.h"
#include "testing/temp_dir.h"
#include "worker/trainer.h"

namespace rm {
namespace {

// A slice of the initial weights is the same slice of the whole (a ZeRO-3 rank makes only its
// shard; a GPU's upload goes in pieces), as for the GPT (model/gpt_model_test.cc).
TEST(MlpModel, AnySliceOfTheInitialWeightsIsThatSliceOfTheWhole) {
  ModelConfig c;
  c.type = ModelType::kMlp;
  c.vocab_size = 17;
  c.seq_len = 8;
  c.mlp_context = 4;
  c.mlp_embed = 6;
  c.width = 16;
  c.layers = 2;
  MlpModel<float> model(c, 1);
  const size_t n = model.layout().size();
  std::vector<float> whole(n);
  model.init_params(whole.data(), 11);
  for (const auto& [begin, end] : std::vector<std::pair<size_t, size_t>>{
           {0, n}, {1, 2}, {n - 3, n}, {5, n / 2}, {n / 2, n}, {n / 3, 2 * n / 3}}) {
    std::vector<float> slice(end - begin, -1.0f);
    model.init_params(slice.data(), begin, end, 11);
    for (size_t i = begin; i < end; ++i) {
      ASSERT_EQ(slice[i - begin], whole[i])
          << "element " << i << " of [" << begin << ", " << end << ")";
    }
  }
}

// The MLP's gradients against finite differences of its loss (as the GPT's,
// model/gpt_model_test.cc): one and two hidden layers, a context longer than the sequence (its
// first tokens see padding), a sequence of one token.
TEST(MlpModel, GradientsMatchFiniteDifferences) {
  struct Shape {
    int seq_len, context, layers, batch;
  };
  for (const Shape& s : {Shape{5, 3, 1, 2}, Shape{4, 8, 2, 1}, Shape{1, 4, 2, 3}}) {
    SCOPED_TRACE("seq_len " + std::to_string(s.seq_len) + ", context " + std::to_string(s.context) +
                 ", layers " + std::to_string(s.layers));
    ModelConfig c;
    c.type = ModelType::kMlp;
    c.vocab_size = 13;
    c.seq_len = s.seq_len;
    c.mlp_context = s.context;
    c.mlp_embed = 5;
    c.width = 12;
    c.layers = s.layers;
    MlpModel<float> model(c, s.batch);
    std::vector<float> p(model.layout().size()), g(p.size(), 0.0f);
    model.init_params(p.data(), 9);
    for (float& x : p) x *= 3.0f;  // every path carries a visible gradient
    const size_t n = static_cast<size_t>(s.batch) * c.seq_len;
    std::vector<int> in(n), tg(n);
    for (size_t i = 0; i < n; ++i) {
      in[i] = static_cast<int>(rng_u64(3, RngPurpose::kSample, 1, i) % c.vocab_size);
      tg[i] = static_cast<int>(rng_u64(3, RngPurpose::kSample, 2, i) % c.vocab_size);
    }
    model.forward_backward(p.data(), g.data(), in.data(), tg.data(), s.batch, 1.0f);
    expect_gradients_match_finite_differences(
        model, p, g, [&] { return model.forward_loss(p.data(), in.data(), tg.data(), s.batch); });
  }
}

TEST(MlpModel, LearnsADeterministicSequenceToNearZeroLoss) {
  // A motif of 64 distinct bytes in a random order, repeated: every next byte is determined
  // by the byte before it, so even the first position of a sequence (which sees only itself
  // and zero-padding) can be predicted exactly, and the loss can go to zero.
  std::string motif;
  for (int i = 0; i < 64; ++i) motif.push_back(static_cast<char>(' ' + i));
  for (int i = 63; i > 0; --i) {
    std::swap(motif[i], motif[rng_u64(5, RngPurpose::kSample, i, 0) % (i + 1)]);
  }
  std::string text;
  while (text.size() < 20000) text += motif;
  TempDir dir;
  const std::string path = dir.write("motif.txt", text);

  JobConfig job;
  job.model.type = ModelType::kMlp;
  job.model.seq_len = 32;
  job.model.mlp_context = 8;
  job.model.mlp_embed = 8;
  job.model.width = 64;
  job.model.layers = 1;
  job.data.train = {path};
  job.data.val_fraction = 0.1;
  job.train.steps = 300;
  job.train.global_batch = 32;
  job.train.micro_batch = 16;
  job.train.eval_every = 0;
  job.optimizer.lr = 1e-2;
  job.optimizer.min_lr = 1e-3;
  job.optimizer.warmup_steps = 10;
  job.optimizer.weight_decay = 0;
  job.train.eval_batches = 4;

  TrainingData data = open_training_data(job);
  auto comm = make_self_communicator();
  Trainer trainer(job, data, *comm, {false, nullptr});
  const double before = trainer.evaluate();
  trainer.run();
  const double after = trainer.evaluate();
  EXPECT_GT(before, 2.5);
  EXPECT_LT(after, 0.05) << "validation loss on held-out motif text";
}

}  // namespace
}  // namespace rm
