// worker/outlier_window.h: the limit is mean + z x population standard deviation of the last
// 128 values, none before the window is full, and the same bits however the ring is turned.
#include "worker/outlier_window.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "testing/temp_dir.h"

namespace rm {
namespace {

TEST(OutlierWindow, LimitIsMeanPlusZDeviationsOfTheLast128) {
  OutlierWindow w;
  for (int i = 0; i < 127; ++i) w.push(i % 2 == 0 ? 1.0 : 3.0);
  EXPECT_TRUE(std::isinf(w.limit(5)));  // 127 values: not yet
  w.push(3.0);                          // 64 ones and 64 threes: mean 2, deviation 1
  EXPECT_DOUBLE_EQ(w.limit(5), 7.0);
  EXPECT_DOUBLE_EQ(w.limit(0.5), 2.5);
  EXPECT_TRUE(std::isinf(w.limit(0)));  // off
  w.push(NAN);                          // not a value
  w.push(INFINITY);
  EXPECT_DOUBLE_EQ(w.limit(5), 7.0);
  for (int i = 0; i < 128; ++i) w.push(10.0);  // the old values are gone
  EXPECT_DOUBLE_EQ(w.limit(5), 10.0);
}

TEST(OutlierWindow, ARebuiltWindowGivesTheLiveOnesBits) {
  // Values whose sums round differently in another order.
  const auto value = [](int i) { return 1.0 + 1e-3 * std::sin(i * 0.7) + (i % 7) * 1e9 * 1e-9; };
  OutlierWindow live;
  for (int i = 0; i < 300; ++i) live.push(value(i));
  OutlierWindow rebuilt;
  for (int i = 300 - 128; i < 300; ++i) rebuilt.push(value(i));
  EXPECT_EQ(live.limit(3), rebuilt.limit(3));
  EXPECT_EQ(live.size(), 128u);
  live.clear();
  EXPECT_EQ(live.size(), 0u);
  EXPECT_TRUE(std::isinf(live.limit(3)));
}

// A resumed run's windows from its metrics.jsonl: steps up to the checkpoint's only, a step's
// last line, finite values only, the last 128 of each quantity, oldest first; a missing file
// is empty windows; and the bytes between ranks give the same doubles back.
TEST(SpikeHistory, IsReadFromTheLogUpToTheResumedStep) {
  TempDir dir;
  std::string log;
  for (int step = 1; step <= 300; ++step) {
    const std::string loss = step == 250 ? "null" : std::to_string(step) + ".25";
    log += "{\"step\":" + std::to_string(step) + ",\"loss\":" + loss +
           ",\"grad_norm\":" + std::to_string(step * 2) + "}\n";
  }
  log += "{\"step\":260,\"loss\":0.5,\"grad_norm\":0.5}\n";  // the later line of step 260
  log += "{\"step\":261,\"loss\":";                          // torn by a crash
  const std::string path = dir.write("metrics.jsonl", log);
  const SpikeHistory h = read_spike_history(path, 270);
  ASSERT_EQ(h.losses.size(), 128u);
  ASSERT_EQ(h.norms.size(), 128u);
  EXPECT_EQ(h.norms.back(), 540);       // step 270
  EXPECT_EQ(h.norms[128 - 11], 0.5);    // step 260's later line
  EXPECT_EQ(h.norms.front(), 2 * 143);  // step 143
  EXPECT_EQ(h.losses.front(), 142.25);  // one step earlier: step 250 had none
  EXPECT_EQ(read_spike_history(path, 10).norms.size(), 10u);
  EXPECT_TRUE(read_spike_history(dir.file("none.jsonl"), 10).norms.empty());
  const SpikeHistory back = unpack_spike_history(pack_spike_history(h));
  EXPECT_EQ(back.losses, h.losses);
  EXPECT_EQ(back.norms, h.norms);
  EXPECT_TRUE(unpack_spike_history("").losses.empty());
  const SpikeHistory none = unpack_spike_history(pack_spike_history(SpikeHistory{}));
  EXPECT_TRUE(none.losses.empty() && none.norms.empty());
}

}  // namespace
}  // namespace rm
