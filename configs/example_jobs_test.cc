// Every example job in configs/ loads and validates, at the rank count it is written for.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "configs/job_loader.h"
#include "configs/test_util.h"

namespace rm {
namespace {

using testing::repo_path;

// Each example and its data-parallel ranks. A new configs/*.yaml must be added here.
const std::map<std::string, int> kExamples = {
    {"gpt2-124m.yaml", 64},  // 8 nodes x 8 GPUs: 512 = 4 x 64 x 2 accumulation steps
    {"gpt2-finetune.yaml", 1},
    {"mlp.yaml", 1},
    {"shakespeare.yaml", 1},
};

TEST(ExampleJobs, EveryExampleIsListed) {
  for (const auto& entry : std::filesystem::directory_iterator(repo_path("configs"))) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_TRUE(kExamples.count(entry.path().filename().string()))
        << entry.path() << " is not in kExamples";
  }
}

TEST(ExampleJobs, AllValidate) {
  for (const auto& [file, ranks] : kExamples) {
    try {
      load_job(repo_path("configs/" + file), {}, ranks);
    } catch (const JobConfigError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(ExampleJobs, Shakespeare) {
  // What the README and `make demo` rely on; the tuning numbers are free to change.
  const JobConfig c = load_job(repo_path("configs/shakespeare.yaml"), {}, 2);
  EXPECT_EQ(c.model.type, ModelType::kGpt);
  EXPECT_EQ(c.model.vocab_size, 256);
  EXPECT_EQ(c.data.train, std::vector<std::string>{"data/tinyshakespeare.txt"});
  EXPECT_EQ(c.run_dir, "runs/shakespeare");
  EXPECT_NO_THROW(load_job(repo_path("configs/shakespeare.yaml"), {}, 1)) << "1 or 2 ranks";
  // The data file the default job names is in the repository.
  EXPECT_TRUE(std::filesystem::exists(repo_path(c.data.train[0])));
}

TEST(ExampleJobs, Gpt2FineTune) {
  // What docs/tokenizers.md and the file's own instructions rely on: GPT-2's files in gpt2/.
  const JobConfig c = load_job(repo_path("configs/gpt2-finetune.yaml"));
  EXPECT_EQ(c.model.vocab_size, 50257);
  EXPECT_EQ(c.model.width, 768);
  EXPECT_EQ(c.model.init_from, "gpt2/model.safetensors");
  EXPECT_EQ(c.data.tokenizer, "gpt2");
  EXPECT_EQ(c.data.format, DataFormat::kText);
}

TEST(ExampleJobs, Mlp) {
  const JobConfig c = load_job(repo_path("configs/mlp.yaml"));
  EXPECT_EQ(c.model.type, ModelType::kMlp);
  EXPECT_EQ(c.model.seq_len, 64);
  EXPECT_EQ(c.model.mlp_context, 16);
  EXPECT_EQ(c.model.mlp_embed, 32);
  EXPECT_EQ(c.model.width, 512);
  EXPECT_EQ(c.model.layers, 2);
}

TEST(ExampleJobs, Gpt2NeedsItsRankCount) {
  const JobConfig c = load_job(repo_path("configs/gpt2-124m.yaml"), {}, 64);
  EXPECT_EQ(c.model.vocab_size, 50257);
  EXPECT_EQ(c.data.format, DataFormat::kTokens);
  EXPECT_EQ(c.data.train, std::vector<std::string>{"data/fineweb10B/fineweb_train_*.bin"});
  EXPECT_EQ(c.cluster.nodes * c.cluster.tasks_per_node, 64);
  EXPECT_EQ(c.cluster.time, "24:00:00");
  EXPECT_EQ(c.parallel.precision, Precision::kBf16);
  EXPECT_EQ(c.parallel.backend, Backend::kCuda);
  EXPECT_EQ(c.parallel.shard, ShardMode::kOptimizer);
  EXPECT_EQ(c.train.global_batch / (c.train.micro_batch * 64), 2);
  // 256 ranks would need half an accumulation step.
  EXPECT_THROW(load_job(repo_path("configs/gpt2-124m.yaml"), {}, 256), JobConfigError);
  EXPECT_NO_THROW(load_job(repo_path("configs/gpt2-124m.yaml"), {"train.micro_batch=64"}, 8));
}

}  // namespace
}  // namespace rm
