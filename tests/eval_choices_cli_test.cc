// `ringmaster eval --choices` through the real binary: multiple-choice accuracy on a file in
// llm.c's eval format (HellaSwag's), made here from Shakespeare -- each example 24 bytes of the
// text, the 8 that follow them, and three shuffles of those 8. The shuffles have the true
// continuation's bytes in another order, so only a model that scores each completion token at
// its own position, given the context and the tokens before it, tells them apart: a trained
// byte-level GPT must pick the true one far more often than chance, the same model untrained
// must not; and every bad input is one message and exit 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "kernels/compute_factory.h"
#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"
#include "worker/data/choice_file.h"
#include "worker/data/token_shard.h"

namespace rm {
namespace {

using test::run_cli;

constexpr int kContext = 24, kCompletion = 8, kExamples = 81;

std::vector<int> bytes_at(const std::string& text, size_t at, size_t n) {
  std::vector<int> out;
  for (size_t i = at; i < at + n; ++i) out.push_back(static_cast<unsigned char>(text[i]));
  return out;
}

// Examples from the text, the true completion at index i % 4.
std::vector<ChoiceExample> shakespeare_choices() {
  std::ifstream in("data/tinyshakespeare.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const int kShuffles[3][kCompletion] = {
      {7, 6, 5, 4, 3, 2, 1, 0}, {3, 0, 6, 1, 7, 4, 2, 5}, {5, 2, 7, 0, 4, 1, 3, 6}};
  std::vector<ChoiceExample> examples;
  for (int i = 0; i < kExamples; ++i) {
    const size_t at = 1000 + static_cast<size_t>(i) * 4099;
    ChoiceExample e;
    e.label = i % 4;
    e.context = bytes_at(text, at, kContext);
    const std::vector<int> truth = bytes_at(text, at + kContext, kCompletion);
    for (int c = 0, shuffle = 0; c < 4; ++c) {
      if (c == e.label) {
        e.completions.push_back(truth);
        continue;
      }
      std::vector<int> wrong;
      for (int k : kShuffles[shuffle++]) wrong.push_back(truth[static_cast<size_t>(k)]);
      e.completions.push_back(wrong);
    }
    examples.push_back(e);
  }
  return examples;
}

std::string job_file(const TempDir& dir, const std::string& name, int steps) {
  return dir.write(name + ".yaml", "name: " + name + "\nrun_dir: " + dir.file(name) + R"(
model: {type: gpt, seq_len: 32, layers: 2, heads: 2, width: 64}
data: {train: data/tinyshakespeare.txt}
train: {steps: )" + std::to_string(steps) +
                                       R"(, global_batch: 16, micro_batch: 16, eval_every: 0}
optimizer: {lr: 3.0e-3, warmup_steps: 10}
)");
}

struct Score {
  double accuracy = -1;
  long long correct = -1, examples = -1;
};

Score parse(const test::CliResult& r) {
  Score s;
  EXPECT_EQ(std::sscanf(r.out.c_str(), "accuracy=%lf correct=%lld examples=%lld", &s.accuracy,
                        &s.correct, &s.examples),
            3)
      << r.out << r.err;
  return s;
}

class EvalChoicesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bytes = encode_choice_file(shakespeare_choices());
    choices_ = dir_.write("choices.bin", bytes);
  }
  TempDir dir_;
  std::string choices_;
};

TEST_F(EvalChoicesCli, ATrainedModelPicksTheTrueContinuationFarMoreOftenThanChance) {
  ASSERT_EQ(run_cli("run " + job_file(dir_, "trained", 300), dir_.path()).exit_code, 0);
  ASSERT_EQ(run_cli("run " + job_file(dir_, "untrained", 1), dir_.path()).exit_code, 0);
  const Score trained =
      parse(run_cli("eval " + dir_.file("trained") + " --choices " + choices_, dir_.path()));
  const Score untrained =
      parse(run_cli("eval " + dir_.file("untrained") + " --choices " + choices_, dir_.path()));
  EXPECT_EQ(trained.examples, kExamples);
  EXPECT_NEAR(trained.accuracy, static_cast<double>(trained.correct) / kExamples, 5e-5);
  EXPECT_GE(trained.accuracy, 0.85) << "chance is 0.25 (0.975 when written)";
  EXPECT_LE(untrained.accuracy, 0.45) << "one step from random weights (0.275 when written)";
  // --max-examples scores the first ones only, the same way.
  const Score first =
      parse(run_cli("eval " + dir_.file("trained") + " --choices " + choices_ + " --max-examples 8",
                    dir_.path()));
  EXPECT_EQ(first.examples, 8);
}

// data.choices: the same score at each evaluation of a run, in metrics.jsonl and on the console,
// on one rank and on two fully sharded ones (ZeRO-3: a forward pass is collective, and the two
// ranks hold 41 and 40 of the 81 examples, 21 and 20 passes of 8 rows: rank 1 runs one pass
// more, counting nothing, or the job would hang), each equal to what
// `eval --choices` gives the run's final weights (one example a pass there: the sums may round
// differently, so within one example).
TEST_F(EvalChoicesCli, ARunScoresTheChoicesAtEachEvaluationOnAnyRanks) {
  for (const std::string& ranks :
       {std::string(" --nproc 1"), std::string(" --nproc 2 --set parallel.shard=full "
                                               "--set train.micro_batch=8")}) {
    const std::string name = ranks.find("full") == std::string::npos ? "one" : "two";
    const auto r = run_cli("run " + job_file(dir_, name, 300) + ranks +
                               " --set train.eval_every=100 --set data.choices=" + choices_,
                           dir_.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::map<int, double> acc =
        test::values_by_step(dir_.file(name + "/metrics.jsonl"), "choice_accuracy");
    EXPECT_EQ(acc.size(), 3u) << ranks;
    ASSERT_EQ(acc.count(300), 1u) << ranks;
    EXPECT_EQ(acc.count(100) + acc.count(200), 2u) << ranks;
    EXPECT_GE(acc.at(300), 0.85) << ranks;
    char line[64];
    std::snprintf(line, sizeof line, "| choices %.4f", acc.at(300));
    EXPECT_NE(r.out.find(line), std::string::npos) << ranks << "\n" << r.out;
    const Score final_weights =
        parse(run_cli("eval " + dir_.file(name) + " --choices " + choices_, dir_.path()));
    EXPECT_NEAR(acc.at(300), final_weights.accuracy, 1.0 / kExamples + 1e-9) << ranks;
    // status says it beside the validation loss, and the report plots it.
    const auto status = run_cli("status " + dir_.file(name), dir_.path());
    std::snprintf(line, sizeof line, ", choice_accuracy %.4f (step 300)", acc.at(300));
    EXPECT_NE(status.out.find(line), std::string::npos) << status.out;
    ASSERT_EQ(run_cli("report " + dir_.file(name), dir_.path()).exit_code, 0);
    const std::string html = test::slurp(dir_.file(name + "/report.html"));
    EXPECT_NE(html.find("series-choice_accuracy"), std::string::npos) << ranks;
  }
}

double parse_loss(const test::CliResult& r) {
  double loss = -1;
  long long tokens = 0;
  EXPECT_EQ(std::sscanf(r.out.c_str(), "loss=%lf tokens=%lld", &loss, &tokens), 2)
      << r.out << r.err;
  return loss;
}

// eval and sample where and as they are asked (launcher/model_placement.h). --precision bf16 reads
// the bf16 copy of the weights, cast where the model runs, as a bf16 job's evaluations in training
// read them (and as eval on a GPU does by default): a bf16 run's score at its last evaluation
// within one example, and a mean loss near the fp32 forward's but not its bits. A run whose job
// says parallel.backend: cuda, evaluated where no GPU is: one message naming the backend and the
// flag that helps, exit 2; --backend cpu then evaluates it.
TEST_F(EvalChoicesCli, EvaluatesInThePrecisionAndOnTheBackendAsked) {
  const auto trained = run_cli("run " + job_file(dir_, "half", 300) +
                                   " --set parallel.precision=bf16 --set train.eval_every=100 "
                                   "--set data.choices=" +
                                   choices_,
                               dir_.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::map<int, double> acc =
      test::values_by_step(dir_.file("half/metrics.jsonl"), "choice_accuracy");
  ASSERT_EQ(acc.count(300), 1u);
  const std::string run = dir_.file("half");
  const auto bf16 = run_cli(
      "eval " + run + " --choices " + choices_ + " --precision bf16 --backend cpu", dir_.path());
  EXPECT_NE(bf16.err.find(", bf16\n"), std::string::npos) << bf16.err;
  EXPECT_NEAR(parse(bf16).accuracy, acc.at(300), 1.0 / kExamples + 1e-9);

  // On the cpu (its default precision is fp32; a GPU's would be the job's, bf16).
  const std::string data = " --data data/tinyshakespeare.txt --max-tokens 20000 --backend cpu";
  const auto fp32_loss = run_cli("eval " + run + data, dir_.path());
  EXPECT_NE(fp32_loss.err.find(", fp32\n"), std::string::npos) << "the cpu's default";
  const auto bf16_loss = run_cli("eval " + run + data + " --precision bf16", dir_.path());
  const double l32 = parse_loss(fp32_loss), l16 = parse_loss(bf16_loss);
  EXPECT_NEAR(l16, l32, 0.02);
  EXPECT_NE(l16, l32) << "the bf16 copy was not what the forward read";

  if (cuda_device_count() > 0) return;  // the rest is about a machine without a GPU
  // The same run as if trained on a GPU.
  const std::string gpu_run = dir_.file("on-gpu");
  std::filesystem::copy(run, gpu_run, std::filesystem::copy_options::recursive);
  std::string config = test::slurp(gpu_run + "/config.yaml");
  const size_t at = config.find("backend: auto");
  ASSERT_NE(at, std::string::npos) << config;
  config.replace(at, std::string("backend: auto").size(), "backend: cuda");
  std::ofstream(gpu_run + "/config.yaml", std::ios::trunc) << config;
  const auto refused = run_cli("eval " + gpu_run + " --choices " + choices_, dir_.path());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("the run's parallel.backend is cuda, but no GPU is usable here"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("give eval --backend cpu"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out, "");
  const auto flag =
      run_cli("eval " + run + " --choices " + choices_ + " --backend cuda", dir_.path());
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("eval --backend cuda, but no GPU is usable here"), std::string::npos)
      << flag.err;
  const auto on_cpu =
      run_cli("eval " + gpu_run + " --choices " + choices_ + " --backend cpu", dir_.path());
  const auto original = run_cli("eval " + run + " --choices " + choices_, dir_.path());
  EXPECT_EQ(on_cpu.exit_code, 0) << on_cpu.err;
  EXPECT_EQ(on_cpu.out, original.out);
  // sample the same way: refused without a GPU, then on the cpu in bf16, greedy: a text of its
  // own (the bf16 weights), the same every time.
  const auto no_gpu = run_cli("sample " + gpu_run + " --tokens 5", dir_.path());
  EXPECT_EQ(no_gpu.exit_code, 2);
  EXPECT_NE(no_gpu.err.find("give sample --backend cpu"), std::string::npos) << no_gpu.err;
  const std::string greedy = " --backend cpu --tokens 40 --temperature 0 --prompt ROMEO";
  const auto s16 = run_cli("sample " + gpu_run + greedy + " --precision bf16", dir_.path());
  const auto s16_again = run_cli("sample " + gpu_run + greedy + " --precision bf16", dir_.path());
  ASSERT_EQ(s16.exit_code, 0) << s16.err;
  EXPECT_NE(s16.err.find(", bf16\n"), std::string::npos) << s16.err;
  EXPECT_EQ(s16.out.rfind("ROMEO", 0), 0u) << s16.out;
  EXPECT_GT(s16.out.size(), std::string("ROMEO").size() + 30) << s16.out;
  EXPECT_EQ(s16.out, s16_again.out);
}

TEST_F(EvalChoicesCli, BadInputIsOneMessageAndExitTwo) {
  ASSERT_EQ(run_cli("run " + job_file(dir_, "m", 1), dir_.path()).exit_code, 0);
  const std::string run = dir_.file("m");
  struct Case {
    std::string args, says;
  };
  const std::string shard = dir_.file("tokens.bin");
  write_token_shard(shard, std::vector<uint16_t>(100, 7));
  std::vector<ChoiceExample> too_long = shakespeare_choices();
  too_long[5].context.resize(30, 65);  // 30 + 8 - 1 = 37 > seq_len 32
  const std::string long_file = dir_.write("long.bin", encode_choice_file(too_long));
  std::vector<ChoiceExample> big_token = shakespeare_choices();
  big_token[2].completions[1][0] = 300;
  const std::string token_file = dir_.write("token.bin", encode_choice_file(big_token));
  for (const Case& c : {
           Case{"eval " + run, "give --data FILE (the mean loss per token) or --choices FILE"},
           Case{"eval " + run + " --choices " + shard,
                shard + ": magic 20240520, not 20240522: not a multiple-choice file (llm.c's eval "
                        "format); a token shard, for --data"},
           Case{"eval " + run + " --choices " + long_file,
                long_file + ": example 5: its context (30 tokens) and completion 0 (8) need a "
                            "window of 37 tokens, the model's seq_len is 32"},
           Case{"eval " + run + " --choices " + token_file,
                token_file + ": example 2: completion 1 holds token 300, >= the model's "
                             "vocab_size 256"},
           Case{"eval " + run + " --choices " + dir_.file("missing.bin"), "missing.bin"},
       }) {
    const auto r = run_cli(c.args, dir_.path());
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
  // In a job: refused before anything is written, naming the key.
  const std::string evaluating = " --set train.eval_every=5 --set data.choices=";
  const auto job = run_cli("run " + job_file(dir_, "j", 5) + evaluating + long_file, dir_.path());
  EXPECT_EQ(job.exit_code, 2);
  EXPECT_NE(job.err.find("data.choices: " + long_file + ": example 5: its context (30 tokens)"),
            std::string::npos)
      << job.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("j")));
  const auto both = run_cli(
      "eval " + run + " --data data/tinyshakespeare.txt --choices " + choices_, dir_.path());
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;

  const std::string mlp = dir_.write("mlp.yaml", "name: mlp\nrun_dir: " + dir_.file("mlp") + R"(
model: {type: mlp, seq_len: 32, layers: 1, width: 32, mlp_embed: 8, mlp_context: 4}
data: {train: data/tinyshakespeare.txt}
train: {steps: 1, global_batch: 4, micro_batch: 4, eval_every: 0}
)");
  ASSERT_EQ(run_cli("run " + mlp, dir_.path()).exit_code, 0);
  const auto m = run_cli("eval " + dir_.file("mlp") + " --choices " + choices_, dir_.path());
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_NE(m.err.find("multiple-choice scoring needs a gpt"), std::string::npos) << m.err;
}

}  // namespace
}  // namespace rm
