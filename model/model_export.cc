#include "model/model_export.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace rm {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Ringmaster's [out, in] matrix as GPT-2's Conv1D [in, out].
ExportedTensor transposed(std::string name, const TensorSpec& t, const float* params) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  ExportedTensor e{std::move(name), {cols, rows}, nullptr, {}};
  e.owned.resize(t.numel);
  const float* src = params + t.offset;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) e.owned[c * rows + r] = src[r * cols + c];
  }
  e.data = e.owned.data();
  return e;
}

ModelExport export_gpt2(const ModelConfig& config, const Model& model, const float* params) {
  ModelExport out;
  const TensorSpec* wte = nullptr;
  for (const TensorSpec& t : model.layout().tensors()) {
    const bool conv1d = is_gpt2_conv1d_weight(t.name);
    std::string name = "transformer." + t.name;
    if (t.name == "wte" || t.name == "wpe") name += ".weight";
    if (t.name == "wte") wte = &t;
    if (conv1d) {
      out.tensors.push_back(transposed(std::move(name), t, params));
    } else {
      out.tensors.push_back({std::move(name), t.shape, params + t.offset, {}});
    }
  }
  if (!wte) throw std::logic_error("export: gpt model without wte");
  out.tensors.push_back({"lm_head.weight", wte->shape, params + wte->offset, {}});

  const nlohmann::json gpt2_config = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", config.vocab_size},
      {"n_positions", config.seq_len},
      {"n_ctx", config.seq_len},
      {"n_embd", config.width},
      {"n_layer", config.layers},
      {"n_head", config.heads},
      {"n_inner", nullptr},
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", config.dropout},  // model.dropout's sites (model/gpt_model.h)
      {"embd_pdrop", config.dropout},
      {"attn_pdrop", 0.0},
      {"tie_word_embeddings", true},
  };
  out.metadata["gpt2_config"] = gpt2_config.dump();
  return out;
}

}  // namespace

bool is_gpt2_conv1d_weight(const std::string& name) {
  return ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_proj.weight") ||
         ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_proj.weight");
}

bool is_gpt2_mask_buffer(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
}

ModelExport export_model(const ModelConfig& config, const Model& model, const float* params) {
  ModelExport out;
  switch (config.type) {
    case ModelType::kGpt:
      out = export_gpt2(config, model, params);
      break;
    case ModelType::kMlp:
      for (const TensorSpec& t : model.layout().tensors()) {
        out.tensors.push_back({t.name, t.shape, params + t.offset, {}});
      }
      break;
  }
  out.metadata["format"] = "pt";  // what Hugging Face's loaders expect of a PyTorch-origin file
  out.metadata["ringmaster.model"] = choice_name(config.type);
  return out;
}

}  // namespace rm
