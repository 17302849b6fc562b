#include "worker/outlier_window.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

#include "observe/run_events.h"

namespace rm {

void OutlierWindow::push(double value) {
  if (!std::isfinite(value)) return;
  if (values_.size() < kCapacity) {
    values_.push_back(value);
    return;
  }
  values_[next_] = value;
  next_ = (next_ + 1) % kCapacity;
}

void OutlierWindow::clear() {
  values_.clear();
  next_ = 0;
}

double OutlierWindow::limit(double z) const {
  if (z <= 0 || values_.size() < kCapacity) return std::numeric_limits<double>::infinity();
  double sum = 0;
  for (size_t k = 0; k < kCapacity; ++k) sum += values_[(next_ + k) % kCapacity];
  const double mean = sum / kCapacity;
  double squares = 0;
  for (size_t k = 0; k < kCapacity; ++k) {
    const double d = values_[(next_ + k) % kCapacity] - mean;
    squares += d * d;
  }
  return mean + z * std::sqrt(squares / kCapacity);
}

SpikeHistory read_spike_history(const std::string& metrics_path, int64_t steps_done) {
  // step -> (loss, norm), NaN where not finite or absent; the first line seen from the end is
  // the step's last.
  std::map<int64_t, std::pair<double, double>> steps;
  size_t losses = 0, norms = 0;
  const auto value = [](const nlohmann::json& line, const char* key, size_t& count) -> double {
    if (!line.contains(key) || !line[key].is_number()) return NAN;
    const double v = line[key].get<double>();
    if (!std::isfinite(v)) return NAN;
    ++count;
    return v;
  };
  for_each_json_line_backwards(metrics_path, [&](const nlohmann::json& line) {
    if (!line.contains("step") || !line["step"].is_number_integer()) return true;
    const int64_t step = line["step"].get<int64_t>();
    if (step > steps_done || step < 1 || steps.count(step) != 0) return true;
    const double loss = value(line, "loss", losses), norm = value(line, "grad_norm", norms);
    steps[step] = {loss, norm};
    return losses < OutlierWindow::kCapacity || norms < OutlierWindow::kCapacity;
  });
  SpikeHistory h;
  for (const auto& [step, v] : steps) {
    if (std::isfinite(v.first)) h.losses.push_back(v.first);
    if (std::isfinite(v.second)) h.norms.push_back(v.second);
  }
  const auto last = [](std::vector<double>& x) {
    if (x.size() > OutlierWindow::kCapacity) x.erase(x.begin(), x.end() - OutlierWindow::kCapacity);
  };
  last(h.losses);
  last(h.norms);
  return h;
}

std::string pack_spike_history(const SpikeHistory& h) {
  std::string out;
  for (const std::vector<double>* v : {&h.losses, &h.norms}) {
    const uint64_t n = v->size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    if (n > 0) out.append(reinterpret_cast<const char*>(v->data()), n * sizeof(double));
  }
  return out;
}

SpikeHistory unpack_spike_history(const std::string& bytes) {
  SpikeHistory h;
  size_t at = 0;
  for (std::vector<double>* v : {&h.losses, &h.norms}) {
    uint64_t n = 0;
    if (bytes.empty()) return h;  // nothing was read
    if (bytes.size() - at < sizeof n) throw std::logic_error("unpack_spike_history: cut short");
    std::memcpy(&n, bytes.data() + at, sizeof n);
    at += sizeof n;
    if (n > OutlierWindow::kCapacity || bytes.size() - at < n * sizeof(double)) {
      throw std::logic_error("unpack_spike_history: cut short");
    }
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), bytes.data() + at, n * sizeof(double));
    at += n * sizeof(double);
  }
  return h;
}

}  // namespace rm
