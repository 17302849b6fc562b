#include "worker/data/dataset.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "worker/data/data_error.h"
#include "worker/data/test_util.h"

namespace rm {
namespace {

// Shard k holds tokens k * 10000 + position, so a token says where it came from and a window
// is contiguous exactly when its tokens count up by one.
std::vector<std::string> write_numbered_shards(const TempDir& dir, const std::vector<int>& sizes) {
  std::vector<std::string> paths;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<uint16_t> tokens(sizes[k]);
    for (int i = 0; i < sizes[k]; ++i) tokens[i] = static_cast<uint16_t>(k * 10000 + i);
    paths.push_back(dir.file("shard_" + std::to_string(k) + ".bin"));
    write_token_shard(paths.back(), tokens);
  }
  return paths;
}

WindowDataset open_numbered(const TempDir& dir, int seq_len) {
  return WindowDataset(TokenSource::open_shards({dir.file("shard_*.bin")}), seq_len, "train");
}

TEST(WindowDataset, WindowCounts) {
  TempDir dir;
  // seq_len 8: n=8 has no window; 9..16 give one (shifted within the slack); then
  // floor(n/8) - 1. Evaluation: floor((n - 1) / 8).
  write_numbered_shards(dir, {8, 9, 15, 16, 17, 24, 100});
  WindowDataset data = open_numbered(dir, 8);
  EXPECT_EQ(data.num_windows(), 0u + 1 + 1 + 1 + 1 + 2 + 11);
  EXPECT_EQ(data.num_eval_windows(), 0u + 1 + 1 + 1 + 2 + 2 + 12);
  EXPECT_EQ(data.seq_len(), 8);
  EXPECT_EQ(data.total_tokens(), 8u + 9 + 15 + 16 + 17 + 24 + 100);
}

TEST(WindowDataset, WindowsAreContiguousAndNeverCrossSegments) {
  TempDir dir;
  const std::vector<int> sizes = {9, 15, 100, 333, 1000, 20};
  write_numbered_shards(dir, sizes);
  const int seq_len = 8;
  WindowDataset data = open_numbered(dir, seq_len);
  std::vector<int32_t> inputs(seq_len), targets(seq_len);
  for (uint64_t g = 0; g < 5 * data.num_windows(); ++g) {
    const Window w = data.sample(42, g);
    ASSERT_LE(w.offset + seq_len + 1, static_cast<uint64_t>(sizes[w.segment]));
    data.fill_window(w, inputs.data(), targets.data());
    EXPECT_EQ(inputs[0], static_cast<int32_t>(w.segment * 10000 + w.offset));
    for (int j = 0; j < seq_len; ++j) {
      ASSERT_EQ(inputs[j], inputs[0] + j) << "g=" << g;
      ASSERT_EQ(targets[j], inputs[j] + 1) << "g=" << g;  // targets are inputs shifted by one
    }
  }
}

TEST(WindowDataset, EachEpochVisitsEveryWindowOnce) {
  TempDir dir;
  write_numbered_shards(dir, {9, 15, 100, 333, 1000});
  const int seq_len = 8;
  WindowDataset data = open_numbered(dir, seq_len);
  const uint64_t n = data.num_windows();
  std::vector<std::set<uint64_t>> offsets_of_window(n);
  for (uint64_t epoch = 0; epoch < 12; ++epoch) {
    std::set<uint64_t> indices;
    std::set<std::pair<size_t, uint64_t>> places;
    for (uint64_t i = 0; i < n; ++i) {
      const Window w = data.sample(7, epoch * n + i);
      EXPECT_EQ(data.epoch(epoch * n + i), epoch);
      indices.insert(w.index);
      places.insert({w.segment, w.offset});
      offsets_of_window[w.index].insert(w.offset);
    }
    EXPECT_EQ(indices.size(), n) << "epoch " << epoch;
    EXPECT_EQ(*indices.rbegin(), n - 1);
    EXPECT_EQ(places.size(), n) << "epoch " << epoch;
  }
  // The alignment changes between epochs: a window in the 1000-token shard has 8 possible
  // shifts, and 12 epochs landing on one is (1/8)^11.
  EXPECT_GT(offsets_of_window[n - 1].size(), 1u);
  // The 9-token shard's only window has no slack to shift in.
  EXPECT_EQ(offsets_of_window[0].size(), 1u);
}

TEST(WindowDataset, OrderIsAPureFunctionOfSeedAndIndex) {
  TempDir dir;
  write_numbered_shards(dir, {100, 333, 1000});
  const int seq_len = 16;
  WindowDataset a = open_numbered(dir, seq_len);
  WindowDataset b = open_numbered(dir, seq_len);  // an independent instance, e.g. another rank
  const int global_batch = 8;
  const size_t row = static_cast<size_t>(seq_len);
  for (uint64_t step : {0, 1, 13, 1000}) {
    const uint64_t first = step * global_batch;
    std::vector<int32_t> in(global_batch * row), tg(global_batch * row);
    a.fill_batch(1337, first, global_batch, in.data(), tg.data());
    // Two halves equal one batch of twice the size.
    std::vector<int32_t> in2(global_batch * row), tg2(global_batch * row);
    b.fill_batch(1337, first, global_batch / 2, in2.data(), tg2.data());
    b.fill_batch(1337, first + global_batch / 2, global_batch / 2, in2.data() + in2.size() / 2,
                 tg2.data() + tg2.size() / 2);
    EXPECT_EQ(in, in2);
    EXPECT_EQ(tg, tg2);
    // Any world size: rank r of R takes global_batch / R samples starting at first + r * that.
    for (int world : {1, 2, 4, 8}) {
      const int per_rank = global_batch / world;
      std::vector<int32_t> gathered;
      for (int rank = 0; rank < world; ++rank) {
        std::vector<int32_t> part(per_rank * row), part_tg(per_rank * row);
        b.fill_batch(1337, first + rank * per_rank, per_rank, part.data(), part_tg.data());
        gathered.insert(gathered.end(), part.begin(), part.end());
      }
      EXPECT_EQ(gathered, in) << "world " << world << " step " << step;
    }
  }
  // A different seed gives a different order.
  std::vector<int32_t> x(8 * row), y(8 * row), t(8 * row);
  a.fill_batch(1, 0, 8, x.data(), t.data());
  a.fill_batch(2, 0, 8, y.data(), t.data());
  EXPECT_NE(x, y);
}

TEST(WindowDataset, EvalWindowsAreInFileOrderAndWrap) {
  TempDir dir;
  write_numbered_shards(dir, {20, 9, 40});  // eval windows per shard at seq_len 8: 2, 1, 4
  const int seq_len = 8;
  WindowDataset data = open_numbered(dir, seq_len);
  ASSERT_EQ(data.num_eval_windows(), 7u);
  const std::pair<size_t, uint64_t> expected[] = {{0, 0}, {0, 8},  {1, 0}, {2, 0},
                                                  {2, 8}, {2, 16}, {2, 24}};
  for (uint64_t k = 0; k < 14; ++k) {
    const Window w = data.eval_window(k);
    EXPECT_EQ(w.index, k % 7);
    EXPECT_EQ(w.segment, expected[k % 7].first) << k;
    EXPECT_EQ(w.offset, expected[k % 7].second) << k;
  }
  // A batch that runs off the end wraps to the start.
  std::vector<int32_t> in(3 * seq_len), tg(3 * seq_len);
  data.fill_eval_batch(6, 3, in.data(), tg.data());
  EXPECT_EQ(in[0], 20024);
  EXPECT_EQ(in[seq_len], 0);
  EXPECT_EQ(in[2 * seq_len], 8);
  EXPECT_EQ(tg[2 * seq_len + seq_len - 1], 16);
}

TEST(WindowDataset, TextTargetsAreShiftedInputs) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text.push_back(static_cast<char>((i * 7919) % 251));
  const std::string path = dir.write("t.txt", text);
  WindowDataset data(TokenSource::open_text(path, 0.0, 0.9), 32, "train");
  std::vector<int32_t> in(4 * 32), tg(4 * 32);
  data.fill_batch(3, 77, 4, in.data(), tg.data());
  for (int r = 0; r < 4; ++r) {
    const Window w = data.sample(3, 77 + r);
    for (int j = 0; j < 32; ++j) {
      EXPECT_EQ(in[r * 32 + j], static_cast<unsigned char>(text[w.offset + j]));
      EXPECT_EQ(tg[r * 32 + j], static_cast<unsigned char>(text[w.offset + j + 1]));
    }
  }
}

TEST(WindowDataset, TooShortIsADataError) {
  TempDir dir;
  const std::string path = dir.write("t.txt", std::string(100, 'x'));
  EXPECT_EQ(data_error_of([&] { WindowDataset(TokenSource::open_text(path), 256, "train"); }),
            path + ": train data has 100 tokens, fewer than seq_len+1 = 257");
  // The val part of a split file names its range.
  EXPECT_EQ(
      data_error_of([&] { WindowDataset(TokenSource::open_text(path, 0.9, 1.0), 10, "val"); }),
      path + "[90, 100): val data has 10 tokens, fewer than seq_len+1 = 11");
  // Exactly seq_len + 1 tokens is one window.
  EXPECT_EQ(WindowDataset(TokenSource::open_text(path), 99).num_windows(), 1u);
  // Enough tokens in total, but no single file holds a window.
  write_numbered_shards(dir, {200, 200, 200});
  const std::string message = data_error_of([&] { open_numbered(dir, 256); });
  EXPECT_NE(message.find("train data has 600 tokens in 3 files or parts, but the longest has "
                         "200, fewer than seq_len+1 = 257"),
            std::string::npos)
      << message;
}

TEST(WindowDataset, RejectsBadArguments) {
  TempDir dir;
  const std::string path = dir.write("t.txt", std::string(100, 'x'));
  EXPECT_THROW(WindowDataset(TokenSource::open_text(path), 0), std::invalid_argument);
  WindowDataset data(TokenSource::open_text(path), 10);
  int32_t buf[10];
  EXPECT_THROW(data.fill_batch(0, 0, -1, buf, buf), std::invalid_argument);
}

}  // namespace
}  // namespace rm
