// Fuzz target: llm.c model files (llmc_model_file.h), as `model.init_from` reads them.
//
// Input: a whole llm.c model file, written to the scratch directory as `name` and read with
// read_llmc_header().
//
// Contract (fuzz/fuzz_target.h): accepted = the header reads; rejected = CheckpointError whose
// message starts with the file's path. When it reads, the header must describe the file (its
// size), the tensors' spans must tile the parameters in llm.c's order (wte's padding rows
// between wte and wpe), every span must read back as the file's own values (bf16 widened), and
// a read past the parameters must be refused with CheckpointError. Anything else is a finding:
// another exception, a disagreement (std::logic_error), a crash, a sanitizer report, a hang, an
// allocation the file's size does not justify.
//
// The fuzzer is built with clang (cmake/fuzz.cmake); in every build fuzz/corpus_replay_test.cc
// replays fuzz/corpora/llmc_model/ through it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/llmc_model_file.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/scratch_dir.h"

namespace rm {
namespace {

constexpr size_t kHeader = 1024;

// The file's own value of parameter `i`, widened as the reader must.
float file_value(std::string_view file, const LlmcModelFile& f, uint64_t i) {
  uint32_t bits = 0;
  if (f.element_bytes == 4) {
    std::memcpy(&bits, file.data() + kHeader + i * 4, 4);
  } else {
    uint16_t half = 0;
    std::memcpy(&half, file.data() + kHeader + i * 2, 2);
    bits = static_cast<uint32_t>(half) << 16;
  }
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Every tensor in file order: where it starts, how many elements it covers in the file.
void check_spans(const std::string& path, const LlmcModelFile& f, std::string_view file) {
  fuzz::require(kHeader + f.parameters * f.element_bytes == file.size(),
                "the header's parameter count does not match the file size");
  uint64_t at = 0;
  auto next = [&](LlmcTensor t, int64_t layer, uint64_t covers) {
    const LlmcSpan s = llmc_span(f, t, layer);
    fuzz::require(s.offset == at, "tensor " + std::to_string(static_cast<int>(t)) + " layer " +
                                      std::to_string(layer) + " is out of place");
    std::vector<float> v(s.elements());
    read_llmc_parameters(path, f, s.offset, v.size(), v.data());
    for (uint64_t i = 0; i < v.size(); ++i) {
      const float want = file_value(file, f, s.offset + i);
      fuzz::require(std::memcmp(&v[i], &want, 4) == 0, "a value reads back differently");
    }
    at += covers;
  };
  next(LlmcTensor::kWte, 0, static_cast<uint64_t>(f.padded_vocab_size * f.channels));
  next(LlmcTensor::kWpe, 0, static_cast<uint64_t>(f.max_seq_len * f.channels));
  for (int k = static_cast<int>(LlmcTensor::kLn1w); k <= static_cast<int>(LlmcTensor::kFcprojb);
       ++k) {
    for (int64_t l = 0; l < f.num_layers; ++l) {
      const LlmcTensor t = static_cast<LlmcTensor>(k);
      next(t, l, llmc_span(f, t, l).elements());
    }
  }
  next(LlmcTensor::kLnfw, 0, static_cast<uint64_t>(f.channels));
  next(LlmcTensor::kLnfb, 0, static_cast<uint64_t>(f.channels));
  fuzz::require(at == f.parameters, "the tensors do not tile the parameters");
  try {
    float x;
    read_llmc_parameters(path, f, f.parameters, 1, &x);
  } catch (const CheckpointError& e) {
    fuzz::rejected(e.what(), path + ": ");
    return;
  }
  fuzz::require(false, "a read past the parameters was not refused");
}

}  // namespace

fuzz::FuzzOutcome fuzz::run_fuzz_input(std::string_view input, const std::string& name) {
  const std::string path = fuzz::write_scratch_file(name, input);
  std::optional<LlmcModelFile> file;
  try {
    file = read_llmc_header(path);
  } catch (const CheckpointError& e) {
    return fuzz::rejected(e.what(), path + ": ");
  }
  check_spans(path, *file, input);
  return fuzz::accepted();
}

}  // namespace rm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rm::fuzz::run_fuzz_input({reinterpret_cast<const char*>(data), size}, "input");
  return 0;
}
