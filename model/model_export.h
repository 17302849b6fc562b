// A model's parameters as named tensors in the layout of a well-known implementation, for
// exporting (`ringmaster ckpt export`).
//
// gpt: the state dict of Hugging Face transformers' GPT2LMHeadModel, so the weights load in
//   PyTorch with model.load_state_dict(..., strict=True):
//     transformer.wte.weight [V, C]   transformer.wpe.weight [T, C]
//     transformer.h.N.ln_1.{weight,bias} [C]       transformer.h.N.ln_2.{weight,bias} [C]
//     transformer.h.N.attn.c_attn.{weight [C, 3C], bias [3C]}
//     transformer.h.N.attn.c_proj.{weight [C, C],  bias [C]}
//     transformer.h.N.mlp.c_fc.{weight [C, 4C],    bias [4C]}
//     transformer.h.N.mlp.c_proj.{weight [4C, C],  bias [C]}
//     transformer.ln_f.{weight,bias} [C]           lm_head.weight [V, C] (tied: a copy of wte)
//   GPT-2's Conv1D computes x @ W + b with W stored [in, out]; Ringmaster stores every matrix
//   [out, in] (x @ W^T), so the four projection matrices are transposed. The q, k, v split of
//   c_attn (thirds of the output, heads contiguous within each) is already GPT-2's. The
//   metadata carry "gpt2_config", a JSON GPT2Config (n_positions = seq_len; gelu_new and
//   layer_norm_epsilon 1e-5 are what the kernels compute; resid_pdrop and embd_pdrop are
//   model.dropout, attn_pdrop 0).
// mlp: Ringmaster's own tensor names and layouts (no well-known equivalent).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "configs/job_config.h"
#include "model/model.h"

namespace rm {

struct ExportedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // into the caller's params, or into `owned` (transposed copies)
  std::vector<float> owned;
};

struct ModelExport {
  std::vector<ExportedTensor> tensors;
  std::map<std::string, std::string> metadata;  // "format": "pt", and per model type above
};

// `params` is the model's flat parameter buffer (model.layout().size() floats); it must outlive
// the result, whose tensors may point into it. Throws std::invalid_argument for a model type it
// does not know.
ModelExport export_model(const ModelConfig& config, const Model& model, const float* params);

// GPT-2's names, shared by the export above and the import of GPT-2 files (init_from). `name` may
// be Ringmaster's ("h.0.attn.c_attn.weight") or the file's ("transformer.h.0.attn.c_attn.weight").
// A Conv1D matrix (the attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj weights): stored [in, out]
// by Hugging Face and [out, in] by Ringmaster, so both ways transpose it.
bool is_gpt2_conv1d_weight(const std::string& name);
// A causal-mask buffer that older GPT-2 files carry (".attn.bias", ".attn.masked_bias"): no
// weights.
bool is_gpt2_mask_buffer(const std::string& name);

}  // namespace rm
