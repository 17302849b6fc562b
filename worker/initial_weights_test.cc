// worker/initial_weights.h on files made here: the GPT-2 names and layouts both ways (with and
// without "transformer.", mask buffers, the tied head), any range read alone, an mlp, and the
// refusals that only a hand-made file can provoke. Checkpoint sources, cropping and the
// mismatches a job can make are tested through the binary (tests/init_from_cli_test.cc).
#include "worker/initial_weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/model_export.h"
#include "testing/temp_dir.h"

namespace rm {
namespace {

namespace fs = std::filesystem;

ModelConfig tiny(ModelType type) {
  ModelConfig c;
  c.type = type;
  c.vocab_size = 20;
  c.seq_len = 6;
  c.layers = 2;
  c.heads = 2;
  c.width = 8;
  c.mlp_embed = 4;
  c.mlp_context = 3;
  return c;
}

// Parameters no two of which are equal: a tensor in the wrong place, or transposed, shows.
std::vector<float> distinct(size_t n) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = 0.001f * static_cast<float>(i) - 1.0f;
  return p;
}

// What `ckpt export` writes of `params`, renamed by `rename` ("" drops a tensor), plus `extra`.
std::string export_file(const TempDir& dir, const ModelConfig& c, const std::vector<float>& params,
                        std::string (*rename)(const std::string&),
                        const std::vector<SafetensorsTensor>& extra = {}) {
  const std::unique_ptr<Model> model = make_model(c, 1);
  const ModelExport e = export_model(c, *model, params.data());
  std::vector<SafetensorsTensor> tensors = extra;
  for (const ExportedTensor& t : e.tensors) {
    const std::string name = rename(t.name);
    if (!name.empty()) tensors.push_back({name, "F32", t.shape, t.data});
  }
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, tensors, e.metadata);
  return path;
}

std::string as_exported(const std::string& name) {
  return name;
}
// GPT2Model's state dict, as GPT-2's published model.safetensors holds it: no "transformer.",
// no lm_head.
std::string as_gpt2model(const std::string& name) {
  if (name == "lm_head.weight") return "";
  return name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
}

std::vector<float> read_all(InitialWeights& w, size_t n) {
  std::vector<float> out(n, -7.0f);
  w.read(0, n, out.data());
  return out;
}

std::string refusal(const std::function<void()>& body) {
  try {
    body();
  } catch (const InitialWeightsError& e) {
    return e.what();
  }
  return "(nothing refused)";
}

TEST(InitialWeights, AnExportedGptComesBackExactly) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kGpt);
  const ParamLayout layout = model_param_layout(c);
  const std::vector<float> params = distinct(layout.size());
  const std::string file = export_file(dir, c, params, as_exported);
  InitialWeights w(file, c, layout, VerifyLevel::kChecksums);
  EXPECT_EQ(read_all(w, layout.size()), params);
  EXPECT_EQ(w.description(),
            "safetensors, GPT-2 layout, " + std::to_string(layout.tensors().size()) + " tensors");
  // The export's gpt2_config says 2 heads: a job of 4 (the same shapes) is refused.
  ModelConfig four = c;
  four.heads = 4;
  EXPECT_NE(refusal([&] {
              InitialWeights(file, four, layout, VerifyLevel::kChecksums);
            }).find("its model has 2 attention heads, this job's model.heads is 4"),
            std::string::npos);
}

TEST(InitialWeights, GptTwoModelNamesAndMaskBuffersAreTakenToo) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kGpt);
  const ParamLayout layout = model_param_layout(c);
  const std::vector<float> params = distinct(layout.size());
  const std::vector<float> mask(36, 1.0f);
  const std::string file = export_file(dir, c, params, as_gpt2model,
                                       {{"h.0.attn.bias", "F32", {1, 1, 6, 6}, mask.data()},
                                        {"h.1.attn.masked_bias", "F32", {1}, mask.data()}});
  InitialWeights w(file, c, layout, VerifyLevel::kChecksums);
  EXPECT_EQ(read_all(w, layout.size()), params);
}

TEST(InitialWeights, AnyRangeReadsAsTheSameSliceOfTheWhole) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kGpt);
  const ParamLayout layout = model_param_layout(c);
  const std::vector<float> params = distinct(layout.size());
  InitialWeights w(export_file(dir, c, params, as_exported), c, layout, VerifyLevel::kChecksums);
  // Shard boundaries of 1..5 ranks fall inside tensors, the transposed ones too.
  for (size_t ranks = 1; ranks <= 5; ++ranks) {
    const size_t per = (layout.size() + ranks - 1) / ranks;
    for (size_t begin = 0; begin < layout.size(); begin += per) {
      const size_t end = std::min(layout.size(), begin + per);
      std::vector<float> part(end - begin, -7.0f);
      w.read(begin, end, part.data());
      EXPECT_TRUE(std::equal(part.begin(), part.end(), params.begin() + begin))
          << ranks << " ranks, [" << begin << ", " << end << ")";
    }
  }
}

TEST(InitialWeights, AnMlpComesBackUnderItsOwnNames) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kMlp);
  const ParamLayout layout = model_param_layout(c);
  const std::vector<float> params = distinct(layout.size());
  InitialWeights w(export_file(dir, c, params, as_exported), c, layout, VerifyLevel::kChecksums);
  EXPECT_EQ(read_all(w, layout.size()), params);
  EXPECT_EQ(w.description(),
            "safetensors, " + std::to_string(layout.tensors().size()) + " tensors");
}

TEST(InitialWeights, AnUntiedHeadIsRefusedWhenRead) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kGpt);
  const ParamLayout layout = model_param_layout(c);
  const std::vector<float> params = distinct(layout.size());
  std::vector<float> head(params.begin(), params.begin() + 20 * 8);
  head[17] += 1.0f;
  const std::string file = export_file(
      dir, c, params, [](const std::string& n) { return n == "lm_head.weight" ? "" : n; },
      {{"lm_head.weight", "F32", {20, 8}, head.data()}});
  InitialWeights w(file, c, layout, VerifyLevel::kChecksums);
  EXPECT_EQ(refusal([&] { read_all(w, layout.size()); }),
            "model.init_from: " + file +
                ": 'lm_head.weight' differs from 'transformer.wte.weight': an untied output "
                "layer, and Ringmaster's GPT ties its head to wte");
}

// A safetensors file made by hand (the writer writes F32 only): every tensor of `layout`, all
// F32 but `bf16_name`, zeros.
std::string hand_made(const TempDir& dir, const ParamLayout& layout, const std::string& bf16_name) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t at = 0;
  for (const TensorSpec& t : layout.tensors()) {
    const bool bf16 = t.name == bf16_name;
    const uint64_t bytes = t.numel * (bf16 ? 2 : 4);
    header[t.name] = {
        {"dtype", bf16 ? "BF16" : "F32"}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const uint64_t n = text.size();
  const std::string path = dir.file("hand.safetensors");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << std::string(at, '\0');
  return path;
}

TEST(InitialWeights, ABf16TensorIsRefusedByName) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kMlp);
  const ParamLayout layout = model_param_layout(c);
  const std::string name = layout.tensors()[1].name;
  const std::string file = hand_made(dir, layout, name);
  EXPECT_EQ(
      refusal([&] { InitialWeights(file, c, layout, VerifyLevel::kChecksums); }),
      "model.init_from: " + file + ": tensor '" + name + "' is BF16: only F32 tensors are read");
}

// An llm.c model file of `params` (a gpt of config `c` in Ringmaster's layout), as llm.c's
// train_gpt2.py writes it: a header of 256 int32s, then wte over `padded` rows (the padding
// filled with 99s, which must never be read), wpe, each kind of block tensor for every layer in
// turn, ln_f. version 5 writes bf16 (the top half of each float's bits).
std::string llmc_file(const TempDir& dir, const ModelConfig& c, const ParamLayout& layout,
                      const std::vector<float>& params, int version, int padded, int heads) {
  std::vector<float> values;
  auto put = [&](const std::string& name) {
    for (const TensorSpec& t : layout.tensors()) {
      if (t.name == name)
        values.insert(values.end(), params.begin() + t.offset, params.begin() + t.offset + t.numel);
    }
  };
  put("wte");
  values.insert(values.end(), static_cast<size_t>((padded - c.vocab_size) * c.width), 99.0f);
  put("wpe");
  for (const char* kind :
       {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
        "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
        "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
    for (int l = 0; l < c.layers; ++l) put("h." + std::to_string(l) + "." + kind);
  }
  put("ln_f.weight");
  put("ln_f.bias");
  int32_t header[256] = {20240326, version, c.seq_len, c.vocab_size,
                         c.layers, heads,   c.width,   padded};
  const std::string path = dir.file("model.bin");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  for (const float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (version == 5) {
      const uint16_t top = static_cast<uint16_t>(bits >> 16);
      out.write(reinterpret_cast<const char*>(&top), 2);
    } else {
      out.write(reinterpret_cast<const char*>(&bits), 4);
    }
  }
  return path;
}

TEST(InitialWeights, AnLlmcModelFileComesBackExactlyInFp32AndBf16) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kGpt);
  const ParamLayout layout = model_param_layout(c);
  std::vector<float> params = distinct(layout.size());
  {
    InitialWeights w(llmc_file(dir, c, layout, params, 3, 24, c.heads), c, layout,
                     VerifyLevel::kChecksums);
    EXPECT_EQ(read_all(w, layout.size()), params);
    EXPECT_EQ(w.description(), "llm.c model file, version 3 (fp32), 28 tensors");
  }
  // Values bf16 holds exactly: the file's bf16 becomes the same floats.
  for (float& v : params) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits &= 0xffff0000u;
    std::memcpy(&v, &bits, 4);
  }
  InitialWeights w(llmc_file(dir, c, layout, params, 5, 32, c.heads), c, layout,
                   VerifyLevel::kChecksums);
  EXPECT_EQ(read_all(w, layout.size()), params);
  for (size_t begin = 0; begin < layout.size(); begin += 97) {  // ranges across tensors
    const size_t end = std::min(layout.size(), begin + 97);
    std::vector<float> part(end - begin);
    w.read(begin, end, part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), params.begin() + begin)) << begin;
  }
}

TEST(InitialWeights, AnLlmcModelFileOfAnotherShapeIsRefusedByWhatDiffers) {
  TempDir dir;
  const ModelConfig c = tiny(ModelType::kGpt);
  const ParamLayout layout = model_param_layout(c);
  const std::vector<float> params = distinct(layout.size());
  const std::string file = llmc_file(dir, c, layout, params, 3, 24, 4);  // 4 heads, not 2
  const std::string why =
      refusal([&] { InitialWeights(file, c, layout, VerifyLevel::kChecksums); });
  EXPECT_EQ(why, "model.init_from: " + file +
                     ": its model has 4 attention heads, this job's model.heads is 2 (the shapes "
                     "would match, the model would not)");
  ModelConfig wider = c;
  wider.width = 16;
  const ParamLayout wide = model_param_layout(wider);
  EXPECT_NE(refusal([&] {
              InitialWeights(llmc_file(dir, c, layout, params, 3, 24, 2), wider, wide,
                             VerifyLevel::kChecksums);
            }).find("its model is 8 wide, this job's model.width is 16"),
            std::string::npos);
  // A truncated file, another version, an mlp job.
  const std::string good = llmc_file(dir, c, layout, params, 3, 24, 2);
  fs::resize_file(good, fs::file_size(good) - 4);
  EXPECT_NE(refusal([&] {
              InitialWeights(good, c, layout, VerifyLevel::kChecksums);
            }).find("an llm.c model file of"),
            std::string::npos);
  EXPECT_NE(refusal([&] {
              InitialWeights(llmc_file(dir, c, layout, params, 2, 24, 2), c, layout,
                             VerifyLevel::kChecksums);
            }).find("an llm.c model file of version 2, not 1 or 3 (fp32) or 5 (bf16)"),
            std::string::npos);
  const ModelConfig mlp = tiny(ModelType::kMlp);
  const ParamLayout mlp_layout = model_param_layout(mlp);
  EXPECT_NE(refusal([&] {
              InitialWeights(llmc_file(dir, c, layout, params, 3, 24, 2), mlp, mlp_layout,
                             VerifyLevel::kChecksums);
            }).find("an llm.c GPT-2 model file, and this job's model.type is mlp"),
            std::string::npos);
}

TEST(InitialWeights, TheJobsOwnRunDirectoryIsRefusedHoweverItIsSpelled) {
  TempDir dir;
  JobConfig job;
  job.model = tiny(ModelType::kGpt);
  job.run_dir = dir.file("runs/x/");
  for (const std::string& from : {dir.file("runs/x"), dir.file("runs/x/checkpoints/step_00000010"),
                                  dir.file("runs/y/../x/checkpoints")}) {
    job.model.init_from = from;
    EXPECT_NE(refusal([&] {
                check_initial_weights(job, VerifyLevel::kStructure);
              }).find("inside this job's run_dir"),
              std::string::npos)
        << from;
  }
  job.model.init_from = dir.file("runs/xy");  // a sibling whose name begins alike
  EXPECT_EQ(refusal([&] { check_initial_weights(job, VerifyLevel::kStructure); }),
            "model.init_from: " + dir.file("runs/xy") + ": no such file or directory");
  job.model.init_from = "";
  EXPECT_EQ(refusal([&] { check_initial_weights(job, VerifyLevel::kStructure); }),
            "(nothing refused)");
}

}  // namespace
}  // namespace rm
