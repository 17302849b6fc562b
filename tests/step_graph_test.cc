// The trainer's step graphs (worker/step_graph.h, RM_CUDA_GRAPH=1), checked without a GPU: a cpu
// Compute that records instead of running between begin_capture and end_capture -- each call a
// closure over its arguments, an upload one that reads its host source when replayed, a call
// that returns a value to the host refused -- stands in for a CUDA graph. The tests assert that
// the trainer records at the process's second step and replays afterwards, that the replayed
// steps train the weights of the eager run bit for bit (so the recorded region holds all of the
// step's device work and nothing that changes from step to step), that a dropped graph is
// recorded again, that a failed recording (at its first call or late in the backward) leaves the
// run call by call with nothing of it behind, what the run says in each case, and when graphs
// are refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "collectives/self_communicator.h"
#include "kernels/compute_factory.h"
#include "kernels/timed_compute.h"
#include "testing/scoped_env.h"
#include "tests/small_gpt_job.h"
#include "worker/step_graph.h"
#include "worker/trainer.h"

namespace rm {
namespace {

// What is recorded: closures, run in order by replay().
struct Tape {
  bool recording = false;
  std::vector<std::function<void()>> calls;
  void run(std::function<void()> f) {
    if (recording) {
      calls.push_back(std::move(f));
    } else {
      f();
    }
  }
  void refuse(const char* call) const {
    if (recording)
      throw std::logic_error(std::string(call) + " returns to the host while recording");
  }
  // A call the backend cannot record, at its refuse_nth call of a recording (0: never).
  int refuse_nth = 0, seen = 0;
  void count(const char* call) {
    if (recording && refuse_nth > 0 && ++seen == refuse_nth)
      throw std::logic_error(std::string(call) + " cannot be recorded");
  }
};

template <typename T>
class RecordingLayers final : public LayerKernels<T> {
 public:
  RecordingLayers(LayerKernels<T>& k, Tape& tape) : k_(k), tape_(tape) {}

  void embedding_forward(T* out, const int* tokens, const T* wte, const T* wpe, int B, int Tn,
                         int C) override {
    tape_.run([=, &k = k_] { k.embedding_forward(out, tokens, wte, wpe, B, Tn, C); });
  }
  void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens, int B, int Tn,
                          int C) override {
    tape_.count("embedding_backward");
    tape_.run([=, &k = k_] { k.embedding_backward(dwte, dwpe, dout, tokens, B, Tn, C); });
  }
  void context_embedding_forward(T* x, const int* tokens, const T* emb, int B, int Tn, int K,
                                 int E) override {
    tape_.run([=, &k = k_] { k.context_embedding_forward(x, tokens, emb, B, Tn, K, E); });
  }
  void context_embedding_backward(float* demb, const T* dx, const int* tokens, int B, int Tn, int K,
                                  int E) override {
    tape_.run([=, &k = k_] { k.context_embedding_backward(demb, dx, tokens, B, Tn, K, E); });
  }
  void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                         const T* bias, int N, int C) override {
    tape_.run([=, &k = k_] { k.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C); });
  }
  void layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                          const T* weight, const float* mean, const float* rstd, int N,
                          int C) override {
    tape_.run([=, &k = k_] {
      k.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    });
  }
  void residual_layernorm_forward(T* sum, T* out, float* mean, float* rstd, const T* a, const T* b,
                                  const T* weight, const T* bias, int N, int C) override {
    tape_.run([=, &k = k_] {
      k.residual_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, N, C);
    });
  }
  void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C,
                      int OC) override {
    tape_.run([=, &k = k_] { k.linear_forward(out, inp, weight, bias, N, C, OC); });
  }
  void linear_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                       const T* weight, int N, int C, int OC) override {
    tape_.run(
        [=, &k = k_] { k.linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC); });
  }
  void linear_gelu_forward(T* out, T* pre, const T* inp, const T* weight, const T* bias, int N,
                           int C, int OC) override {
    tape_.run([=, &k = k_] { k.linear_gelu_forward(out, pre, inp, weight, bias, N, C, OC); });
  }
  void linear_backward_into_gelu(T* dpre, float* dweight, float* dbias, const T* dout, const T* inp,
                                 const T* weight, const T* pre, int N, int C, int OC) override {
    tape_.run([=, &k = k_] {
      k.linear_backward_into_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
    });
  }
  void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) override {
    tape_.run([=, &k = k_] { k.attention_forward(out, att, qkv, B, Tn, C, H); });
  }
  void attention_backward(T* dqkv, T* datt_scratch, const T* dout, const T* qkv, const T* att,
                          const T* out, int B, int Tn, int C, int H) override {
    tape_.run([=, &k = k_] {
      k.attention_backward(dqkv, datt_scratch, dout, qkv, att, out, B, Tn, C, H);
    });
  }
  AttentionBuffers attention_buffers(int B, int Tn, int C, int H) const override {
    return k_.attention_buffers(B, Tn, C, H);
  }
  void gelu_forward(T* out, const T* inp, size_t n) override {
    tape_.run([=, &k = k_] { k.gelu_forward(out, inp, n); });
  }
  void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) override {
    tape_.run([=, &k = k_] { k.gelu_backward(dinp, inp, dout, n); });
  }
  void dropout(T* out, const T* in, const DropoutKey& key, int B, int Tn, int C) override {
    tape_.run([=, &k = k_] { k.dropout(out, in, key, B, Tn, C); });
  }
  void add(T* out, const T* a, const T* b, size_t n) override {
    tape_.run([=, &k = k_] { k.add(out, a, b, n); });
  }
  double cross_entropy_forward(const T* logits, const int* targets, int N, int V) override {
    tape_.refuse("cross_entropy_forward");
    return k_.cross_entropy_forward(logits, targets, N, V);
  }
  double cross_entropy_forward_backward(T* logits, const int* targets, int N, int V,
                                        float grad_scale) override {
    tape_.refuse("cross_entropy_forward_backward");
    return k_.cross_entropy_forward_backward(logits, targets, N, V, grad_scale);
  }
  void queue_cross_entropy_forward_backward(T* logits, const int* targets, int N, int V,
                                            float grad_scale) override {
    tape_.run([=, &k = k_] {
      k.queue_cross_entropy_forward_backward(logits, targets, N, V, grad_scale);
    });
  }
  double take_queued_loss() override {
    tape_.refuse("take_queued_loss");
    return k_.take_queued_loss();
  }
  void queue_loss_copy(double* dst) override {
    tape_.run([=, &k = k_] { k.queue_loss_copy(dst); });
  }
  size_t classifier_scratch_elements(int N, int C, int V) const override {
    return k_.classifier_scratch_elements(N, C, V);
  }
  void queue_classifier_forward_backward(T* dinp, float* dwte, T* scratch, const T* inp,
                                         const T* wte, const int* targets, int N, int C, int V,
                                         float grad_scale, bool same_wte = false) override {
    tape_.run([=, &k = k_] {
      k.queue_classifier_forward_backward(dinp, dwte, scratch, inp, wte, targets, N, C, V,
                                          grad_scale, same_wte);
    });
  }

 private:
  LayerKernels<T>& k_;
  Tape& tape_;
};

// A cpu Compute with graphs: recorded calls are closures, replayed in order.
class RecordingCompute final : public Compute {
 public:
  explicit RecordingCompute(Compute& inner)
      : inner_(inner), f32_(inner.layers_f32(), tape_), bf16_(inner.layers_bf16(), tape_) {}

  int captures = 0, recordings = 0, replays = 0;
  void drop() { graph_.clear(); }  // as when the backend's scratch moved
  // Uploads are refused while recording, as a call the backend cannot record would be.
  bool refuse_uploads = false;
  // The backward's last call (the embedding's) is refused at that micro-batch of a recording
  // (0: never): after the gradient buckets of the later layers were launched.
  void refuse_embedding_backward(int micro_batch) { tape_.refuse_nth = micro_batch; }

  ComputeKind kind() const override { return inner_.kind(); }
  std::string describe() const override { return "recording " + inner_.describe(); }

  bool can_capture() const override { return true; }
  void begin_capture() override {
    if (tape_.recording) throw std::logic_error("begin_capture while recording");
    graph_.clear();
    ++captures;
    tape_.recording = true;
    tape_.calls.clear();
  }
  void end_capture(bool keep) override {
    if (!tape_.recording) throw std::logic_error("end_capture without begin_capture");
    tape_.recording = false;
    if (keep) {
      graph_ = std::move(tape_.calls);
      ++recordings;
    }
    tape_.calls.clear();
  }
  bool has_graph() override { return !graph_.empty(); }
  void replay() override {
    if (graph_.empty()) throw std::logic_error("replay without a graph");
    ++replays;
    for (const auto& call : graph_) call();
  }

  void* allocate(size_t bytes) override {
    tape_.refuse("allocate");
    return inner_.allocate(bytes);
  }
  void release(void* memory) override { inner_.release(memory); }
  void* allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  void release_host(void* memory) override { inner_.release_host(memory); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (refuse_uploads) tape_.refuse("upload");
    // Replayed, it reads src as it is then: the contract of a recorded upload.
    tape_.run([=] { std::memcpy(dst, src, bytes); });
  }
  void download(void* dst, const void* src, size_t bytes) override {
    tape_.refuse("download");
    inner_.download(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    tape_.run([=, &in = inner_] { in.copy(dst, src, bytes); });
  }
  void zero(void* dst, size_t bytes) override {
    tape_.run([=, &in = inner_] { in.zero(dst, bytes); });
  }
  void download_async(void* dst, const void* src, size_t bytes) override {
    tape_.refuse("download_async");
    inner_.download_async(dst, src, bytes);
  }
  std::function<void()> downloads_fence() override { return inner_.downloads_fence(); }
  void synchronize() override {
    tape_.refuse("synchronize");
    inner_.synchronize();
  }
  LayerKernels<float>& layers_f32() override { return f32_; }
  LayerKernels<bf16>& layers_bf16() override { return bf16_; }
  void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
             const float* B, int ldb, float beta, float* C, int ldc) override {
    tape_.run(
        [=, &in = inner_] { in.sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); });
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t t,
                    float grad_scale) override {
    tape_.run([=, &in = inner_] {
      in.adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t, grad_scale);
    });
  }
  double sum_squares(const float* x, size_t n) override {
    tape_.refuse("sum_squares");
    return inner_.sum_squares(x, n);
  }
  void sum_squares_into(double* dst, const float* x, size_t n) override {
    tape_.run([=, &in = inner_] { in.sum_squares_into(dst, x, n); });
  }
  void add_inplace(float* acc, const float* x, size_t n) override {
    tape_.run([=, &in = inner_] { in.add_inplace(acc, x, n); });
  }
  void add_inplace(float* acc, const bf16* x, size_t n) override {
    tape_.run([=, &in = inner_] { in.add_inplace(acc, x, n); });
  }
  void scale(float* x, size_t n, float s) override {
    tape_.run([=, &in = inner_] { in.scale(x, n, s); });
  }
  void cast(bf16* dst, const float* src, size_t n) override {
    tape_.run([=, &in = inner_] { in.cast(dst, src, n); });
  }
  void cast(float* dst, const bf16* src, size_t n) override {
    tape_.run([=, &in = inner_] { in.cast(dst, src, n); });
  }

 private:
  Compute& inner_;
  Tape tape_;
  RecordingLayers<float> f32_;
  RecordingLayers<bf16> bf16_;
  std::vector<std::function<void()>> graph_;
};

// RM_CUDA_GRAPH set (null: unset) for one scope.
struct GraphEnv : testutil::ScopedEnv {
  explicit GraphEnv(const char* value) : ScopedEnv("RM_CUDA_GRAPH", value) {}
};

JobConfig graph_job() {
  JobConfig job = test::small_gpt_job("none", /*bucket_mb=*/0.01);
  job.parallel.precision = Precision::kBf16;
  job.data.train = {"data/tinyshakespeare.txt"};
  job.train.steps = 8;
  job.train.global_batch = 4;  // two micro-batches of 2
  job.train.micro_batch = 2;
  return job;
}

struct RunResult {
  std::vector<double> losses, norms;
  std::vector<float> params;
  int captures = 0, recordings = 0, replays = 0;
  int64_t replayed = 0;  // the trainer's count
  std::string said;      // what the trainer printed
};

// How a recording fails: not at all, at its first call (the first micro-batch's token upload),
// or at the backward's last call of the last micro-batch, after buckets went out.
enum class Failure { kNone, kAtTheStart, kInTheLastBackward };

// `steps` steps of graph_job on a cpu Compute, through a RecordingCompute when `graphs`;
// `drop_after`: the graph is dropped after that many steps (0: never); `failure`: how every
// recording fails; `grad_reduce`: the type the gradient buckets travel in.
RunResult train(bool graphs, int steps, int drop_after = 0, Failure failure = Failure::kNone,
                Precision grad_reduce = Precision::kFp32) {
  JobConfig job = graph_job();
  job.parallel.grad_reduce = grad_reduce;
  ComputeOptions options;
  options.threads = 1;
  std::unique_ptr<Compute> cpu = make_compute(ComputeKind::kCpu, options);
  RecordingCompute recording(*cpu);
  recording.refuse_uploads = failure == Failure::kAtTheStart;
  if (failure == Failure::kInTheLastBackward) {
    recording.refuse_embedding_backward(job.train.global_batch / job.train.micro_batch);
  }
  GraphEnv env(graphs ? "1" : "0");
  TrainingData data = open_training_data(job);
  auto comm = make_self_communicator();
  TrainerOptions trainer_options;
  trainer_options.verbose = true;
  trainer_options.compute = graphs ? static_cast<Compute*>(&recording) : cpu.get();
  RunResult r;
  testing::internal::CaptureStdout();
  Trainer trainer(job, data, *comm, trainer_options);
  for (int step = 0; step < steps; ++step) {
    if (drop_after > 0 && step == drop_after) recording.drop();
    const StepMetrics m = trainer.train_step(step);
    r.losses.push_back(m.loss);
    r.norms.push_back(m.grad_norm);
  }
  r.said = testing::internal::GetCapturedStdout();
  r.params = trainer.state().full_params();
  r.replayed = trainer.steps_replayed();
  r.captures = recording.captures;
  r.recordings = recording.recordings;
  r.replays = recording.replays;
  return r;
}

// The same losses, norms and weights, bit for bit.
void expect_the_same_training(const RunResult& graph, const RunResult& eager) {
  EXPECT_EQ(graph.losses, eager.losses);
  EXPECT_EQ(graph.norms, eager.norms);
  ASSERT_EQ(graph.params.size(), eager.params.size());
  EXPECT_EQ(
      std::memcmp(graph.params.data(), eager.params.data(), eager.params.size() * sizeof(float)),
      0);
}

TEST(StepGraph, ReplayedStepsTrainTheEagerRunsWeightsBitForBit) {
  const RunResult eager = train(false, 6), graph = train(true, 6);
  // Step 1 eager, step 2 recorded and run once, steps 3-6 replayed.
  EXPECT_EQ(graph.recordings, 1);
  EXPECT_EQ(graph.replays, 5);
  EXPECT_EQ(graph.replayed, 5);
  expect_the_same_training(graph, eager);
  EXPECT_NE(eager.losses.front(), eager.losses.back()) << "the run did not train";
  // Said once the graph exists and ran (what the GPU scripts look for), not before.
  EXPECT_NE(graph.said.find("step 2 recorded as one graph and run"), std::string::npos)
      << graph.said;
  EXPECT_EQ(eager.said.find("recorded as one graph"), std::string::npos) << eager.said;
}

TEST(StepGraph, ADroppedGraphIsRecordedAgain) {
  const RunResult eager = train(false, 6), graph = train(true, 6, /*drop_after=*/4);
  EXPECT_EQ(graph.recordings, 2);  // steps 2 and 5
  EXPECT_EQ(graph.replays, 5);
  EXPECT_EQ(graph.replayed, 5);
  expect_the_same_training(graph, eager);
}

// A recording that fails (a call the backend cannot record) costs the graphs, not the run: the
// step runs call by call, as do the later ones, with the eager run's bits.
TEST(StepGraph, AFailedRecordingRunsTheStepCallByCallAndTheRestToo) {
  const RunResult eager = train(false, 5), graph = train(true, 5, 0, Failure::kAtTheStart);
  EXPECT_EQ(graph.captures, 1) << "step 2 tried, and no step after it";
  EXPECT_EQ(graph.recordings, 0);
  EXPECT_EQ(graph.replays, 0);
  EXPECT_EQ(graph.replayed, 0);
  expect_the_same_training(graph, eager);
  EXPECT_NE(graph.said.find("recording step 2 failed"), std::string::npos) << graph.said;
  EXPECT_EQ(graph.said.find("recorded as one graph"), std::string::npos)
      << "a run that never replayed says it did: " << graph.said;
}

// The same when it fails late, after most of the step was recorded (never run), the gradient
// buckets' casts and reductions among it: nothing of the discarded recording may reach the step
// that then runs call by call (a reduction left pending would complete into it; with bf16 on the
// wire, its cast would put the step before's values over the gradients).
TEST(StepGraph, ALateFailedRecordingLeavesNothingOfItBehind) {
  for (const Precision wire : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(wire == Precision::kBf16 ? "grad_reduce bf16" : "grad_reduce fp32");
    const RunResult eager = train(false, 5, 0, Failure::kNone, wire);
    const RunResult graph = train(true, 5, 0, Failure::kInTheLastBackward, wire);
    EXPECT_EQ(graph.captures, 1);
    EXPECT_EQ(graph.recordings, 0);
    expect_the_same_training(graph, eager);
  }
}

// `bench train --profile` times every call of a step alone (kernels/timed_compute.h): a profiled
// step must run call by call, not replay its graph (one call, the kernels unseen), and the graph
// must be kept for the steps after, with the eager run's bits throughout.
TEST(StepGraph, ProfiledStepsRunCallByCallAndTheGraphIsKept) {
  const RunResult eager = train(false, 5);
  const JobConfig job = graph_job();
  ComputeOptions options;
  options.threads = 1;
  std::unique_ptr<Compute> cpu = make_compute(ComputeKind::kCpu, options);
  RecordingCompute recording(*cpu);
  TimedCompute timed(recording);
  GraphEnv env("1");
  TrainingData data = open_training_data(job);
  auto comm = make_self_communicator();
  TrainerOptions trainer_options;
  trainer_options.compute = &timed;
  Trainer trainer(job, data, *comm, trainer_options);
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) losses.push_back(trainer.train_step(step).loss);
  ASSERT_EQ(recording.recordings, 1);
  ASSERT_EQ(recording.replays, 2);  // step 2 recorded and run, step 3 replayed
  timed.reset();
  timed.set_timing(true);
  losses.push_back(trainer.train_step(3).loss);
  timed.set_timing(false);
  EXPECT_EQ(recording.replays, 2) << "the profiled step replayed its graph";
  EXPECT_EQ(recording.captures, 1) << "the profiled step was recorded";
  bool forward = false, replay = false;
  for (const TimedCompute::Op& op : timed.ops()) {
    forward = forward || op.name.rfind("linear_forward", 0) == 0;
    replay = replay || op.name == "graph replay";
  }
  EXPECT_TRUE(forward) << "no linear_forward among the profiled step's calls";
  EXPECT_FALSE(replay);
  losses.push_back(trainer.train_step(4).loss);
  EXPECT_EQ(recording.replays, 3) << "the graph was not replayed after the profiled step";
  EXPECT_EQ(recording.recordings, 1) << "the graph was recorded again instead of kept";
  EXPECT_EQ(losses, eager.losses);
  const std::vector<float> params = trainer.state().full_params();
  ASSERT_EQ(params.size(), eager.params.size());
  EXPECT_EQ(std::memcmp(params.data(), eager.params.data(), params.size() * sizeof(float)), 0);
}

TEST(StepGraph, OnlyWhereAReplayIsExactlyTheStep) {
  ComputeOptions options;
  options.threads = 1;
  std::unique_ptr<Compute> cpu = make_compute(ComputeKind::kCpu, options);
  RecordingCompute recording(*cpu);
  const JobConfig job = graph_job();
  std::string why = "unset";
  {
    GraphEnv env("0");
    EXPECT_FALSE(StepGraph::wanted(job, recording, "self", &why));
    EXPECT_EQ(why, "") << "turned off, nothing to say";
  }
  {
    // The default: on where it applies, and not a word where it does not (every cpu job).
    GraphEnv env(nullptr);
    EXPECT_TRUE(StepGraph::wanted(job, recording, "self", &why));
    why = "unset";
    EXPECT_FALSE(StepGraph::wanted(job, *cpu, "self", &why));
    EXPECT_EQ(why, "") << "not asked for explicitly, nothing to say";
  }
  for (const char* unclear : {"off", "false", "2", " 0"}) {
    // On is the default: a value meant as off must not silently leave it on.
    GraphEnv env(unclear);
    try {
      StepGraph::wanted(job, recording, "self", &why);
      ADD_FAILURE() << "RM_CUDA_GRAPH='" << unclear << "' accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("RM_CUDA_GRAPH=") + unclear),
                std::string::npos)
          << e.what();
    }
  }
  GraphEnv env("1");
  EXPECT_TRUE(StepGraph::wanted(job, recording, "self", &why));
  EXPECT_FALSE(StepGraph::wanted(job, *cpu, "self", &why));
  EXPECT_NE(why.find("cpu backend records no graphs"), std::string::npos) << why;
  EXPECT_FALSE(StepGraph::wanted(job, recording, "nccl", &why));
  EXPECT_NE(why.find("more than one rank"), std::string::npos) << why;
  JobConfig sharded = job;
  sharded.parallel.shard = ShardMode::kFull;
  EXPECT_FALSE(StepGraph::wanted(sharded, recording, "self", &why));
  EXPECT_NE(why.find("parallel.shard"), std::string::npos) << why;
  JobConfig traced = job;
  traced.observability.trace = true;
  EXPECT_FALSE(StepGraph::wanted(traced, recording, "self", &why));
  EXPECT_NE(why.find("observability.trace"), std::string::npos) << why;
  JobConfig dropped = job;
  dropped.model.dropout = 0.1;  // the recorded step's masks would be replayed every step
  EXPECT_FALSE(StepGraph::wanted(dropped, recording, "self", &why));
  EXPECT_NE(why.find("model.dropout"), std::string::npos) << why;
}

}  // namespace
}  // namespace rm
