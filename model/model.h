// The interface the trainer, evaluator and sampler use for any model.
//
// Contract:
// - Parameters and gradients are flat buffers laid out by layout(), reached unit by unit
//   through a ParamAccess (param_access.h), so the trainer decides whether they are whole or
//   sharded. The model owns only its activation and scratch memory, planned once for
//   max_batch() samples at construction. Nothing on the step path allocates.
// - Compute: every kernel runs through the model's Compute (kernels/compute.h), and parameter,
//   gradient and activation memory is that backend's. Parameters and activations are stored in
//   precision() (float or bf16), gradients in float. Token ids, losses and the logits of
//   next_token_logits are host memory: the model moves them.
// - forward_backward ACCUMULATES into the gradient buffers (+=) so micro-batches can be
//   summed. grad_scale multiplies d(loss sum)/d(logits), so the caller chooses the
//   normalisation (1 / targets in the global batch gives the gradient of the mean loss).
// - During backward, gradient units are released from the last unit to the first as soon as
//   each is final, so a communicator can reduce them while backward continues.
// - A model instance is not thread-safe: one step at a time.
// - Training is random only where the job asks (model.dropout), and then only through draws keyed
//   by the micro-batch (MicroBatchKey); evaluation and sampling draw nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "configs/job_config.h"
#include "kernels/compute.h"
#include "model/param_access.h"
#include "model/param_layout.h"

namespace rm {

// What keys a training micro-batch's random draws (dropout, kernels/dropout_mask.h): the job's
// seed and the global index of the micro-batch's first sequence in the data order
// (worker/data/sample_order.h). A sequence then draws the same on any number of ranks, in any
// micro-batch of its step, when its forward is recomputed and when a run resumes.
struct MicroBatchKey {
  uint64_t seed = 0;
  uint64_t first_sample = 0;
};

// Positions [first, first + count) of row `row` of a batch: the next-token predictions whose
// loss span_losses sums.
struct TokenSpan {
  int row = 0, first = 0, count = 0;
};

// One sgemm of a training step, for the benchmark's flop count and sgemm baseline.
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int64_t count = 1;          // how many times per micro-batch
  bool per_head = false;      // issued as `count` independent sgemms in parallel (attention)
  double flops() const { return 2.0 * m * n * k * static_cast<double>(count); }
};


// What a model of a given shape needs, worked out without building it: from the code that lays
// out and plans a live model (each model type's static footprint()), so the two cannot drift.
// Doubles, not size_t: a shape too large to address still gets an answer, and one too large to
// even add up is unbounded() -- infinite, which fits nowhere.
struct ModelFootprint {
  double param_floats = 0;  // layout().size()
  double arena_bytes = 0;   // arena_bytes(): activations and backward scratch at max_batch
  // Parameter floats of the units of the same shape with two layers: the first unit, layer 1,
  // layer 2, the last unit. A model of L layers has units first, layer 1, (L - 1) x layer 2,
  // last.
  double units[4] = {0, 0, 0, 0};
  static ModelFootprint unbounded();
};

class Model {
 public:
  virtual ~Model() = default;

  Compute& compute() const { return *compute_; }
  virtual Precision precision() const = 0;

  virtual const ParamLayout& layout() const = 0;
  // Contiguous, in order, covering the layout exactly.
  virtual const std::vector<ParamUnit>& units() const = 0;
  // What unit u holds, for traces: "embeddings", "block 3", ...
  virtual std::string unit_name(int u) const = 0;
  // Fills elements [begin, end) of the layout into params[0, end - begin) (host, float) from the
  // counter-based RNG keyed by (seed, flat index): the same values whichever rank asks and for
  // whichever slice, so a ZeRO-3 rank makes only its shard, and a GPU's upload goes in pieces --
  // never a host copy of the whole model a rank.
  virtual void init_params(float* params, size_t begin, size_t end, uint64_t seed) const = 0;
  // The whole layout.
  void init_params(float* params, uint64_t seed) const {
    init_params(params, 0, layout().size(), seed);
  }

  virtual int max_batch() const = 0;
  virtual int seq_len() const = 0;
  virtual int vocab_size() const = 0;
  // Loss terms one sample contributes: seq_len for a GPT (every position), 1 for the MLP.
  virtual int targets_per_sample() const = 0;

  // inputs, targets: [B, seq_len] token ids, B <= max_batch(). Queues one micro-batch's forward
  // and backward and adds its loss SUM (nats) to a total kept on the compute backend, so that
  // nothing waits for a device between the forward and the backward, or between micro-batches
  // (LayerKernels::queue_cross_entropy_forward_backward). take_loss_sum() returns the total of
  // the micro-batches queued since the last take and resets it: the step's one wait for the
  // loss, at its end. A target >= vocab_size() throws std::out_of_range, from take_loss_sum() on
  // a device.
  virtual void queue_forward_backward(ParamAccess& access, const int* inputs, const int* targets,
                                      int B, float grad_scale, const MicroBatchKey& key) = 0;
  virtual double take_loss_sum() = 0;
  // The total so far into *dst, memory of the compute backend, without a wait and without
  // resetting it (NaN after a bad target): the loss a step's optimizer update is guarded by
  // (kernels/step_scalars.h), read on the device before the host has it.
  virtual void queue_loss_copy(double* dst) = 0;
  // queue_forward_backward then take_loss_sum(): one micro-batch's loss sum.
  double forward_backward(ParamAccess& access, const int* inputs, const int* targets, int B,
                          float grad_scale, const MicroBatchKey& key = {});
  virtual double forward_loss(ParamAccess& access, const int* inputs, const int* targets,
                              int B) = 0;
  // Evaluation of rows shorter than seq_len() (multiple-choice scoring, worker/evaluate.h):
  // inputs and targets are [B, len], len <= seq_len(), B <= max_batch(); returns, per span, the
  // sum over its positions of -log p(target | the row's inputs up to and including that
  // position), in nats. A model that reads a position's past only (a causal GPT) scores a
  // position the same whatever the row holds after it. Only the spans' targets are read (each
  // < vocab_size(), else std::out_of_range). Models that predict one token per sample (the mlp)
  // throw std::logic_error.
  virtual std::vector<double> span_losses(ParamAccess& access, const int* inputs,
                                          const int* targets, int B, int len,
                                          const std::vector<TokenSpan>& spans);
  // Logits [vocab] for the token that follows context[0..len). len >= 1; only the last
  // seq_len() tokens are used. The pointer stays valid until the next call.
  virtual const float* next_token_logits(ParamAccess& access, const int* context, int len) = 0;

  // Conveniences over whole float buffers in the compute's memory (FlatParamAccess); fp32
  // models only.
  double forward_backward(const float* params, float* grads, const int* inputs, const int* targets,
                          int B, float grad_scale, const MicroBatchKey& key = {});
  double forward_loss(const float* params, const int* inputs, const int* targets, int B);
  const float* next_token_logits(const float* params, const int* context, int len);
  std::vector<double> span_losses(const float* params, const int* inputs, const int* targets, int B,
                                  int len, const std::vector<TokenSpan>& spans);

  // The sgemms of one micro-batch's forward + backward, and the flops of one training sample
  // (forward + backward, GEMMs only, i.e. the usual 6N + attention accounting).
  virtual std::vector<GemmShape> train_gemms(int B) const = 0;
  double train_flops_per_sample() const;
  // Bytes of the one allocation that holds every activation and the backward scratch.
  virtual size_t arena_bytes() const = 0;

 protected:
  // compute == nullptr: the model makes and owns a cpu Compute that leaves the thread count as
  // it is (tools and tests).
  explicit Model(Compute* compute);

 private:
  std::unique_ptr<Compute> owned_compute_;
  Compute* compute_;
};

// compute == nullptr: a cpu Compute of the model's own.
std::unique_ptr<Model> make_model(const ModelConfig& config, int max_batch,
                                  Compute* compute = nullptr,
                                  Precision precision = Precision::kFp32);

// The parameter layout (names, shapes, offsets) of the model make_model() would build, without
// building it: what a file of weights is matched against before a run starts.
ParamLayout model_param_layout(const ModelConfig& config);

// The footprint of the model make_model() would build (its own allocations only: not those of
// the kernels behind its Compute). Allocates nothing large.
ModelFootprint model_footprint(const ModelConfig& config, int max_batch, Precision precision);

}  // namespace rm
