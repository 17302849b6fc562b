#include "observe/metrics_log.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "observe/run_events.h"

namespace rm {

namespace {

// The lines of an existing metrics file whose step is at most steps_done.
std::string lines_through(const std::string& path, int64_t steps_done) {
  std::string kept;
  for_each_line(path, [&](const std::string& line) {
    const auto j = parse_json_line(line);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() <= steps_done) {
      kept += line + "\n";
    }
    return true;
  });
  return kept;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, int64_t steps_done) : path_(path) {
  rewind(steps_done);
}

void MetricsLog::rewind(int64_t steps_done) {
  file_ = io::Fd();
  // Replaced atomically, so that a crash now cannot lose the history the run had.
  const std::string kept = steps_done > 0 ? lines_through(path_, steps_done) : std::string();
  write_file_atomic(path_, kept.data(), kept.size());
  file_ = io::open_append(path_);
}

MetricsLog::~MetricsLog() = default;

void MetricsLog::write(const StepMetrics& m) {
  // JSON has no NaN: a non-finite value is written as null, which readers handle.
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  nlohmann::json j = {{"step", m.step},           {"loss", num(m.loss)},
                      {"lr", m.lr},               {"grad_norm", num(m.grad_norm)},
                      {"tokens_per_s", m.tokens_per_s}, {"step_ms", m.step_ms}};
  if (m.val_loss) j["val_loss"] = num(*m.val_loss);
  if (m.choice_accuracy) j["choice_accuracy"] = num(*m.choice_accuracy);
  if (m.skipped) j["skipped"] = true;
  if (!m.spike.empty()) j["spike"] = m.spike;
  if (m.ckpt_stall_ms > 0) j["ckpt_stall_ms"] = m.ckpt_stall_ms;
  // Rounded to 0.001 ms / 0.1 MiB: the lines stay short, and nothing finer is meaningful.
  auto ms = [](double x) { return std::round(x * 1e3) / 1e3; };
  j["data_ms"] = ms(m.data_ms);
  j["comm_wait_ms"] = ms(m.comm_wait_ms);
  j["busy_ms_max"] = ms(m.busy_ms_max);
  j["busy_ms_min"] = ms(m.busy_ms_min);
  j["slowest_rank"] = m.slowest_rank;
  j["peak_rss_mib"] = std::round(m.peak_rss_mib * 10) / 10;
  const std::string line = j.dump() + "\n";
  io::write_all(file_.get(), line.data(), line.size(), path_);  // one write(2): whole lines
}

void MetricsLog::sync() {
  io::fsync_fd(file_.get(), path_);
}

std::string format_log_line(const StepMetrics& m, int64_t total_steps) {
  char buf[256];
  int n = std::snprintf(buf, sizeof buf,
                        "step %6lld/%lld | loss %.4f | lr %.2e | norm %.3f | %8.0f tok/s | %7.1f ms",
                        static_cast<long long>(m.step), static_cast<long long>(total_steps),
                        m.loss, m.lr, m.grad_norm, m.tokens_per_s, m.step_ms);
  // snprintf returns the length it wanted: a loss of 1e300 in %.4f would not fit.
  std::string s(buf, static_cast<size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
  if (m.val_loss) {
    std::snprintf(buf, sizeof buf, " | val %.4f", *m.val_loss);
    s += buf;
  }
  if (m.choice_accuracy) {
    std::snprintf(buf, sizeof buf, " | choices %.4f", *m.choice_accuracy);
    s += buf;
  }
  if (m.skipped)
    s += m.spike.empty() ? " | SKIPPED (non-finite)" : " | SKIPPED (" + m.spike + " spike)";
  return s;
}

}  // namespace rm
