// llm.c's GPT-2 model files (gpt2_124M.bin, gpt2_124M_bf16.bin; what llm.c's train_gpt2.py and
// its trainers write), read with every field checked, and written (`ckpt export --format llmc`):
//
//   int32[256]  header: [0] magic 20240326, [1] version, [2] max_seq_len, [3] vocab_size,
//               [4] num_layers, [5] num_heads, [6] channels, [7] padded_vocab_size (versions
//               3 and 5; version 1 has none: its vocabulary is unpadded); the rest unused
//   parameters  little-endian float32 (versions 1, 3) or bfloat16 (version 5), one tensor after
//               another in llm.c's order (its fill_in_parameter_sizes):
//                 wte [Vp, C], wpe [maxT, C], then each of ln1w [C], ln1b [C], qkvw [3C, C],
//                 qkvb [3C], attprojw [C, C], attprojb [C], ln2w [C], ln2b [C], fcw [4C, C],
//                 fcb [4C], fcprojw [C, 4C], fcprojb [C] for all L layers in turn, then lnfw
//                 [C], lnfb [C]
//               matrices [out, in], as nn.Linear (and Ringmaster) store them; wte's rows past
//               vocab_size are padding.
//
// Knows nothing of Ringmaster's models: worker/initial_weights.h maps its tensors to these.
// Blocking, thread-safe (no shared state); throws CheckpointError naming the file (IoError for
// I/O).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint/checkpoint_error.h"

namespace rm {

inline constexpr int32_t kLlmcMagic = 20240326;

// llm.c's parameter tensors, in file order.
enum class LlmcTensor {
  kWte,
  kWpe,
  kLn1w,
  kLn1b,
  kQkvw,
  kQkvb,
  kAttprojw,
  kAttprojb,
  kLn2w,
  kLn2b,
  kFcw,
  kFcb,
  kFcprojw,
  kFcprojb,
  kLnfw,
  kLnfb,
};

// Whether llm.c keeps one `kind` a layer (kLn1w .. kFcprojb) or one in all (wte, wpe, ln_f).
inline bool llmc_per_layer(LlmcTensor kind) {
  return kind >= LlmcTensor::kLn1w && kind <= LlmcTensor::kFcprojb;
}

// Calls fn(kind, layer) for every tensor of a model of `num_layers` layers, in file order (each
// kind for all its layers in turn, as the header above lists them).
template <typename Fn>
void for_each_llmc_tensor(int64_t num_layers, Fn fn) {
  for (int k = static_cast<int>(LlmcTensor::kWte); k <= static_cast<int>(LlmcTensor::kLnfb); ++k) {
    const LlmcTensor kind = static_cast<LlmcTensor>(k);
    for (int64_t l = 0; l < (llmc_per_layer(kind) ? num_layers : 1); ++l) fn(kind, l);
  }
}

struct LlmcModelFile {
  int version = 0;
  int64_t max_seq_len = 0, vocab_size = 0, padded_vocab_size = 0, num_layers = 0, num_heads = 0,
          channels = 0;
  int element_bytes = 4;    // 2 for bf16 (version 5)
  uint64_t parameters = 0;  // elements after the header (the file is exactly this long)
};

// Whether `path` begins with llm.c's magic (false for a shorter file or one that cannot be read:
// the caller's own reader then says what it is).
bool looks_like_llmc_model_file(const std::string& path);

// Reads and checks the header against the file: the magic, a version of 1, 3 or 5, every size
// in [1, 2^24], the padded vocabulary at least the vocabulary, and the file exactly as long as
// the header says (sizes multiplied out without overflow). Reads no parameter.
LlmcModelFile read_llmc_header(const std::string& path);

struct LlmcSpan {
  uint64_t offset = 0;         // elements from the start of the parameters
  int64_t rows = 0, cols = 0;  // cols 0: a vector of `rows`; wte: vocab_size rows (no padding)
  uint64_t elements() const { return static_cast<uint64_t>(rows) * (cols ? cols : 1); }
};

// Where `tensor` of `layer` (0 for wte, wpe, lnfw, lnfb) lies. Throws std::out_of_range for a
// layer outside [0, num_layers).
LlmcSpan llmc_span(const LlmcModelFile& file, LlmcTensor tensor, int64_t layer = 0);

// `count` parameters from element `first` as floats (bf16 widened exactly). Throws
// CheckpointError for a range past the parameters.
void read_llmc_parameters(const std::string& path, const LlmcModelFile& file, uint64_t first,
                          uint64_t count, float* dst);

// GPT-2's name of llm.c's tensor `kind` of `layer`, as its state dict has it without the
// "transformer." prefix (and Ringmaster's GPT lays it out): "wte", "wpe", "h.<layer>.ln_1.weight",
// "h.<layer>.attn.c_attn.weight", ..., "ln_f.bias". The same std::out_of_range as llmc_span for a
// negative layer, or a non-zero one of wte, wpe, ln_f.
std::string llmc_gpt2_name(LlmcTensor kind, int64_t layer = 0);

// llm.c's padding of the vocabulary: up to a multiple of 128 (50257 -> 50304), as its
// train_gpt2.py writes files.
int64_t llmc_padded_vocab(int64_t vocab_size);

// The file of a model of `shape` (version 3: fp32, or 5: bf16 rounded to nearest even; the
// parameter count is worked out here), its tensors from `tensor(kind, layer)`: a pointer to
// llmc_span(kind, layer).elements() floats (wte: vocab_size rows; the padding rows are written as
// zeros, as llm.c's own files have them). Written atomically and durably (io/atomic_file.h), a
// tensor at a time; throws CheckpointError for a shape read_llmc_header would refuse, IoError
// for I/O.
using LlmcTensorSource = std::function<const float*(LlmcTensor kind, int64_t layer)>;
void write_llmc_model_file(const std::string& path, LlmcModelFile shape,
                           const LlmcTensorSource& tensor);

}  // namespace rm
