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

std::unique_ptr<Model> make_model(const ModelConfig& config, int max_batch) {
  if (config.type == "gpt") return std::make_unique<GptModel>(config, max_batch);
  if (config.type == "mlp") return std::make_unique<MlpModel>(config, max_batch);
  throw std::invalid_argument("unknown model.type '" + config.type + "'");
}

}  // namespace rm
