// resilience.spike_loss_zscore and spike_norm_zscore through the real binary (llm.c's -sl and
// -sg): from step 129 on, a step whose loss or gradient norm is more than z standard deviations
// above the mean of the 128 steps before it leaves the weights as they were. The thresholds are
// set low so that ordinary noise makes spikes: every step's decision is recomputed here from
// metrics.jsonl and must match, on two ranks; and a run killed among the spikes resumes to the
// uninterrupted run's weights bit for bit (its windows rebuilt from the log).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"
#include "tests/cli_runner.h"
#include "tests/metrics_reader.h"

namespace rm {
namespace {

using test::run_cli;
using test::slurp;

std::string job_file(const TempDir& dir) {
  return dir.write("job.yaml", R"(name: spikes
model: {type: gpt, seq_len: 32, layers: 1, heads: 2, width: 32}
data: {train: data/tinyshakespeare.txt}
train: {steps: 260, global_batch: 8, micro_batch: 4, eval_every: 0, log_every: 50}
optimizer: {lr: 3.0e-3, warmup_steps: 10}
checkpoint: {every: 40, async: false}
)");
}

std::vector<nlohmann::json> lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(path));
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

// mean + z x population deviation of `v` (another summation than the trainer's).
double limit_of(const std::vector<double>& v, double z) {
  double mean = 0, sq = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) sq += (x - mean) * (x - mean) / v.size();
  return mean + z * std::sqrt(sq);
}

// Checks every step's decision against the log; returns how many steps were skipped.
int check_decisions(const std::string& metrics, const char* field, double z) {
  const std::vector<nlohmann::json> m = lines(metrics);
  std::vector<double> window;
  int skipped = 0;
  for (const nlohmann::json& j : m) {
    const double v = j[field].get<double>();
    const bool skip = j.value("spike", std::string()) == field;
    if (window.size() == 128) {
      const double limit = limit_of(window, z);
      // Within rounding of the limit either decision is the trainer's to make.
      if (std::abs(v - limit) > 1e-9 * limit) {
        EXPECT_EQ(skip, v > limit)
            << "step " << j["step"] << ": " << field << " " << v << ", limit " << limit;
      }
      window.erase(window.begin());
    } else {
      EXPECT_FALSE(skip) << "step " << j["step"] << ": before 128 steps";
    }
    if (skip) {
      ++skipped;
      EXPECT_TRUE(j.value("skipped", false)) << j.dump();
    }
    window.push_back(v);
  }
  return skipped;
}

TEST(SpikeSkipCli, EachStepSkippedExactlyWhenItsValuePassesTheWindowsLimit) {
  TempDir dir;
  const std::string job = job_file(dir);
  for (const char* field : {"grad_norm", "loss"}) {
    const std::string run = dir.file(std::string("run_") + field);
    const std::string key =
        std::string(field) == "loss" ? "spike_loss_zscore" : "spike_norm_zscore";
    const auto r = run_cli(
        "run " + job + " --nproc 2 --set run_dir=" + run + " --set resilience." + key + "=0.5",
        dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const int skipped = check_decisions(run + "/metrics.jsonl", field, 0.5);
    EXPECT_GT(skipped, 5) << field << ": z = 0.5 must catch ordinary noise";
    EXPECT_LT(skipped, 100) << field;
    const std::string events = slurp(run + "/events.jsonl");
    size_t count = 0;
    for (size_t at = events.find("\"spike_skipped\""); at != std::string::npos;
         at = events.find("\"spike_skipped\"", at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, static_cast<size_t>(skipped)) << field;
    EXPECT_EQ(events.find("nan_skipped"), std::string::npos) << field << ": a spike is no NaN";
    // The report marks them.
    ASSERT_EQ(run_cli("report " + run, dir.path()).exit_code, 0);
    EXPECT_NE(slurp(run + "/report.html").find("mark-spike_skipped"), std::string::npos) << field;
  }
}

TEST(SpikeSkipCli, AKilledRunAmongSpikesResumesBitForBit) {
  TempDir dir;
  const std::string job = job_file(dir);
  const std::string z = " --nproc 2 --set resilience.spike_norm_zscore=0.5";
  const auto straight =
      run_cli("run " + job + z + " --set run_dir=" + dir.file("straight"), dir.path());
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::string killed = z + " --set run_dir=" + dir.file("killed");
  EXPECT_NE(run_cli("run " + job + killed, dir.path(), "RM_TEST_FAULT=kill:1:230").exit_code, 0);
  const auto resumed = run_cli("run " + job + killed, dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
  EXPECT_EQ(slurp(dir.file("straight/weights.bin")), slurp(dir.file("killed/weights.bin")));
  // The same steps skipped, before the kill and after it.
  const auto spikes = [&](const std::string& run) {
    std::vector<int> out;
    for (const nlohmann::json& j : lines(run + "/metrics.jsonl")) {
      if (j.contains("spike")) out.push_back(j["step"].get<int>());
    }
    return out;
  };
  const std::vector<int> a = spikes(dir.file("straight")), b = spikes(dir.file("killed"));
  EXPECT_EQ(a, b);
  ASSERT_FALSE(a.empty());
  EXPECT_GT(a.back(), 200) << "no spike after the resume (at 200): the windows went unchecked";
}

}  // namespace
}  // namespace rm
