// data.tokenizer, `ringmaster tokenize`, and text through a tokenizer in `sample` and `eval`,
// through the real binary, with a small GPT-2-style tokenizer written by the test (12 merges
// over the 256 bytes). The strongest check: a run on text encoded as it starts and a run on
// the token shard `tokenize` wrote of the same text train on the same tokens, so their losses
// are equal at every step.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"
#include "worker/data/test_util.h"

namespace rm {
namespace {

using test::run_cli;

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {" ", "t"}, {" t", "h"}, {" th", "e"}, {"e", "r"}, {"i", "n"}, {"o", "u"},
    {" ", "a"}, {"a", "n"},  {"an", "d"},  {" ", "s"}, {"o", "r"}, {" ", "w"}};
constexpr int kVocab = 256 + 12;

std::string job_file(const TempDir& dir, const std::string& tokenizer) {
  return dir.write("job.yaml", R"(name: tok
run_dir: )" + dir.file("text-run") +
                                   R"(
model: {type: gpt, vocab_size: )" + std::to_string(kVocab) +
                                   R"(, seq_len: 32, layers: 2, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt, tokenizer: )" +
                                   tokenizer + R"(}
train: {steps: 12, global_batch: 8, micro_batch: 4, eval_every: 6, eval_batches: 2, log_every: 1}
checkpoint: {async: false}
)");
}

TEST(TokenizerCli, TextEncodedAtStartTrainsAsItsTokenShard) {
  TempDir dir;
  const std::string tok = write_tokenizer(dir, "tok", kMerges);
  const std::string job = job_file(dir, tok);

  auto r = run_cli(
      "tokenize data/tinyshakespeare.txt --tokenizer " + tok + " -o " + dir.file("shake.bin"),
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const uint64_t text_bytes = std::filesystem::file_size("data/tinyshakespeare.txt");
  const uint64_t tokens = (std::filesystem::file_size(dir.file("shake.bin")) - 1024) / 2;
  EXPECT_EQ(r.out, dir.file("shake.bin") + ": " + std::to_string(tokens) +
                       " tokens of data/tinyshakespeare.txt\n");
  EXPECT_LT(tokens, text_bytes * 9 / 10) << "the merges shorten English text";

  r = run_cli("run " + job + " --fresh", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("run " + job + " --fresh --set run_dir=" + dir.file("shard-run") +
                  " --set data.format=tokens --set data.train=" + dir.file("shake.bin"),
              dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text_metrics = dir.file("text-run") + "/metrics.jsonl";
  ASSERT_TRUE(test::each_step_once(text_metrics, 12));
  const std::map<int, double> from_text = test::losses_by_step(text_metrics);
  EXPECT_EQ(from_text, test::losses_by_step(dir.file("shard-run") + "/metrics.jsonl"));

  // eval: the text, encoded by the run's tokenizer, scores as the shard does.
  r = run_cli("eval " + dir.file("text-run") + " --data data/tinyshakespeare.txt --max-tokens 3000",
              dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto shard_eval = run_cli(
      "eval " + dir.file("text-run") + " --data " + dir.file("shake.bin") + " --max-tokens 3000",
      dir.path());
  ASSERT_EQ(shard_eval.exit_code, 0) << shard_eval.err;
  EXPECT_EQ(r.out, shard_eval.out);
  EXPECT_EQ(r.out.rfind("loss=", 0), 0u) << r.out;
}

TEST(TokenizerCli, SampleReadsAndPrintsTextThroughTheTokenizer) {
  TempDir dir;
  const std::string tok = write_tokenizer(dir, "tok", kMerges);
  auto r = run_cli("run " + job_file(dir, tok) + " --fresh --set train.steps=3", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("sample " + dir.file("text-run") + " --prompt 'And the' --tokens 40", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Text, not ids: the prompt, then 40 tokens of at least a byte each.
  EXPECT_EQ(r.out.rfind("And the", 0), 0u) << r.out;
  EXPECT_GE(r.out.size(), std::string("And the").size() + 40 + 1);
  // --tokenizer overrides the job's: without one the model's 268 ids are read as numbers.
  const std::string moved = dir.file("moved-tok");
  std::filesystem::rename(tok, moved);
  r = run_cli("sample " + dir.file("text-run") + " --prompt 'And the' --tokens 5", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("data.tokenizer: " + tok + ": no such directory"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("give --tokenizer DIR"), std::string::npos) << r.err;
  const auto with_flag = run_cli(
      "sample " + dir.file("text-run") + " --prompt 'And the' --tokens 5 --tokenizer " + moved,
      dir.path());
  EXPECT_EQ(with_flag.exit_code, 0) << with_flag.err;
}

TEST(TokenizerCli, BadTokenizersStopBeforeAnythingIsWritten) {
  TempDir dir;
  const std::string tok = write_tokenizer(dir, "tok", kMerges);
  const std::string job = job_file(dir, tok);
  struct Case {
    std::string sets;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--set data.tokenizer=" + dir.file("none"),
       "data.tokenizer: " + dir.file("none") + ": no such directory"},
      {"--set data.tokenizer=" + dir.path(), "data.tokenizer: " + dir.path() +
                                                 ": no GPT-2 tokenizer here: expected encoder.json "
                                                 "and vocab.bpe"},
      {"--set model.vocab_size=256", "data.tokenizer: " + tok +
                                         " has a vocabulary of 268 tokens, more than the "
                                         "model's 256 (model.vocab_size)"},
  };
  for (const Case& c : cases) {
    for (const char* command : {"validate", "run"}) {
      const auto r = run_cli(std::string(command) + " " + job + " " + c.sets, dir.path());
      EXPECT_EQ(r.exit_code, 2) << command << " " << c.sets << ": " << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos) << command << ": " << r.err;
      EXPECT_FALSE(std::filesystem::exists(dir.file("text-run"))) << command << " " << c.sets;
    }
  }
  dir.write("tok/merges.txt", "#version: 0.2\n" + in_gpt2_alphabet(" ") + " t\nq z\n");
  auto r =
      run_cli("tokenize data/tinyshakespeare.txt --tokenizer " + tok + " -o " + dir.file("out.bin"),
              dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(tok + "/merges.txt:3: merge 'q z': the merged token is not in " + tok +
                       "/vocab.json"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.bin")));
  r = run_cli("tokenize " + dir.file("missing.txt") + " --tokenizer " +
                  write_tokenizer(dir, "ok", {}) + " -o " + dir.file("out.bin"),
              dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir.file("missing.txt")), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.bin")));
  // 65537 tokens (every two-byte token but one): more than a shard's uint16 ids can name.
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 0; i < 65281; ++i) {
    pairs.emplace_back(std::string(1, static_cast<char>(i / 256)),
                       std::string(1, static_cast<char>(i % 256)));
  }
  const std::string big = write_tokenizer(dir, "big", pairs);
  r = run_cli("tokenize data/tinyshakespeare.txt --tokenizer " + big + " -o " + dir.file("out.bin"),
              dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(big + ": a vocabulary of 65537 tokens: token ids are stored as uint16 (at "
                             "most 65536)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.bin")));
  // An empty text is named, not only the shard it would have written (before: "out.bin: refusing
  // to write an empty token shard").
  dir.write("empty.txt", "");
  r = run_cli("tokenize " + dir.file("empty.txt") + " --tokenizer " +
                  write_tokenizer(dir, "ok2", {}) + " -o " + dir.file("out.bin"),
              dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir.file("empty.txt") + ": empty: no tokens to write"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.bin")));
}

}  // namespace
}  // namespace rm
