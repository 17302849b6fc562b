// Reading RUN_DIR/metrics.jsonl in end-to-end tests. Test-only.
#pragma once

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

// step -> loss; a repeated step's last line wins (compare logged_steps() to catch repeats).
inline std::map<int, double> losses_by_step(const std::string& metrics) {
  std::map<int, double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["loss"].is_number()) {
      out[j["step"].get<int>()] = j["loss"].get<double>();
    }
  }
  return out;
}

}  // namespace rm::test
