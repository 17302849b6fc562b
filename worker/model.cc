#include "worker/model.h"

#include <stdexcept>

#include "worker/gpt_model.h"
#include "worker/mlp_model.h"

namespace rm {

double Model::train_flops_per_sample() const {
  double flops = 0;
  for (const GemmShape& g : train_gemms(1)) flops += g.flops();
  return flops;
}

double Model::forward_backward(const float* params, float* grads, const int* inputs,
                               const int* targets, int B, float grad_scale) {
  FlatParamAccess access(units(), params, grads);
  return forward_backward(access, inputs, targets, B, grad_scale);
}

double Model::forward_loss(const float* params, const int* inputs, const int* targets, int B) {
  FlatParamAccess access(units(), params, nullptr);
  return forward_loss(access, inputs, targets, B);
}

const float* Model::next_token_logits(const float* params, const int* context, int len) {
  FlatParamAccess access(units(), params, nullptr);
  return next_token_logits(access, context, len);
}

std::unique_ptr<Model> make_model(const ModelConfig& config, int max_batch) {
  if (config.type == "gpt") return std::make_unique<GptModel>(config, max_batch);
  if (config.type == "mlp") return std::make_unique<MlpModel>(config, max_batch);
  throw std::invalid_argument("unknown model.type '" + config.type + "'");
}

}  // namespace rm
