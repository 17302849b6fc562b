// Reading RUN_DIR/metrics.jsonl in end-to-end tests. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rm::test {

// The step of every line, in file order (a resumed run must leave each step once, in order).
// A line that does not parse (a run killed mid-line) is skipped.
inline std::vector<int> logged_steps(const std::string& metrics) {
  std::vector<int> steps;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step")) steps.push_back(j["step"].get<int>());
  }
  return steps;
}

// Checks metrics.jsonl as a run that reached step n must leave it, however often it was stopped
// and resumed (crash, power cut, signal, restart, requeue): every line parses as a JSON object
// with an integer step, and the steps are 1..n in order, each once. The product drops a crashed
// run's torn last line and the steps that the resumed run repeats (observe/metrics_log.h); this
// fails, naming the line, if it did not. EXPECT_TRUE(each_step_once(metrics, n)).
inline ::testing::AssertionResult each_step_once(const std::string& metrics, int n) {
  std::ifstream in(metrics);
  if (!in) return ::testing::AssertionFailure() << metrics << ": cannot read";
  std::string line;
  int line_no = 0, want = 1;
  while (std::getline(in, line)) {
    ++line_no;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
      return ::testing::AssertionFailure()
             << metrics << ":" << line_no << ": not a JSON object with a step: '" << line << "'";
    }
    const int step = j["step"].get<int>();
    if (step != want) {
      return ::testing::AssertionFailure()
             << metrics << ":" << line_no << ": step " << step << " where step " << want
             << " was due" << (step < want ? " (a step logged twice)" : " (steps missing)");
    }
    ++want;
  }
  if (want != n + 1) {
    return ::testing::AssertionFailure()
           << metrics << ": " << want - 1 << " steps logged, " << n << " expected";
  }
  return ::testing::AssertionSuccess();
}

// step -> the number `field` of each line that has one; a repeated step's last line wins and
// unparsable lines are skipped: check the file with each_step_once() too.
inline std::map<int, double> values_by_step(const std::string& metrics, const char* field) {
  std::map<int, double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j.contains(field) && j[field].is_number()) {
      out[j["step"].get<int>()] = j[field].get<double>();
    }
  }
  return out;
}

// step -> training loss, and step -> validation loss (the steps that evaluated).
inline std::map<int, double> losses_by_step(const std::string& metrics) {
  return values_by_step(metrics, "loss");
}
inline std::map<int, double> val_losses_by_step(const std::string& metrics) {
  return values_by_step(metrics, "val_loss");
}

}  // namespace rm::test
