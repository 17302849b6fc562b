#include "model/model.h"

#include <limits>
#include <stdexcept>

#include "kernels/compute_factory.h"
#include "model/gpt_model.h"
#include "model/mlp_model.h"

namespace rm {

Model::Model(Compute* compute) {
  if (compute == nullptr) {
    owned_compute_ = make_compute(ComputeKind::kCpu, ComputeOptions{/*threads=*/0});
    compute = owned_compute_.get();
  }
  compute_ = compute;
}

namespace {

void require_fp32(const Model& m) {
  if (m.precision() != Precision::kFp32) {
    throw std::logic_error("Model: the flat-buffer conveniences take float parameters");
  }
}

}  // namespace

double Model::train_flops_per_sample() const {
  double flops = 0;
  for (const GemmShape& g : train_gemms(1)) flops += g.flops();
  return flops;
}

double Model::forward_backward(ParamAccess& access, const int* inputs, const int* targets, int B,
                               float grad_scale, const MicroBatchKey& key) {
  queue_forward_backward(access, inputs, targets, B, grad_scale, key);
  return take_loss_sum();
}

double Model::forward_backward(const float* params, float* grads, const int* inputs,
                               const int* targets, int B, float grad_scale,
                               const MicroBatchKey& key) {
  require_fp32(*this);
  FlatParamAccess access(units(), params, grads);
  return forward_backward(access, inputs, targets, B, grad_scale, key);
}

double Model::forward_loss(const float* params, const int* inputs, const int* targets, int B) {
  require_fp32(*this);
  FlatParamAccess access(units(), params, nullptr);
  return forward_loss(access, inputs, targets, B);
}

const float* Model::next_token_logits(const float* params, const int* context, int len) {
  require_fp32(*this);
  FlatParamAccess access(units(), params, nullptr);
  return next_token_logits(access, context, len);
}

std::vector<double> Model::span_losses(ParamAccess&, const int*, const int*, int, int,
                                       const std::vector<TokenSpan>&) {
  throw std::logic_error("span_losses: this model predicts one token a sample, not each position");
}

std::vector<double> Model::span_losses(const float* params, const int* inputs, const int* targets,
                                       int B, int len, const std::vector<TokenSpan>& spans) {
  require_fp32(*this);
  FlatParamAccess access(units(), params, nullptr);
  return span_losses(access, inputs, targets, B, len, spans);
}

std::unique_ptr<Model> make_model(const ModelConfig& config, int max_batch, Compute* compute,
                                  Precision precision) {
  const bool use_bf16 = precision == Precision::kBf16;
  switch (config.type) {
    case ModelType::kGpt:
      if (use_bf16) return std::make_unique<GptModel<bf16>>(config, max_batch, compute);
      return std::make_unique<GptModel<float>>(config, max_batch, compute);
    case ModelType::kMlp:
      if (use_bf16) return std::make_unique<MlpModel<bf16>>(config, max_batch, compute);
      return std::make_unique<MlpModel<float>>(config, max_batch, compute);
  }
  throw std::invalid_argument("unknown model.type");
}

ModelFootprint ModelFootprint::unbounded() {
  ModelFootprint f;
  f.param_floats = f.arena_bytes = std::numeric_limits<double>::infinity();
  for (double& u : f.units) u = f.param_floats;
  return f;
}

ParamLayout model_param_layout(const ModelConfig& config) {
  switch (config.type) {  // the layout does not depend on the compute precision
    case ModelType::kGpt:
      return GptModel<float>::param_layout(config);
    case ModelType::kMlp:
      return MlpModel<float>::param_layout(config);
  }
  throw std::invalid_argument("unknown model.type");
}

ModelFootprint model_footprint(const ModelConfig& config, int max_batch, Precision precision) {
  const bool use_bf16 = precision == Precision::kBf16;
  switch (config.type) {
    case ModelType::kGpt:
      return use_bf16 ? GptModel<bf16>::footprint(config, max_batch)
                      : GptModel<float>::footprint(config, max_batch);
    case ModelType::kMlp:
      return use_bf16 ? MlpModel<bf16>::footprint(config, max_batch)
                      : MlpModel<float>::footprint(config, max_batch);
  }
  throw std::invalid_argument("unknown model.type");
}

}  // namespace rm
