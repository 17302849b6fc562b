// What one training step asks of a device, counted without one: a small bf16 GPT trains through
// a TimedCompute (kernels/timed_compute.h) that logs every call of the compute interface -- on
// the cuda backend each is a kernel launch, a cuBLAS call or a copy -- and the tests assert:
//  - the calls per step: a fixed part plus a part per block, stated below, the same every step
//    (a change that adds a launch to the step must change these numbers on purpose);
//  - no allocation after the first step;
//  - no host synchronisation from the step's first forward kernel to its optimizer update: the
//    losses are queued on the device (Model::queue_forward_backward), the loss and the
//    gradient's sum of squares that guard the update stay there (kernels/step_scalars.h), and
//    both reach the host after the update was queued (take_loss_sum, finish_optimizer_step);
//  - with flash attention (a bf16 layer set that reports the flash kernels' buffers, as the
//    cuda backend does), no activation array of B*H*T*T elements exists, while the
//    materialised path has one (so the check can fail).
// The arithmetic is the cpu backend's; what is counted is what a GPU would be asked to run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/self_communicator.h"
#include "kernels/compute_factory.h"
#include "kernels/cuda/flash_attention_plan.h"
#include "kernels/timed_compute.h"
#include "model/gpt_model.h"
#include "tests/small_gpt_job.h"
#include "worker/trainer.h"

namespace rm {
namespace {

// The bf16 layers of another Compute, but with the flash kernels' contract for attention: the
// forward keeps only flash_attention_buffers()'s saved state and the backward recomputes the
// probabilities (here in host memory of its own, as the flash kernels keep them on chip).
class FlashLikeLayers final : public LayerKernels<bf16> {
 public:
  explicit FlashLikeLayers(LayerKernels<bf16>& k) : k_(k) {}

  void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int B,
                         int Tn, int C) override {
    k_.embedding_forward(out, tokens, wte, wpe, B, Tn, C);
  }
  void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int B,
                          int Tn, int C) override {
    k_.embedding_backward(dwte, dwpe, dout, tokens, B, Tn, C);
  }
  void context_embedding_forward(bf16* x, const int* tokens, const bf16* emb, int B, int Tn, int K,
                                 int E) override {
    k_.context_embedding_forward(x, tokens, emb, B, Tn, K, E);
  }
  void context_embedding_backward(float* demb, const bf16* dx, const int* tokens, int B, int Tn,
                                  int K, int E) override {
    k_.context_embedding_backward(demb, dx, tokens, B, Tn, K, E);
  }
  void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                         const bf16* bias, int N, int C) override {
    k_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void residual_layernorm_forward(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* a,
                                  const bf16* b, const bf16* weight, const bf16* bias, int N,
                                  int C) override {
    k_.residual_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, N, C);
  }
  void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                          const bf16* inp, const bf16* weight, const float* mean, const float* rstd,
                          int N, int C) override {
    k_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void linear_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N,
                      int C, int OC) override {
    k_.linear_forward(out, inp, weight, bias, N, C, OC);
  }
  void linear_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                       const bf16* weight, int N, int C, int OC) override {
    k_.linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  void attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int Tn, int C,
                         int H) override {
    (void)att;  // lse-sized: the probabilities stay in probs_, never in the model's arena
    probs_.assign(materialised_attention_buffers(B, Tn, H).saved, bf16{});
    k_.attention_forward(out, probs_.data(), qkv, B, Tn, C, H);
  }
  void attention_backward(bf16* dqkv, bf16* datt_scratch, const bf16* dout, const bf16* qkv,
                          const bf16* att, const bf16* out, int B, int Tn, int C, int H) override {
    (void)datt_scratch;
    (void)att;
    const AttentionBuffers full = materialised_attention_buffers(B, Tn, H);
    std::vector<bf16> recomputed_out(static_cast<size_t>(B) * Tn * C);
    probs_.assign(full.saved, bf16{});
    k_.attention_forward(recomputed_out.data(), probs_.data(), qkv, B, Tn, C, H);
    dprobs_.assign(full.scratch, bf16{});
    k_.attention_backward(dqkv, dprobs_.data(), dout, qkv, probs_.data(), out, B, Tn, C, H);
  }
  AttentionBuffers attention_buffers(int B, int Tn, int C, int H) const override {
    (void)C;
    return cuda::flash_attention_buffers(B, Tn, H);
  }
  void gelu_forward(bf16* out, const bf16* inp, size_t n) override { k_.gelu_forward(out, inp, n); }
  void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, size_t n) override {
    k_.gelu_backward(dinp, inp, dout, n);
  }
  void add(bf16* out, const bf16* a, const bf16* b, size_t n) override { k_.add(out, a, b, n); }
  void dropout(bf16* out, const bf16* in, const DropoutKey& key, int B, int Tn, int C) override {
    k_.dropout(out, in, key, B, Tn, C);
  }
  double cross_entropy_forward(const bf16* logits, const int* targets, int N, int V) override {
    return k_.cross_entropy_forward(logits, targets, N, V);
  }
  double cross_entropy_forward_backward(bf16* logits, const int* targets, int N, int V,
                                        float grad_scale) override {
    return k_.cross_entropy_forward_backward(logits, targets, N, V, grad_scale);
  }

 private:
  LayerKernels<bf16>& k_;
  std::vector<bf16> probs_, dprobs_;  // host memory outside the Compute: the "chip"
};

// A cpu Compute whose bf16 layers are FlashLikeLayers; everything else passes through.
class FlashLikeCompute final : public Compute {
 public:
  explicit FlashLikeCompute(Compute& inner) : inner_(inner), flash_(inner.layers_bf16()) {}

  ComputeKind kind() const override { return inner_.kind(); }
  std::string describe() const override { return "flash-like " + inner_.describe(); }
  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void release(void* memory) override { inner_.release(memory); }
  void* allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  void release_host(void* memory) override { inner_.release_host(memory); }
  void upload(void* dst, const void* src, size_t bytes) override { inner_.upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override {
    inner_.download(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { inner_.copy(dst, src, bytes); }
  void zero(void* dst, size_t bytes) override { inner_.zero(dst, bytes); }
  void download_async(void* dst, const void* src, size_t bytes) override {
    inner_.download_async(dst, src, bytes);
  }
  std::function<void()> downloads_fence() override { return inner_.downloads_fence(); }
  void synchronize() override { inner_.synchronize(); }
  LayerKernels<float>& layers_f32() override { return inner_.layers_f32(); }
  LayerKernels<bf16>& layers_bf16() override { return flash_; }
  void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) override {
    inner_.sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t t,
                    float grad_scale) override {
    inner_.adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  }
  void adamw_update_ranges(float* params, const float* grads, float* m, float* v,
                           const std::vector<AdamWRange>& ranges, float lr, float beta1,
                           float beta2, float eps, float weight_decay, int64_t t, float grad_scale,
                           bf16* rounded = nullptr, const AdamWGuard* guard = nullptr) override {
    inner_.adamw_update_ranges(params, grads, m, v, ranges, lr, beta1, beta2, eps, weight_decay, t,
                               grad_scale, rounded, guard);
  }
  double sum_squares(const float* x, size_t n) override { return inner_.sum_squares(x, n); }
  void sum_squares_into(double* dst, const float* x, size_t n) override {
    inner_.sum_squares_into(dst, x, n);
  }
  void add_inplace(float* acc, const float* x, size_t n) override { inner_.add_inplace(acc, x, n); }
  void add_inplace(float* acc, const bf16* x, size_t n) override { inner_.add_inplace(acc, x, n); }
  void scale(float* x, size_t n, float s) override { inner_.scale(x, n, s); }
  void cast(bf16* dst, const float* src, size_t n) override { inner_.cast(dst, src, n); }
  void cast(float* dst, const bf16* src, size_t n) override { inner_.cast(dst, src, n); }

 private:
  Compute& inner_;
  FlashLikeLayers flash_;
};

// T = 128, 4 heads, width 32: one [B,H,T,T] array (131,072 elements at B = 2) is larger than
// any other activation (the logits are 256 x 256), so its absence is visible.
JobConfig job_of(int layers, double dropout = 0) {
  JobConfig job = test::small_gpt_job("none", /*bucket_mb=*/0.01);
  job.model.seq_len = 128;
  job.model.heads = 4;
  job.model.layers = layers;
  job.model.dropout = dropout;
  job.parallel.precision = Precision::kBf16;
  job.data.train = {"data/tinyshakespeare.txt"};
  job.train.steps = 10;
  job.train.global_batch = 4;  // two micro-batches of 2 on one rank
  job.train.micro_batch = 2;
  return job;
}

struct StepRecord {
  int64_t allocations_setup = 0;  // while the trainer was built
  int64_t calls_step1 = 0, allocations_step1 = 0;
  std::vector<std::vector<TimedCompute::Call>> later_steps;  // the calls of steps 2 and 3
  int64_t later_allocations = 0;
  std::vector<size_t> arrays;  // the activation arena's arrays, bytes
};

StepRecord record_steps(int layers, bool flash, double dropout = 0) {
  const JobConfig job = job_of(layers, dropout);
  ComputeOptions options;
  options.threads = 1;
  std::unique_ptr<Compute> cpu = make_compute(ComputeKind::kCpu, options);
  FlashLikeCompute flash_like(*cpu);
  Compute& base = flash ? static_cast<Compute&>(flash_like) : *cpu;
  TimedCompute timed(base);
  TrainingData data = open_training_data(job);
  auto comm = make_self_communicator();
  TrainerOptions trainer_options;
  trainer_options.verbose = false;
  trainer_options.compute = &timed;
  Trainer trainer(job, data, *comm, trainer_options);

  StepRecord r;
  r.allocations_setup = timed.counts().allocations;
  timed.reset();
  trainer.train_step(0);
  r.calls_step1 = timed.counts().calls;
  r.allocations_step1 = timed.counts().allocations;
  for (int64_t step = 1; step <= 2; ++step) {
    timed.reset();
    timed.set_logging(true);
    trainer.train_step(step);
    r.later_steps.push_back(timed.log());
    r.later_allocations += timed.counts().allocations;
  }
  const auto* gpt = dynamic_cast<const GptModel<bf16>*>(&trainer.model());
  if (gpt == nullptr) throw std::logic_error("not a bf16 GPT");
  r.arrays = gpt->activations().array_bytes();
  return r;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The calls a step makes (2 micro-batches on 1 rank, bucket and unit sizes as job_of's): a fixed
// part and a part per block, measured and written here, so that a change to the number of calls
// is a visible change to this test (print them with RM_PRINT_STEP_CALLS=1).
//  - Per block: per micro-batch 7 forward calls (2 layernorms, each fused with the residual add
//    before it -- the attention branch's, and the previous block's MLP branch's, or for the
//    first block none --, 3 linears and the MLP's first linear with its GELU, attention) and 7
//    backward ones (the MLP's second linear with the GELU's backward in one; the adds'
//    gradients flow through unchanged): 2 x 14 = 28.
//  - Fixed: per micro-batch 8 (2 token uploads, the embedding forward and backward, the final
//    layernorm forward (with the last block's residual add) and backward, the classifier with
//    its queued loss in one call, one zeroing), plus the gradients' zeroing, the loss copied into
//    the step's scalars, the gradient's sum of squares into them, one AdamW call over every tensor
//    of the shard (adamw_update_ranges, guarded by the scalars), which also writes the bf16 weights
//    (no cast of its own), then the two reads: the loss total and the scalars: 2 x 8 + 6 = 22.
// On the cuda backend a call is one or a few launches (in bf16 a linear's forward is one
// cuBLASLt GEMM with the bias, or the GELU, in its epilogue, its backward two GEMMs, the weight
// one reducing the bias gradient, and a small add; the classifier a copy, three GEMMs and four
// small kernels; the loss copy one, the sum of squares two, AdamW one).
constexpr int64_t kCallsPerBlock = 28;
constexpr int64_t kFixedCalls = 22;

TEST(DeviceStep, NoAllocationAfterTheFirstStepAndTheSameCallsEveryStep) {
  const StepRecord r = record_steps(2, /*flash=*/true);
  EXPECT_GT(r.allocations_setup, 0) << "the counting sees no allocation at all";
  if (getenv("RM_PRINT_STEP_CALLS")) {
    for (const TimedCompute::Call& c : r.later_steps[0]) {
      std::printf("%s%s\n", c.name.c_str(), c.host_sync ? "  [host sync]" : "");
    }
  }
  EXPECT_EQ(r.later_allocations, 0) << "steps 2 and 3 allocated device memory";
  ASSERT_EQ(r.later_steps.size(), 2u);
  EXPECT_EQ(r.later_steps[0].size(), r.later_steps[1].size());
  for (size_t i = 0; i < r.later_steps[0].size() && i < r.later_steps[1].size(); ++i) {
    ASSERT_EQ(r.later_steps[0][i].name, r.later_steps[1][i].name) << "call " << i;
  }
}

TEST(DeviceStep, CallsPerStepAreAFixedPartAndAPartPerBlock) {
  const size_t two = record_steps(2, true).later_steps[0].size();
  const size_t three = record_steps(3, true).later_steps[0].size();
  const int64_t per_block = static_cast<int64_t>(three) - static_cast<int64_t>(two);
  const int64_t fixed = static_cast<int64_t>(two) - 2 * per_block;
  std::printf("calls per step: %lld + %lld per block (2 micro-batches, 1 rank)\n",
              static_cast<long long>(fixed), static_cast<long long>(per_block));
  EXPECT_EQ(per_block, kCallsPerBlock);
  EXPECT_EQ(fixed, kFixedCalls);
}

// model.dropout: one call a site in the forward and one in the backward (the masks are drawn
// again, never stored): per micro-batch 2 a block and 1 for the embeddings each way, so 2 x 4 =
// 8 more a block and 2 x 2 = 4 more fixed; no allocation after the first step, no wait.
TEST(DeviceStep, DropoutAddsACallASiteEachWayAndNoAllocationOrWait) {
  const StepRecord two = record_steps(2, true, 0.1), three = record_steps(3, true, 0.1);
  const int64_t n2 = static_cast<int64_t>(two.later_steps[0].size());
  const int64_t per_block = static_cast<int64_t>(three.later_steps[0].size()) - n2;
  EXPECT_EQ(per_block, kCallsPerBlock + 8);
  EXPECT_EQ(n2 - 2 * per_block, kFixedCalls + 4);
  EXPECT_EQ(two.later_allocations, 0);
  int dropouts = 0;
  for (const TimedCompute::Call& c : two.later_steps[0]) {
    if (!starts_with(c.name, "dropout")) continue;
    ++dropouts;
    EXPECT_FALSE(c.host_sync) << c.name;
  }
  EXPECT_EQ(dropouts, 2 * (2 * 2 + 1) * 2);  // micro-batches x sites x (forward, backward)
}

TEST(DeviceStep, NoHostSynchronisationFromTheFirstForwardToTheOptimizerUpdate) {
  const std::vector<TimedCompute::Call> calls = record_steps(2, true).later_steps[0];
  size_t first_forward = calls.size(), last_backward = 0, update = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (starts_with(calls[i].name, "embedding_forward") && first_forward == calls.size()) {
      first_forward = i;
    }
    if (starts_with(calls[i].name, "embedding_backward")) last_backward = i;
    if (calls[i].name == "adamw_update_ranges") update = i;
  }
  ASSERT_LT(first_forward, last_backward) << "no forward or backward kernels were logged";
  ASSERT_LT(last_backward, update) << "no optimizer update after the backward";
  std::vector<std::string> reads_after;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!calls[i].host_sync) continue;
    EXPECT_FALSE(i > first_forward && i < update)
        << calls[i].name << " (call " << i << ") waits for the device between the step's first "
        << "forward kernel (call " << first_forward << ") and its optimizer update (call " << update
        << ")";
    if (i > update) reads_after.push_back(calls[i].name);
  }
  // The loss and the scalars (gradient norm, whether the update ran) reach the host after it.
  const std::vector<std::string> want = {"take_queued_loss", "download"};
  EXPECT_EQ(reads_after, want);
}

TEST(DeviceStep, FlashAttentionKeepsNoBHTTArray) {
  const JobConfig job = job_of(2);
  const size_t bhtt_bytes = static_cast<size_t>(job.train.micro_batch) * job.model.heads *
                            job.model.seq_len * job.model.seq_len * sizeof(bf16);
  const auto largest = [](const std::vector<size_t>& v) {
    size_t m = 0;
    for (size_t b : v) m = std::max(m, b);
    return m;
  };
  const StepRecord flash = record_steps(2, true);
  EXPECT_LT(largest(flash.arrays), bhtt_bytes) << "an activation array of B*H*T*T elements";
  // The check can fail: the materialised path keeps the probabilities [B,H,T,T].
  const StepRecord materialised = record_steps(2, false);
  EXPECT_GE(largest(materialised.arrays), bhtt_bytes);
}

}  // namespace
}  // namespace rm
