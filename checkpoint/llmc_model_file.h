// llm.c's GPT-2 model files (gpt2_124M.bin, gpt2_124M_bf16.bin; what llm.c's train_gpt2.py and
// its trainers write), read with every field checked:
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

}  // namespace rm
