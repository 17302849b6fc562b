// estimate_memory (planning/memory_estimate.h): the arithmetic, and agreement with the live
// objects it describes -- the models' layout and arena, and ShardedState's buffers and scratch
// pool after real steps. (Against measured peak RSS: tests/memory_fit_cli_test.cc.)
#include "planning/memory_estimate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "collectives/self_communicator.h"
#include "kernels/cuda/classifier_plan.h"
#include "kernels/cuda/flash_attention_plan.h"
#include "model/gpt_model.h"
#include "model/model.h"
#include "worker/memory_checkpoints.h"
#include "worker/sharded_state.h"

namespace rm {
namespace {

JobConfig gpt_job(int layers = 3) {
  JobConfig job;
  job.model.type = ModelType::kGpt;
  job.model.vocab_size = 40;
  job.model.seq_len = 12;
  job.model.layers = layers;
  job.model.heads = 2;
  job.model.width = 24;
  job.train.micro_batch = 3;
  job.train.global_batch = 12;
  return job;
}

JobConfig mlp_job(int layers = 3) {
  JobConfig job;
  job.model.type = ModelType::kMlp;
  job.model.vocab_size = 40;
  job.model.seq_len = 12;
  job.model.layers = layers;
  job.model.width = 20;
  job.model.mlp_embed = 6;
  job.model.mlp_context = 4;
  job.train.micro_batch = 3;
  job.train.global_batch = 12;
  return job;
}

MemoryEstimate estimate(JobConfig job, const std::string& shard, int ranks,
                        const std::string& precision = "fp32") {
  job.parallel.shard = choice_of<ShardMode>(shard);
  job.parallel.precision = choice_of<Precision>(precision);
  return estimate_memory(job, ranks, ComputeKind::kCpu);
}

// The footprint is the live model's: the same layout size, unit sizes and arena bytes, for
// either model, either precision, one layer or many (footprint() extrapolates from two).
TEST(MemoryEstimate, FootprintIsTheLiveModels) {
  for (const JobConfig& base : {gpt_job(), mlp_job()}) {
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      for (const int layers : {1, 2, 5}) {
        JobConfig job = base;
        job.model.layers = layers;
        SCOPED_TRACE(choice_name(job.model.type) + std::string(" layers ") +
                     std::to_string(layers) + " " + choice_name(precision));
        const ModelFootprint f = model_footprint(job.model, 3, precision);
        const std::unique_ptr<Model> model = make_model(job.model, 3, nullptr, precision);
        EXPECT_EQ(f.param_floats, static_cast<double>(model->layout().size()));
        EXPECT_EQ(f.arena_bytes, static_cast<double>(model->arena_bytes()));
        const std::vector<ParamUnit>& units = model->units();
        ASSERT_EQ(units.size(), static_cast<size_t>(layers) + 2);
        EXPECT_EQ(f.units[0], static_cast<double>(units.front().size()));
        EXPECT_EQ(f.units[1], static_cast<double>(units[1].size()));
        for (int l = 2; l <= layers; ++l)
          EXPECT_EQ(f.units[2], static_cast<double>(units[l].size()));
        EXPECT_EQ(f.units[3], static_cast<double>(units.back().size()));
      }
    }
  }
}

// What each shard mode divides by the rank count, as sharded_state.h's table says.
TEST(MemoryEstimate, ShardModesDivideWhatTheyShardByTheRanks) {
  const JobConfig job = gpt_job();
  const double P = model_footprint(job.model, job.train.micro_batch, Precision::kFp32).param_floats;
  for (const int ranks : {1, 2, 3, 4}) {
    SCOPED_TRACE(ranks);
    const double shard = std::ceil(P / ranks) * 4, whole = P * 4;
    const MemoryEstimate none = estimate(job, "none", ranks);
    const MemoryEstimate zero1 = estimate(job, "optimizer", ranks);
    const MemoryEstimate zero2 = estimate(job, "gradients", ranks);
    const MemoryEstimate zero3 = estimate(job, "full", ranks);
    EXPECT_EQ(none.parameters, whole);
    EXPECT_EQ(none.gradients, whole);
    EXPECT_EQ(none.optimizer, 2 * whole);
    EXPECT_EQ(zero1.parameters, whole);
    EXPECT_EQ(zero1.gradients, whole);
    EXPECT_EQ(zero1.optimizer, 2 * shard);
    EXPECT_EQ(zero2.parameters, whole);
    EXPECT_EQ(zero2.gradients, shard);
    EXPECT_EQ(zero2.optimizer, 2 * shard);
    EXPECT_EQ(zero3.parameters, shard);
    EXPECT_EQ(zero3.gradients, shard);
    EXPECT_EQ(zero3.optimizer, 2 * shard);
    // The checkpoint stages this rank's slice of params, m and v in every mode.
    for (const MemoryEstimate* m : {&none, &zero1, &zero2, &zero3}) {
      EXPECT_EQ(m->checkpoint, 3 * shard);
      EXPECT_EQ(m->activations, none.activations) << "activations are never sharded";
    }
    // Only ZeRO-2/3 keep unit scratch; none and optimizer reduce in place.
    EXPECT_EQ(none.buffers, 0);
    EXPECT_EQ(zero1.buffers, 0);
    EXPECT_GT(zero2.buffers, 0);
    EXPECT_GT(zero3.buffers, zero2.buffers) << "ZeRO-3 also gathers parameters";
  }
}

TEST(MemoryEstimate, Bf16AddsTheComputeCopyOfTheParameters) {
  for (const char* mode : {"none", "full"}) {
    const MemoryEstimate fp32 = estimate(gpt_job(), mode, 2);
    const MemoryEstimate bf16 = estimate(gpt_job(), mode, 2, "bf16");
    EXPECT_EQ(bf16.parameters, fp32.parameters * 1.5) << mode;  // 4 + 2 bytes per parameter
    EXPECT_EQ(bf16.gradients, fp32.gradients) << "gradients stay fp32";
    EXPECT_EQ(bf16.optimizer, fp32.optimizer);
  }
}

TEST(MemoryEstimate, ActivationsGrowWithTheMicroBatchAndNothingElseDoes) {
  JobConfig job = gpt_job();
  job.train.global_batch = 16;
  auto at = [&](int micro_batch) {
    job.train.micro_batch = micro_batch;
    return estimate(job, "none", 2);
  };
  const MemoryEstimate m2 = at(2), m4 = at(4), m8 = at(8);
  // Affine in the micro-batch: 4 more sequences cost twice what 2 more did (to the 256-byte
  // padding of each array).
  EXPECT_NEAR((m8.activations - m4.activations) / (m4.activations - m2.activations), 2.0, 0.05);
  EXPECT_GT(m2.activations, 0);
  for (const MemoryEstimate* m : {&m4, &m8}) {
    EXPECT_EQ(m->parameters, m2.parameters);
    EXPECT_EQ(m->gradients, m2.gradients);
    EXPECT_EQ(m->optimizer, m2.optimizer);
    EXPECT_EQ(m->checkpoint, m2.checkpoint);
  }
}

// The cuda backend's bf16 flash attention (head sizes multiples of 16) keeps per-row statistics
// instead of [B,H,T,T]: the estimate plans the model with the backend's own buffer sizes
// (CudaLayers::attention_buffers), and drops the materialised path's score scratch.
TEST(MemoryEstimate, CudaBf16FlashAttentionKeepsNoSquareArrays) {
  JobConfig job = gpt_job();
  job.model.width = 32;  // 2 heads of 16
  job.model.seq_len = 64;
  job.parallel.precision = Precision::kBf16;
  const int mb = job.train.micro_batch, T = job.model.seq_len, H = job.model.heads;
  const double rows = static_cast<double>(mb) * T, token_ids = 2 * rows * 4;
  // The cuda backend's grow-only scratch: per-row losses, column-sum partials, the token sort.
  auto scratch = [&](const JobConfig& j) {
    return rows * 8 + std::ceil(rows / 256) * 4 * j.model.width * 4 + 4 * rows * 4;
  };
  // The padded classifier's scratch (classifier_plan.h): logits [N, Vp] and wte [Vp, C].
  auto classifier = [&](const JobConfig& j) {
    return cuda::classifier_scratch_elements(mb * T, j.model.width, j.model.vocab_size);
  };
  const MemoryEstimate gpu = estimate_memory(job, 1, ComputeKind::kCuda);
  const ModelFootprint flash = GptModel<bf16>::footprint(
      job.model, mb, cuda::flash_attention_buffers(mb, T, H), classifier(job));
  // And cuDNN's attention workspace, which may take the shape: 8 float dQs (memory_estimate.cc).
  const double cudnn_workspace = 8 * 4 * rows * job.model.width;
  EXPECT_EQ(gpu.activations, flash.arena_bytes + token_ids + scratch(job) + cudnn_workspace);
  // Each block's att and the one datt: B*H*T*T bf16 each before, 2*B*H*T now; the logits grow
  // from [N, V] to the classifier's scratch.
  const double square = static_cast<double>(mb) * H * T * T * 2, lse = 2.0 * mb * H * T * 2;
  const double materialised = model_footprint(job.model, mb, Precision::kBf16).arena_bytes;
  const double padding = (static_cast<double>(classifier(job)) - rows * job.model.vocab_size) * 2;
  ASSERT_GT(padding, 0);
  EXPECT_NEAR(materialised + padding - flash.arena_bytes, (job.model.layers + 1) * (square - lse),
              (job.model.layers + 2) * 2 * 256.0);  // each array padded to 256 bytes
  // fp32, or a head size flash does not take: the materialised arrays (and, for bf16, the
  // score scratch of one sequence).
  JobConfig odd = job;
  odd.model.width = 24;  // heads of 12
  const MemoryEstimate odd_gpu = estimate_memory(odd, 1, ComputeKind::kCuda);
  EXPECT_EQ(odd_gpu.activations,
            GptModel<bf16>::footprint(odd.model, mb, materialised_attention_buffers(mb, T, H),
                                      classifier(odd))
                    .arena_bytes +
                token_ids + scratch(odd) + static_cast<double>(H) * T * T * 4);
  job.parallel.precision = Precision::kFp32;
  EXPECT_EQ(estimate_memory(job, 1, ComputeKind::kCuda).activations,
            GptModel<float>::footprint(job.model, mb, materialised_attention_buffers(mb, T, H),
                                       classifier(job))
                    .arena_bytes +
                token_ids + scratch(job));
}

// model.classifier_chunk_tokens: the logits (and the cuda backend's per-row losses and padded
// logits) shrink from micro_batch x seq_len rows to the chunk's; nothing else changes.
// An mlp has no attention: on a GPU in bf16 its estimate does not grow with model.heads, which
// it ignores (before: H x T x T floats of attention scores were counted, 4 GiB at 64 heads and
// 4096 positions, and jobs that fit were refused).
TEST(MemoryEstimate, AnMlpCountsNoAttentionScratch) {
  JobConfig job = mlp_job();
  job.model.seq_len = 4096;
  job.parallel.precision = Precision::kBf16;
  job.model.heads = 1;
  const double one = estimate_memory(job, 1, ComputeKind::kCuda).device;
  job.model.heads = 64;
  EXPECT_EQ(estimate_memory(job, 1, ComputeKind::kCuda).device, one);
}

TEST(MemoryEstimate, ClassifierChunksShrinkTheLogitsAlone) {
  JobConfig job = gpt_job();
  job.model.vocab_size = 1000;  // the logits dominate, as at GPT-2's vocabulary
  JobConfig chunked = job;
  chunked.model.classifier_chunk_tokens = 7;
  const double rows = static_cast<double>(job.train.micro_batch) * job.model.seq_len;  // 36
  const double V = job.model.vocab_size, Vp = cuda::padded_vocab(job.model.vocab_size);
  const double pad = 2 * 256.0;  // the arena pads each array to 256 bytes
  const MemoryEstimate cpu = estimate(job, "none", 2), cpu_chunked = estimate(chunked, "none", 2);
  EXPECT_NEAR(cpu.activations - cpu_chunked.activations, (rows - 7) * V * 4, pad);
  const MemoryEstimate gpu = estimate_memory(job, 1, ComputeKind::kCuda),
                       gpu_chunked = estimate_memory(chunked, 1, ComputeKind::kCuda);
  EXPECT_NEAR(gpu.activations - gpu_chunked.activations, (rows - 7) * (Vp * 4 + 8), pad);
  for (const auto& [whole, part] : {std::pair{cpu, cpu_chunked}, std::pair{gpu, gpu_chunked}}) {
    EXPECT_EQ(whole.parameters, part.parameters);
    EXPECT_EQ(whole.gradients, part.gradients);
    EXPECT_EQ(whole.optimizer, part.optimizer);
  }
  // A chunk of the whole micro-batch or more is no chunk at all.
  chunked.model.classifier_chunk_tokens = static_cast<int>(rows);
  EXPECT_EQ(estimate(chunked, "none", 2).activations, cpu.activations);
}

TEST(MemoryEstimate, ASynchronousCheckpointNeedsNoStaging) {
  JobConfig job = gpt_job();
  job.checkpoint.async = false;
  EXPECT_EQ(estimate(job, "none", 2).checkpoint, 0);
}

// In-memory checkpoints hold two slots of the rank's slices in /dev/shm (host memory, in no
// category before: under ZeRO-3 more than the rest of the rank together), and a replica of a
// peer's on several nodes: the segment memory_checkpoints.h makes, to the page.
TEST(MemoryEstimate, InMemoryCheckpointsCountTheirSlotsAndReplica) {
  for (const char* mode : {"none", "full"}) {
    JobConfig job = gpt_job();
    job.checkpoint.async = false;
    const MemoryEstimate without = estimate(job, mode, 3);
    job.checkpoint.memory_every = 5;
    const MemoryEstimate with = estimate(job, mode, 3);
    const auto P = static_cast<size_t>(GptModel<float>::footprint(job.model, 1).param_floats);
    const MemorySegmentId segment =
        memory_segment_id("/run", choice_of<ShardMode>(mode), shard_counts(P, 3), 0, false);
    const double slots = with.checkpoint - without.checkpoint;
    EXPECT_NEAR(slots, 2.0 * segment.capacity, 2.0 * 4096) << mode;
    EXPECT_EQ(with.device, without.device) << mode;
    // A replica on several hosts, wherever they come from (--hosts, Slurm nodes): not from the
    // job file's cluster.nodes, which a run on one host does not use.
    job.cluster.nodes = 2;
    EXPECT_EQ(estimate(job, mode, 3).checkpoint, with.checkpoint) << mode;
    job.parallel.shard = choice_of<ShardMode>(mode);
    EXPECT_EQ(estimate_memory(job, 3, ComputeKind::kCpu, 2).checkpoint - without.checkpoint,
              2 * slots)
        << mode;
  }
}

TEST(MemoryEstimate, DeepModelsAddPerLayerAndHugeOnesStayFiniteOrUnbounded) {
  const MemoryEstimate l3 = estimate(gpt_job(3), "none", 1);
  const MemoryEstimate l6 = estimate(gpt_job(6), "none", 1);
  const MemoryEstimate l9 = estimate(gpt_job(9), "none", 1);
  EXPECT_DOUBLE_EQ(l9.total() - l6.total(), l6.total() - l3.total());
  // The job: width 4096, 24 layers of the shipped GPT. Far past any machine, computed.
  JobConfig big = gpt_job(24);
  big.model.width = 4096;
  big.model.vocab_size = 256;
  big.model.seq_len = 128;
  big.train.micro_batch = 8;
  const MemoryEstimate m = estimate(big, "none", 1);
  EXPECT_TRUE(std::isfinite(m.total()));
  EXPECT_GT(m.parameters, 4.8e9 * 4);  // 24 x 12 x 4096^2 weights alone
  // A width no size_t product survives: unbounded, and said so.
  big.model.width = 2147483647;
  big.model.heads = 1;
  EXPECT_FALSE(std::isfinite(estimate(big, "none", 1).total()));
  EXPECT_EQ(format_bytes(estimate(big, "none", 1).total()), "unbounded");
}

TEST(MemoryEstimate, FormatsBytesToThreeDigits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1.5 * 1024 * 1024), "1.50 MiB");
  EXPECT_EQ(format_bytes(97.3 * 1024 * 1024 * 1024), "97.3 GiB");
  EXPECT_EQ(format_bytes(300.0 * 1024 * 1024 * 1024), "300 GiB");
  const std::string d = describe_estimate(estimate(gpt_job(), "none", 2));
  for (const char* part :
       {"~", " MiB per rank (parameters ", ", gradients ", ", optimizer ", ", activations ",
        ", buffers ", ", checkpoint ", ", final weights ", ", runtime "}) {
    EXPECT_NE(d.find(part), std::string::npos) << part << " in " << d;
  }
}

// The buffers ShardedState allocates, and the scratch pool it grows over real steps, are what the
// estimate says: every shard mode, both precisions, bf16 reduction, either model, shallow and
// deep (the replay stops at 4 layers).
TEST(MemoryEstimate, ShardedStateAllocatesWhatTheEstimateSays) {
  for (const JobConfig& base : {gpt_job(1), gpt_job(2), gpt_job(6), mlp_job(1), mlp_job(6)}) {
    for (const char* mode : {"none", "optimizer", "gradients", "full"}) {
      for (const char* precision : {"fp32", "bf16"}) {
        for (const char* wire : {"fp32", "bf16"}) {
          JobConfig job = base;
          job.parallel.shard = choice_of<ShardMode>(mode);
          job.parallel.precision = choice_of<Precision>(precision);
          job.parallel.grad_reduce = choice_of<Precision>(wire);
          SCOPED_TRACE(choice_name(job.model.type) + std::string(" layers ") + std::to_string(job.model.layers) + " " + mode +
                       " " + precision + " reduce " + wire);
          const std::unique_ptr<Model> model =
              make_model(job.model, job.train.micro_batch, nullptr, job.parallel.precision);
          auto comm = make_self_communicator();
          ShardedState state(job, *model, *comm);
          state.init_params(1);
          const int B = job.train.micro_batch;
          const size_t n = static_cast<size_t>(B) * job.model.seq_len;
          std::vector<int> tokens(n);
          for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<int>(i % 40);
          // Two steps of two micro-batches with an evaluation between: the pool's full size.
          for (int step = 0; step < 2; ++step) {
            state.begin_step();
            for (int j = 0; j < 2; ++j) {
              state.begin_micro_batch(j == 1);
              model->forward_backward(state, tokens.data(), tokens.data(), B, 1e-3f);
            }
            state.finish_backward();
            state.optimizer_step(1e-3);
            model->forward_loss(state, tokens.data(), tokens.data(), B);
          }
          const MemoryPlan plan = state.memory_plan();
          const MemoryEstimate m = estimate_memory(job, 1, ComputeKind::kCpu);
          EXPECT_EQ(m.parameters, static_cast<double>(plan.param_bytes));
          EXPECT_EQ(m.gradients, static_cast<double>(plan.grad_bytes));
          EXPECT_EQ(m.optimizer, static_cast<double>(plan.optimizer_bytes));
          EXPECT_EQ(m.buffers, static_cast<double>(plan.scratch_bytes));
        }
      }
    }
  }
}

}  // namespace
}  // namespace rm
