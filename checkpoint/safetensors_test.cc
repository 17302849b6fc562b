#include "checkpoint/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_test_util.h"
#include "io/atomic_file.h"

namespace rm {
namespace {

TEST(Safetensors, HeaderIsValidAndDataRoundTrips) {
  TempDir dir;
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {0.5f, -0.5f, 7}, s = {42};
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path,
                    {{"wte.weight", "F32", {2, 3}, w.data()},
                     {"ln_f.bias", "F32", {3}, b.data()},
                     {"scale", "F32", {}, s.data()},
                     {"empty", "F32", {0, 4}, nullptr}},
                    {{"format", "pt"}, {"step", "1200"}});

  const SafetensorsHeader h = read_safetensors_header(path);
  EXPECT_EQ(h.header_bytes % 8, 0u);
  EXPECT_EQ(h.data_bytes, (6 + 3 + 1) * sizeof(float));
  ASSERT_EQ(h.tensors.size(), 4u);
  // Name order, contiguous offsets.
  EXPECT_EQ(h.tensors[0].name, "empty");
  EXPECT_EQ(h.tensors[0].end, 0u);
  EXPECT_EQ(h.tensors[1].name, "ln_f.bias");
  EXPECT_EQ(h.tensors[1].begin, 0u);
  EXPECT_EQ(h.tensors[1].end, 12u);
  EXPECT_EQ(h.tensors[2].name, "scale");
  EXPECT_EQ(h.tensors[2].shape, std::vector<int64_t>{});
  EXPECT_EQ(h.tensors[3].name, "wte.weight");
  EXPECT_EQ(h.tensors[3].begin, 16u);
  EXPECT_EQ(h.tensors[3].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.metadata.at("step"), "1200");
  EXPECT_EQ(read_safetensors_f32(path, h, "wte.weight"), w);
  EXPECT_EQ(read_safetensors_f32(path, h, "scale"), s);

  // The raw layout, checked independently of the reader.
  const std::string raw = io::read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n, h.header_bytes);
  const auto j = nlohmann::json::parse(raw.substr(8, n));
  EXPECT_EQ(j["wte.weight"]["dtype"], "F32");
  EXPECT_EQ(j["wte.weight"]["data_offsets"], (nlohmann::json{16, 40}));
  EXPECT_EQ(j["__metadata__"]["format"], "pt");
  EXPECT_EQ(raw.size(), 8 + n + 40);
  EXPECT_EQ(raw.substr(8 + n + 16, 4), std::string(reinterpret_cast<const char*>(w.data()), 4));
}

TEST(Safetensors, WriterRejectsBadInput) {
  TempDir dir;
  const float x = 1;
  const std::string path = dir.file("m.safetensors");
  EXPECT_THROW(write_safetensors(path, {{"a", "F32", {1}, &x}, {"a", "F32", {1}, &x}}),
               CheckpointError);
  EXPECT_THROW(write_safetensors(path, {{"a", "F16", {1}, &x}}), CheckpointError);
  EXPECT_THROW(write_safetensors(path, {{"a", "F32", {-1}, &x}}), CheckpointError);
  EXPECT_THROW(write_safetensors(path, {{"a", "F32", {2}, nullptr}}), CheckpointError);
  EXPECT_THROW(write_safetensors(path, {{"__metadata__", "F32", {1}, &x}}), CheckpointError);
  EXPECT_FALSE(io::exists(path));  // nothing half-written
}

void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
}

TEST(Safetensors, ReaderRejectsBrokenFiles) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const auto rejects = [&](const std::string& header, size_t data, const char* reason) {
    write_raw(path, header, data);
    try {
      read_safetensors_header(path);
      ADD_FAILURE() << "accepted: " << header;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  };
  rejects("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "outside");
  rejects("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "do not match");
  rejects("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "contiguous");
  rejects("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "cover 4 of 8");
  rejects("{\"a\":{\"dtype\":\"X9\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype");
  rejects("{\"a\":", 0, "not valid JSON");
  std::ofstream(path, std::ios::binary) << std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
  EXPECT_THROW(read_safetensors_header(path), CheckpointError);
}

}  // namespace
}  // namespace rm
