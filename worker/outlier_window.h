// The last 128 values of a quantity each step logs (its loss, its gradient norm), and the
// limit above which a value is a spike: mean + z x standard deviation of the window, once it
// holds 128 values (resilience.spike_loss_zscore, spike_norm_zscore). After llm.c's
// OutlierDetector (128 values, the population standard deviation), with one difference: llm.c
// takes the new value into the window before it scores it, which shrinks its z (never above
// sqrt(127) = 11.3, and a value 5.5 deviations out here scores about 4.9 there); here the
// window is the steps before, so that the limit is known before the step and the device
// applies it without waiting for the host. A window of equal values makes any larger value a
// spike (llm.c: none). Only finite values enter. A spike enters too, as in llm.c: a lasting
// change of level (the end of a warmup) is learnt within a window instead of skipping every
// step from then on.
//
// The mean and deviation are summed oldest value first, whatever the ring's position, so a
// window rebuilt from metrics.jsonl after a resume gives the live one's limit to the bit.
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rm {

class OutlierWindow {
 public:
  static constexpr size_t kCapacity = 128;

  void push(double value);  // non-finite values are ignored
  void clear();
  size_t size() const { return values_.size(); }
  // mean + z x standard deviation; +infinity (nothing is a spike) while the window is not full
  // or when z <= 0.
  double limit(double z) const;

 private:
  std::vector<double> values_;  // up to kCapacity; once full, a ring whose oldest is at next_
  size_t next_ = 0;
};

// What a resumed run's windows held: the finite losses and gradient norms of steps
// 1..steps_done as metrics.jsonl logged them (JSON numbers: the same doubles), the last
// kCapacity of each, oldest first. A step's last line wins. Read backwards, so a long run's file
// costs the lines it needs. A missing file (a run directory copied without it) gives empty
// windows: the limits come back after 128 steps.
struct SpikeHistory {
  std::vector<double> losses, norms;
};
SpikeHistory read_spike_history(const std::string& metrics_path, int64_t steps_done);
// As bytes, for a broadcast (collectives/communicator.h broadcast_string), and back.
std::string pack_spike_history(const SpikeHistory& h);
SpikeHistory unpack_spike_history(const std::string& bytes);

}  // namespace rm
