// Writing llm.c model files (`ckpt export --format llmc`) against the checking reader: every
// tensor where llm.c's order puts it, the vocabulary's padding zero, bf16 rounded to nearest
// even, GPT-2's names for each tensor, and shapes llm.c has no file for refused.
#include "checkpoint/llmc_model_file.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_test_util.h"
#include "kernels/bf16.h"

namespace rm {
namespace {

LlmcModelFile small_shape(int version) {
  LlmcModelFile f;
  f.version = version;
  f.max_seq_len = 5;
  f.vocab_size = 300;
  f.padded_vocab_size = llmc_padded_vocab(300);
  f.num_layers = 2;
  f.num_heads = 2;
  f.channels = 8;
  return f;
}

// Distinct values for every (kind, layer), as llmc_span sizes them: the tensor's own number in
// the integer part, so a tensor read from another's place shows.
std::map<std::pair<int, int64_t>, std::vector<float>> tensors_of(const LlmcModelFile& f) {
  std::map<std::pair<int, int64_t>, std::vector<float>> out;
  for_each_llmc_tensor(f.num_layers, [&](LlmcTensor kind, int64_t l) {
    const int k = static_cast<int>(kind);
    std::vector<float> v(llmc_span(f, kind, l).elements());
    for (size_t i = 0; i < v.size(); ++i) v[i] = 100.0f * k + 10.0f * l + 0.001f * i + 0.0001f;
    out[{k, l}] = std::move(v);
  });
  return out;
}

TEST(LlmcModelFile, PadsTheVocabularyAsLlmcDoes) {
  EXPECT_EQ(llmc_padded_vocab(50257), 50304);
  EXPECT_EQ(llmc_padded_vocab(256), 256);
  EXPECT_EQ(llmc_padded_vocab(300), 384);
}

TEST(LlmcModelFile, NamesEachTensorAsGpt2Does) {
  EXPECT_EQ(llmc_gpt2_name(LlmcTensor::kWte), "wte");
  EXPECT_EQ(llmc_gpt2_name(LlmcTensor::kWpe), "wpe");
  EXPECT_EQ(llmc_gpt2_name(LlmcTensor::kLn1w, 3), "h.3.ln_1.weight");
  EXPECT_EQ(llmc_gpt2_name(LlmcTensor::kQkvw, 0), "h.0.attn.c_attn.weight");
  EXPECT_EQ(llmc_gpt2_name(LlmcTensor::kAttprojb, 1), "h.1.attn.c_proj.bias");
  EXPECT_EQ(llmc_gpt2_name(LlmcTensor::kFcprojw, 11), "h.11.mlp.c_proj.weight");
  EXPECT_EQ(llmc_gpt2_name(LlmcTensor::kLnfb), "ln_f.bias");
  EXPECT_THROW(llmc_gpt2_name(LlmcTensor::kWte, 1), std::out_of_range);
  EXPECT_THROW(llmc_gpt2_name(LlmcTensor::kLn2b, -1), std::out_of_range);
}

TEST(LlmcModelFile, WrittenFilesReadBackTensorByTensorInFp32AndBf16) {
  TempDir dir;
  for (const int version : {3, 5}) {
    SCOPED_TRACE(version);
    const LlmcModelFile shape = small_shape(version);
    const auto tensors = tensors_of(shape);
    const std::string path = dir.file("model-" + std::to_string(version) + ".bin");
    write_llmc_model_file(path, shape, [&](LlmcTensor kind, int64_t layer) {
      return tensors.at({static_cast<int>(kind), layer}).data();
    });
    ASSERT_TRUE(looks_like_llmc_model_file(path));
    const LlmcModelFile f = read_llmc_header(path);
    EXPECT_EQ(f.version, version);
    EXPECT_EQ(f.element_bytes, version == 5 ? 2 : 4);
    EXPECT_EQ(f.max_seq_len, 5);
    EXPECT_EQ(f.vocab_size, 300);
    EXPECT_EQ(f.padded_vocab_size, 384);
    EXPECT_EQ(f.num_layers, 2);
    EXPECT_EQ(f.num_heads, 2);
    EXPECT_EQ(f.channels, 8);
    for (const auto& [key, want] : tensors) {
      const LlmcSpan span = llmc_span(f, static_cast<LlmcTensor>(key.first), key.second);
      std::vector<float> got(span.elements());
      read_llmc_parameters(path, f, span.offset, got.size(), got.data());
      for (size_t i = 0; i < got.size(); ++i) {
        const float expect = version == 5 ? to_float(to_bf16(want[i])) : want[i];
        ASSERT_EQ(got[i], expect) << llmc_gpt2_name(static_cast<LlmcTensor>(key.first), key.second)
                                  << " [" << i << "]";
      }
    }
    // wte's padding rows, between its 300 rows and wpe.
    std::vector<float> padding((384 - 300) * 8, -1.0f);
    read_llmc_parameters(path, f, 300 * 8, padding.size(), padding.data());
    EXPECT_EQ(padding, std::vector<float>(padding.size(), 0.0f));
  }
}

TEST(LlmcModelFile, RefusesShapesLlmcHasNoFileForAndLeavesNothing) {
  TempDir dir;
  const auto tensors = tensors_of(small_shape(3));
  const auto source = [&](LlmcTensor kind, int64_t layer) {
    return tensors.at({static_cast<int>(kind), layer}).data();
  };
  LlmcModelFile v1 = small_shape(1);
  EXPECT_THROW(write_llmc_model_file(dir.file("a.bin"), v1, source), CheckpointError);
  LlmcModelFile unpadded = small_shape(3);
  unpadded.padded_vocab_size = 200;
  EXPECT_THROW(write_llmc_model_file(dir.file("b.bin"), unpadded, source), CheckpointError);
  EXPECT_FALSE(looks_like_llmc_model_file(dir.file("a.bin")));
  EXPECT_FALSE(looks_like_llmc_model_file(dir.file("b.bin")));
}

}  // namespace
}  // namespace rm
