// Helpers shared by the checkpoint tests: scratch directories, expected errors, deterministic
// buffer contents derived from the step (so any checkpoint's data can be checked against the
// step it claims), and an in-process N-rank save.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/manifest.h"
#include "io/posix_io.h"
#include "testing/temp_dir.h"

namespace rm {
namespace testutil {

// TempDir: testing/temp_dir.h, in this namespace.

// The message of the CheckpointError or IoError `f` throws ("" and a test failure if it throws
// neither).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a CheckpointError or an IoError";
  return "";
}

inline const std::vector<std::string>& buffer_names() {
  static const std::vector<std::string> names = {"params", "adam_m", "adam_v"};
  return names;
}

// Element i of buffer b at `step`: distinct across steps, buffers and positions.
inline float value_at(int64_t step, int b, uint64_t i) {
  return static_cast<float>((i * 31 + static_cast<uint64_t>(b) * 1000003) % 1048573) +
         static_cast<float>(step % 4096) * 0.25f + static_cast<float>(b) * 0.0625f;
}

inline std::vector<float> buffer_at(int64_t step, int b, uint64_t n) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = value_at(step, b, i);
  return v;
}

// [begin, end) of each of `parts` slices of [0, n): deliberately uneven (weights 1, 2, 3, ...).
inline std::vector<std::pair<uint64_t, uint64_t>> uneven_split(uint64_t n, int parts) {
  uint64_t weight_sum = 0;
  for (int r = 0; r < parts; ++r) weight_sum += static_cast<uint64_t>(r + 1);
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t at = 0, acc = 0;
  for (int r = 0; r < parts; ++r) {
    acc += static_cast<uint64_t>(r + 1);
    const uint64_t end = (r == parts - 1) ? n : n * acc / weight_sum;
    out.emplace_back(at, end);
    at = end;
  }
  return out;
}

inline std::vector<std::pair<uint64_t, uint64_t>> even_split(uint64_t n, int parts) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (int r = 0; r < parts; ++r) out.emplace_back(n * r / parts, n * (r + 1) / parts);
  return out;
}

// The manifest a trainer would fill in, minus files.
inline Manifest manifest_template(int64_t step, int world, uint64_t n) {
  Manifest m;
  m.step = step;
  m.world_size = world;
  m.shard_mode = "optimizer";
  m.job = "model:\n  kind: mlp\n# resolved job text, opaque to checkpoint/\n";
  for (const std::string& name : buffer_names()) m.buffers.push_back(BufferInfo{name, "f32", n});
  const uint64_t rows = n / 6;
  m.tensors.push_back(TensorInfo{"layer.weight", "f32", {static_cast<int64_t>(rows), 3}, 0});
  m.tensors.push_back(
      TensorInfo{"layer.bias", "f32", {static_cast<int64_t>(n - 3 * rows)}, 3 * rows});
  m.state = {{"step", step}, {"data_cursor", step * 64}, {"rng", {{"counter", step * 3}}}};
  return m;
}

// Saves step `step` as `world` ranks in this process (each rank's slices of every buffer,
// uneven), the sync protocol: write_shard per rank, collect_shards, commit_checkpoint.
// state: the manifest's state (null: the template's).
inline std::string save_steps_checkpoint(const std::string& run_dir, int64_t step, int world,
                                         uint64_t n,
                                         const nlohmann::json& state = nlohmann::json()) {
  std::vector<std::vector<float>> data;
  for (size_t b = 0; b < buffer_names().size(); ++b) data.push_back(buffer_at(step, b, n));
  const std::string tmp = prepare_checkpoint_dir(run_dir, step);
  const auto slices = uneven_split(n, world);
  for (int r = 0; r < world; ++r) {
    std::vector<ShardSlice> mine;
    for (size_t b = 0; b < data.size(); ++b) {
      mine.push_back(ShardSlice{buffer_names()[b], slices[r].first, slices[r].second,
                                data[b].data() + slices[r].first});
    }
    write_shard(tmp, step, r, mine);
  }
  Manifest m = manifest_template(step, world, n);
  if (!state.is_null()) m.state = state;
  m.files = collect_shards(tmp, step, world, 0);
  return commit_checkpoint(run_dir, step, m);
}

}  // namespace testutil
}  // namespace rm
