#include "checkpoint/llmc_model_file.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/posix_io.h"
#include "kernels/bf16.h"

namespace rm {
namespace {

constexpr uint64_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

[[noreturn]] void refuse_llmc(const std::string& path, const std::string& what) {
  throw CheckpointError(path + ": " + what);
}

// The shape of one layer's tensor of `kind` (kLn1w .. kFcprojb) for C channels, at `offset`:
// the one place the block's sizes are written (llm.c's fill_in_parameter_sizes).
LlmcSpan llmc_layer_span(LlmcTensor kind, int64_t C, uint64_t offset) {
  switch (kind) {
    case LlmcTensor::kQkvw:
      return {offset, 3 * C, C};
    case LlmcTensor::kQkvb:
      return {offset, 3 * C, 0};
    case LlmcTensor::kAttprojw:
      return {offset, C, C};
    case LlmcTensor::kFcw:
      return {offset, 4 * C, C};
    case LlmcTensor::kFcb:
      return {offset, 4 * C, 0};
    case LlmcTensor::kFcprojw:
      return {offset, C, 4 * C};
    default:
      return {offset, C, 0};  // the layernorms' weights and biases, attprojb, fcprojb
  }
}

using u128 = unsigned __int128;

// Refuses (CheckpointError naming `path` and the field) a size outside [1, 2^24] or a padded
// vocabulary below the vocabulary: no llm.c file has them, and within them llmc_elements fits.
void check_llmc_sizes(const std::string& path, const LlmcModelFile& f) {
  const struct {
    const char* name;
    int64_t value;
  } fields[] = {{"max_seq_len", f.max_seq_len}, {"vocab_size", f.vocab_size},
                {"num_layers", f.num_layers},   {"num_heads", f.num_heads},
                {"channels", f.channels},       {"padded_vocab_size", f.padded_vocab_size}};
  for (const auto& field : fields) {
    if (field.value < 1 || field.value > (int64_t{1} << 24)) {
      refuse_llmc(path, std::string("an llm.c model file whose ") + field.name + " is " +
                            std::to_string(field.value) + " (not in 1 .. 2^24)");
    }
  }
  if (f.padded_vocab_size < f.vocab_size) {
    refuse_llmc(path, "an llm.c model file whose padded_vocab_size " +
                          std::to_string(f.padded_vocab_size) + " is smaller than its vocab_size " +
                          std::to_string(f.vocab_size));
  }
}

// The parameters a file of f's sizes holds (checked sizes). 128 bits: each size is below 2^25, a
// layer's matrices below 2^53, all layers below 2^78.
u128 llmc_elements(const LlmcModelFile& f) {
  const u128 c = static_cast<u128>(f.channels);
  return static_cast<u128>(f.padded_vocab_size) * c + static_cast<u128>(f.max_seq_len) * c +
         static_cast<u128>(f.num_layers) * (12 * c * c + 13 * c) + 2 * c;
}

}  // namespace

bool looks_like_llmc_model_file(const std::string& path) {
  try {
    io::Fd fd = io::open_read(path);
    if (io::regular_file_size(fd.get(), path) < sizeof(int32_t)) return false;
    int32_t magic = 0;
    io::pread_exact(fd.get(), &magic, sizeof magic, 0, path);
    return magic == kLlmcMagic;
  } catch (const std::exception&) {
    return false;
  }
}

LlmcModelFile read_llmc_header(const std::string& path) {
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  if (size < kLlmcHeaderBytes) {
    refuse_llmc(path, std::to_string(size) + " bytes, shorter than an llm.c model file's header (" +
                          std::to_string(kLlmcHeaderBytes) + ")");
  }
  int32_t h[256];
  io::pread_exact(fd.get(), h, sizeof h, 0, path);
  if (h[0] != kLlmcMagic)
    refuse_llmc(path, "not an llm.c model file (magic " + std::to_string(h[0]) + ")");
  LlmcModelFile f;
  f.version = h[1];
  if (f.version != 1 && f.version != 3 && f.version != 5) {
    refuse_llmc(path, "an llm.c model file of version " + std::to_string(f.version) +
                          ", not 1 or 3 (fp32) or 5 (bf16)");
  }
  f.max_seq_len = h[2];
  f.vocab_size = h[3];
  f.num_layers = h[4];
  f.num_heads = h[5];
  f.channels = h[6];
  f.padded_vocab_size = f.version == 1 ? f.vocab_size : h[7];
  f.element_bytes = f.version == 5 ? 2 : 4;
  check_llmc_sizes(path, f);
  const u128 elements = llmc_elements(f);
  const u128 want = kLlmcHeaderBytes + elements * static_cast<u128>(f.element_bytes);
  if (want != size) {
    const std::string says =
        want >> 63 ? std::string("more than 2^63") : std::to_string(static_cast<uint64_t>(want));
    refuse_llmc(path,
                "an llm.c model file of " + std::to_string(size) + " bytes, where its header (" +
                    std::to_string(f.num_layers) + " layers, " + std::to_string(f.channels) +
                    " channels, vocabulary " + std::to_string(f.vocab_size) + " padded to " +
                    std::to_string(f.padded_vocab_size) + ", " + std::to_string(f.max_seq_len) +
                    " positions, " + (f.element_bytes == 2 ? "bf16" : "fp32") + ") says " + says);
  }
  f.parameters = static_cast<uint64_t>(elements);
  return f;
}

LlmcSpan llmc_span(const LlmcModelFile& f, LlmcTensor tensor, int64_t layer) {
  // Every product below is at most the file's parameter count, checked to fit.
  const uint64_t c = static_cast<uint64_t>(f.channels);
  const uint64_t layers = static_cast<uint64_t>(f.num_layers);
  if (layer < 0 || (llmc_per_layer(tensor) ? layer >= f.num_layers : layer != 0)) {
    throw std::out_of_range("llmc_span: layer " + std::to_string(layer));
  }
  const int64_t C = f.channels;
  uint64_t at = static_cast<uint64_t>(f.padded_vocab_size) * c;  // after wte
  switch (tensor) {
    case LlmcTensor::kWte:
      return {0, f.vocab_size, C};
    case LlmcTensor::kWpe:
      return {at, f.max_seq_len, C};
    default:
      break;
  }
  at += static_cast<uint64_t>(f.max_seq_len) * c;
  for (int k = static_cast<int>(LlmcTensor::kLn1w); k <= static_cast<int>(LlmcTensor::kFcprojb);
       ++k) {
    const LlmcTensor kind = static_cast<LlmcTensor>(k);
    const uint64_t per_layer = llmc_layer_span(kind, C, 0).elements();
    if (kind == tensor) {
      return llmc_layer_span(kind, C, at + static_cast<uint64_t>(layer) * per_layer);
    }
    at += layers * per_layer;
  }
  return {tensor == LlmcTensor::kLnfw ? at : at + c, C, 0};
}

void read_llmc_parameters(const std::string& path, const LlmcModelFile& f, uint64_t first,
                          uint64_t count, float* dst) {
  if (first > f.parameters || count > f.parameters - first) {
    refuse_llmc(path, "parameters [" + std::to_string(first) + ", +" + std::to_string(count) +
                          ") past the file's " + std::to_string(f.parameters));
  }
  io::Fd fd = io::open_read(path);
  const uint64_t at = kLlmcHeaderBytes + first * f.element_bytes;
  if (f.element_bytes == 4) {
    io::pread_exact(fd.get(), dst, count * sizeof(float), at, path);
    return;
  }
  // bf16: the upper half of a float32's bits, widened exactly; a piece at a time.
  std::vector<uint16_t> piece(std::min<uint64_t>(count, uint64_t{1} << 20));
  for (uint64_t done = 0; done < count; done += piece.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), count - done));
    io::pread_exact(fd.get(), piece.data(), n * 2, at + done * 2, path);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(piece[i]) << 16;
      std::memcpy(dst + done + i, &bits, sizeof bits);
    }
  }
}

std::string llmc_gpt2_name(LlmcTensor kind, int64_t layer) {
  static const char* const kBlock[] = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  const int k = static_cast<int>(kind);
  if (layer < 0 || (!llmc_per_layer(kind) && layer != 0)) {
    throw std::out_of_range("llmc_gpt2_name: layer " + std::to_string(layer));
  }
  switch (kind) {
    case LlmcTensor::kWte:
      return "wte";
    case LlmcTensor::kWpe:
      return "wpe";
    case LlmcTensor::kLnfw:
      return "ln_f.weight";
    case LlmcTensor::kLnfb:
      return "ln_f.bias";
    default:
      return "h." + std::to_string(layer) + "." + kBlock[k - static_cast<int>(LlmcTensor::kLn1w)];
  }
}

int64_t llmc_padded_vocab(int64_t vocab_size) {
  return (vocab_size + 127) / 128 * 128;
}

void write_llmc_model_file(const std::string& path, LlmcModelFile f,
                           const LlmcTensorSource& tensor) {
  if (f.version != 3 && f.version != 5) {
    refuse_llmc(path, "llm.c model files are written as version 3 (fp32) or 5 (bf16), not " +
                          std::to_string(f.version));
  }
  check_llmc_sizes(path, f);
  f.element_bytes = f.version == 5 ? 2 : 4;
  f.parameters = static_cast<uint64_t>(llmc_elements(f));
  int32_t header[256] = {};
  const int64_t fields[] = {kLlmcMagic,   f.version,   f.max_seq_len, f.vocab_size,
                            f.num_layers, f.num_heads, f.channels,    f.padded_vocab_size};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
    header[i] = static_cast<int32_t>(fields[i]);
  }
  AtomicFileWriter out(path);
  out.append(header, sizeof header);
  // Each tensor in file order, converted a piece at a time (bf16: the float rounded to nearest
  // even, as llm.c's train_gpt2.py writes its _bf16 files).
  std::vector<uint16_t> half;
  const auto put = [&](const float* data, uint64_t n) {
    if (f.element_bytes == 4) {
      out.append(data, n * sizeof(float));
      return;
    }
    for (uint64_t done = 0; done < n; done += half.size()) {
      half.resize(static_cast<size_t>(std::min<uint64_t>(n - done, uint64_t{1} << 20)));
      for (size_t i = 0; i < half.size(); ++i) half[i] = to_bf16(data[done + i]).bits;
      out.append(half.data(), half.size() * 2);
    }
  };
  const std::vector<float> padding((f.padded_vocab_size - f.vocab_size) * f.channels, 0.0f);
  for_each_llmc_tensor(f.num_layers, [&](LlmcTensor kind, int64_t layer) {
    put(tensor(kind, layer), llmc_span(f, kind, layer).elements());
    if (kind == LlmcTensor::kWte) put(padding.data(), padding.size());  // wte's padding rows
  });
  out.commit();
}

}  // namespace rm
