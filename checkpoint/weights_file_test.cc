// weights.bin written in pieces as the parameters stream past (WeightsFileWriter): the same
// bytes as one write, nothing left behind when the pieces do not add up to the announced count,
// and still all-or-nothing through a power cut at any call, the header's late checksum included.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/weights_file.h"
#include "io/io_test_util.h"

namespace rm {
namespace {

using io::test::FaultyRun;
using io::test::ScratchDir;

std::vector<float> ramp(size_t n, float from) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from + 0.25f * static_cast<float>(i);
  return v;
}

// Writes `w` as pieces of the given sizes, in order.
void write_in_pieces(const std::string& path, const std::vector<float>& w,
                     const std::vector<size_t>& pieces) {
  WeightsFileWriter out(path, w.size());
  size_t at = 0;
  for (const size_t n : pieces) {
    out.append(w.data() + at, n);
    at += n;
  }
  out.commit();
}

TEST(WeightsFile, PiecesMakeTheSameFileAsOneWrite) {
  ScratchDir dir;
  const std::vector<float> w = ramp(1000, -3.0f);
  save_weights(dir.file("whole.bin"), w.data(), w.size());
  write_in_pieces(dir.file("pieces.bin"), w, {1, 0, 500, 498, 1});
  EXPECT_EQ(io::read_file(dir.file("pieces.bin")), io::read_file(dir.file("whole.bin")));
  EXPECT_EQ(load_weights(dir.file("pieces.bin"), w.size()), w);
}

TEST(WeightsFile, PiecesThatDoNotAddUpLeaveTheOldFileAndNoTemporary) {
  ScratchDir dir;
  const std::string path = dir.file("weights.bin");
  const std::vector<float> old = ramp(8, 1.0f), w = ramp(8, 100.0f);
  save_weights(path, old.data(), old.size());
  try {
    write_in_pieces(path, w, {4, 3});
    ADD_FAILURE() << "7 of 8 parameters committed";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": only 7 of 8 parameters were written");
  }
  try {
    write_in_pieces(path, w, {4, 5});
    ADD_FAILURE() << "9 of 8 parameters accepted";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": 9 parameters written, 8 announced");
  }
  EXPECT_EQ(load_weights(path, old.size()), old);
  EXPECT_EQ(io::list_dir(dir.path()), std::vector<std::string>{"weights.bin"});
}

// The power goes at each call of a streamed replacement of weights.bin in turn (the header,
// each piece, the checksum written over the header, the fsync, the rename, the directory's
// fsync): what the disk holds afterwards loads as the old weights or the new, never fails.
TEST(WeightsFile, APowerCutAtAnyCallLeavesTheOldWeightsOrTheNew) {
  const std::vector<float> old = ramp(300, 1.0f), w = ramp(300, -7.0f);
  const std::vector<size_t> pieces = {100, 150, 50};
  // A first pass counts the calls: the old file's, then the replacement's.
  int64_t before = 0, after = 0;
  {
    FaultyRun r;
    save_weights(r.at("weights.bin"), old.data(), old.size());
    before = r.fs().counted();
    write_in_pieces(r.at("weights.bin"), w, pieces);
    after = r.fs().counted();
  }
  ASSERT_GE(after - before, 7) << "open, header, 3 pieces, checksum, fsync, ...";
  int saw_old = 0, saw_new = 0;
  for (int64_t cut = before + 1; cut <= after + 1; ++cut) {
    io::FaultPlan plan;
    plan.at = cut;
    FaultyRun r(plan);
    save_weights(r.at("weights.bin"), old.data(), old.size());
    try {
      write_in_pieces(r.at("weights.bin"), w, pieces);
    } catch (const IoError&) {
      // the power is off from call `cut` on
    }
    r.power_cut();
    const std::vector<float> got = load_weights(r.at("weights.bin"), w.size());
    if (got == old) {
      ++saw_old;
    } else {
      EXPECT_EQ(got, w) << "power cut before call " << cut;
      ++saw_new;
    }
  }
  EXPECT_EQ(saw_old, after - before) << "every cut inside the replacement keeps the old file";
  EXPECT_EQ(saw_new, 1) << "only the replacement that finished is the new file";
}

}  // namespace
}  // namespace rm
