// How a model type's static footprint() (model.h) is worked out without building the model: its
// own code lays out and plans models of one and two layers (Model::lay_out, Model::plan into a
// sizing DeviceArena, Model::Activations), and every further layer adds what the second added --
// the same tensors, and the same arrays (each arena slice is padded to the alignment, so its bytes
// do not depend on where it starts). The units are those of the two-layer model (ModelFootprint).
// A model type befriends this template for the private lay_out/plan it reads.
#pragma once

#include "kernels/device_arena.h"
#include "model/model.h"

namespace rm {

// `plan_args` are passed on to Model::plan after max_batch (gpt: the attention's buffer sizes).
template <typename Model, typename... PlanArgs>
ModelFootprint footprint_from_layout(const ModelConfig& config, int max_batch,
                                     const PlanArgs&... plan_args) {
  ModelFootprint f;
  double params[2], arena[2];
  for (int layers = 1; layers <= 2; ++layers) {
    const typename Model::Layout l = Model::lay_out(config, layers);
    DeviceArena sizing;
    typename Model::Activations x;
    Model::plan(sizing, x, config, layers, max_batch, plan_args...);
    params[layers - 1] = static_cast<double>(l.params.size());
    arena[layers - 1] = static_cast<double>(sizing.bytes());
    if (layers == 2) {
      for (int u = 0; u < 4; ++u) f.units[u] = static_cast<double>(l.units[u].size());
    }
  }
  const double more = config.layers - 1.0;
  f.param_floats = params[0] + more * (params[1] - params[0]);
  f.arena_bytes = arena[0] + more * (arena[1] - arena[0]);
  return f;
}

}  // namespace rm
