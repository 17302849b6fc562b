// parse_manifest trusts nothing: each broken field is rejected with the path and the field.
#include "checkpoint/manifest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "checkpoint/checkpoint_paths.h"

namespace rm {
namespace {

using nlohmann::json;

const char* const kPath = "/run/checkpoints/step_00000010/manifest.json";

// Two ranks, buffers "params" and "adam_m" of 10 elements, rank 0 holding [0,4).
Manifest good() {
  Manifest m;
  m.step = 10;
  m.world_size = 2;
  m.shard_mode = "optimizer";
  m.job = "model: {kind: mlp}\n";
  m.buffers = {{"params", "f32", 10}, {"adam_m", "f32", 10}};
  m.tensors = {{"w", "f32", {2, 4}, 0}, {"b", "f32", {2}, 8}};
  for (int r = 0; r < 2; ++r) {
    ShardFileInfo f;
    f.name = r == 0 ? "shard_00000.bin" : "shard_00001.bin";
    f.rank = r;
    const uint64_t b = r == 0 ? 0 : 4, e = r == 0 ? 4 : 10;
    f.pieces.push_back({"params", b, e, 0, (e - b) * 4, 0x1234 + uint64_t(r)});
    f.pieces.push_back({"adam_m", b, e, (e - b) * 4, (e - b) * 4, 0xfedcba9876543210ull});
    f.size = 2 * (e - b) * 4;
    m.files.push_back(f);
  }
  m.state = {{"data_cursor", 640}, {"rng", {1, 2, 3}}};
  return m;
}

void expect_rejected(const std::function<void(json&)>& edit, const std::string& message) {
  json j = json::parse(to_json(good()));
  // The structure's checks, on a manifest without its own checksum (as written before it had
  // one): an edit re-dumps the text, which the checksum would refuse first.
  j["state"].erase(kManifestChecksumKey);
  edit(j);
  try {
    parse_manifest(j.dump(), kPath);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(std::string(kPath) + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(message), std::string::npos) << what;
  }
}

// The job and the state are opaque to checkpoint/ and no file's checksum covers them: the
// manifest's own does. A flipped byte in the job (heads 4 -> 2 ran a model of other heads, and
// `ckpt verify` said "ok" before) is refused, naming the checksum; so is a checksum that is not
// in the text as written. A manifest without one (written before) is read as before.
TEST(Manifest, ItsOwnChecksumCoversTheJobAndTheState) {
  Manifest m = good();
  m.job = "model: {heads: 4}\n";
  const std::string text = to_json(m);
  ASSERT_NE(text.find("\"manifest_xxh64\": \""), std::string::npos) << text;
  // Inside the state (free-form), not a top-level field that builds from before would refuse.
  EXPECT_TRUE(json::parse(text)["state"].contains(kManifestChecksumKey));
  EXPECT_EQ(parse_manifest(text, kPath).state.count(kManifestChecksumKey), 0u);
  EXPECT_EQ(text.substr(text.size() - 3), "\n}\n");
  EXPECT_NO_THROW(parse_manifest(text, kPath));
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"heads: 4", "heads: 2"},
                                 {"\"data_cursor\": 640", "\"data_cursor\": 650"}}) {
    std::string bad = text;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    try {
      parse_manifest(bad, kPath);
      ADD_FAILURE() << "accepted " << to;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("manifest_xxh64: checksum mismatch"), std::string::npos)
          << e.what();
    }
  }
  // Re-dumped (the member no longer where the writer put it), and without the member at all.
  json j = json::parse(text);
  try {
    parse_manifest(j.dump(), kPath);
    ADD_FAILURE() << "accepted a re-dumped manifest";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("manifest_xxh64: not in the manifest's text once"),
              std::string::npos)
        << e.what();
  }
  j["state"].erase(kManifestChecksumKey);
  EXPECT_EQ(parse_manifest(j.dump(1), kPath).job, m.job);
}

// The reader finds the checksum by its key: a state that holds a member of that name of its own
// (an object nested in it) would be written and then never read back. The writer refuses it.
TEST(Manifest, AStateMemberNamedAsItsChecksumIsRefusedWhenWritten) {
  Manifest m = good();
  m.state["line"] = {{kManifestChecksumKey, "0123456789abcdef"}};
  EXPECT_THROW(to_json(m), CheckpointError);
}

// A job of more ranks than the first bound on JSON values allowed (2^20 values, ~21,800 ranks
// at 48 values each): its manifest is written and read back. (Before, commit wrote it and every
// reader refused it, "more than 1048576 JSON values".)
TEST(Manifest, OneOf25000RanksIsReadBack) {
  constexpr int kRanks = 25000;
  Manifest m;
  m.step = 7;
  m.world_size = kRanks;
  m.shard_mode = "optimizer";
  m.job = "model: {kind: mlp}\n";
  const std::vector<std::string> names = {"params", "adam_m", "adam_v"};
  for (const std::string& name : names) m.buffers.push_back({name, "f32", uint64_t{kRanks} * 1000});
  m.tensors = {{"w", "f32", {kRanks, 1000}, 0}};
  for (int r = 0; r < kRanks; ++r) {
    ShardFileInfo f;
    f.name = shard_file_name(r);
    f.rank = r;
    const uint64_t begin = uint64_t{1000} * static_cast<uint64_t>(r);
    for (const std::string& name : names) {
      f.pieces.push_back({name, begin, begin + 1000, f.size, 4000, 0x0123456789abcdefull + begin});
      f.size += 4000;
    }
    m.files.push_back(std::move(f));
  }
  const std::string text = to_json(m);
  const Manifest back = parse_manifest(text, kPath);
  ASSERT_EQ(back.files.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(back.files.back().pieces[2].xxh64, m.files.back().pieces[2].xxh64);
  EXPECT_EQ(back.files.back().name, "shard_24999.bin");
}

TEST(Manifest, RoundTrip) {
  const Manifest m = good();
  const std::string text = to_json(m);
  const Manifest back = parse_manifest(text, kPath);
  EXPECT_EQ(to_json(back), text);
  EXPECT_EQ(back.files[1].pieces[1].xxh64, 0xfedcba9876543210ull);
  EXPECT_EQ(back.state, m.state);
  EXPECT_EQ(back.data_bytes(), 80u);
  EXPECT_NE(text.find("\"xxh64\": \"fedcba9876543210\""), std::string::npos);
}

TEST(Manifest, RejectsBadJsonAndTypes) {
  EXPECT_THROW(parse_manifest("", kPath), CheckpointError);
  EXPECT_THROW(parse_manifest("[]", kPath), CheckpointError);
  EXPECT_THROW(parse_manifest(std::string(1000, '['), kPath), CheckpointError);
  expect_rejected([](json& j) { j.erase("buffers"); }, "buffers: missing");
  expect_rejected([](json& j) { j["extra"] = 1; }, "extra: unknown field");
  expect_rejected([](json& j) { j["format"] = "other"; }, "format: 'other'");
  expect_rejected([](json& j) { j["step"] = 1.5; }, "step: expected a non-negative integer");
  expect_rejected([](json& j) { j["step"] = -1; }, "step: -1 is negative");
  expect_rejected([](json& j) { j["world_size"] = 0; }, "world_size: 0 is outside");
  expect_rejected([](json& j) { j["world_size"] = uint64_t{1} << 40; }, "world_size");
  expect_rejected([](json& j) { j["shard_mode"] = 3; }, "shard_mode: expected a string");
  expect_rejected([](json& j) { j["state"] = json::array(); }, "state: expected an object");
  expect_rejected([](json& j) { j["buffers"][0]["dtype"] = "f16"; }, "buffers[0].dtype");
  expect_rejected([](json& j) { j["buffers"][1]["name"] = "params"; }, "duplicate 'params'");
  expect_rejected([](json& j) { j["buffers"][1]["name"] = "a b"; }, "buffers[1].name");
  expect_rejected([](json& j) { j["files"][0]["pieces"][0]["xxh64"] = 12; },
                  "files[0].pieces[0].xxh64: expected a string");
  expect_rejected([](json& j) { j["files"][0]["pieces"][0]["xxh64"] = "ABCDEF0123456789"; },
                  "not 16 lowercase hex digits");
  expect_rejected([](json& j) { j["files"][0]["rank"] = 2; }, "files[0].rank: 2 is outside");
  expect_rejected(
      [](json& j) {
        j["state"]["deep"] = json::parse(std::string(70, '[') + std::string(70, ']'));
      },
      "nested deeper");
}

// The state's members that the program reads are checked by type when the manifest is read,
// naming the member (before: `"best": "yes"` passed, and retention's lookup of it threw
// nlohmann's type_error out of a save that had already committed).
TEST(Manifest, TheStateMembersItReadsHaveTheirTypes) {
  expect_rejected([](json& j) { j["state"]["best"] = "yes"; }, "state.best: must be true or false");
  expect_rejected([](json& j) { j["state"]["best_val_loss"] = "low"; },
                  "state.best_val_loss: must be a number");
  expect_rejected([](json& j) { j["state"]["best_step"] = 1.5; },
                  "state.best_step: must be a whole number");
  expect_rejected([](json& j) { j["state"]["optimizer_steps"] = -3; },
                  "state.optimizer_steps: must be a whole number >= 0");
  expect_rejected(
      [](json& j) {
        j["state"]["skipped_batches"] = json::array({4, "x"});
      },
      "state.skipped_batches: must be a list of whole numbers");
  json j = json::parse(to_json(good()));
  j["state"].erase(kManifestChecksumKey);
  j["state"]["best"] = true;
  j["state"]["best_val_loss"] = 1.25;
  j["state"]["best_step"] = 40;
  j["state"]["optimizer_steps"] = 40;
  j["state"]["skipped_batches"] = json::array({5, 7});
  EXPECT_NO_THROW(parse_manifest(j.dump(), kPath));
}

// A damaged or hostile manifest's bytes are named in the message as printable text (\xNN),
// never echoed raw to the terminal, and a long run of them is cut.
TEST(Manifest, ItsBytesInAMessageArePrintable) {
  const auto message_of = [](const std::string& text) {
    try {
      parse_manifest(text, kPath);
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "accepted";
    return std::string();
  };
  const auto printable = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
  };
  const std::string garbage("\x89PNG\r\n\x1a\n\x1b[2J\xff\xfe", 13);
  const std::string m1 = message_of(garbage);
  EXPECT_TRUE(printable(m1)) << m1;
  EXPECT_NE(m1.find("\\x89"), std::string::npos) << m1;
  // A value the parser reads whole before it fails: an unterminated string of 1 MiB.
  const std::string m2 = message_of("{\"format\": \"" + std::string(1 << 20, 'a'));
  EXPECT_LT(m2.size(), 5000u) << m2.size();
  // A field's name and a string value from the file.
  json j = json::parse(to_json(good()));
  j["state"].erase(kManifestChecksumKey);
  j["format"] = "\x1b]0;owned\x07";
  const std::string m3 = message_of(j.dump());
  EXPECT_TRUE(printable(m3)) << m3;
  EXPECT_NE(m3.find("format: '\\x1b]0;owned\\x07'"), std::string::npos) << m3;
  j = json::parse(to_json(good()));
  j["state"].erase(kManifestChecksumKey);
  j["\x1b[31mred"] = 1;
  const std::string m4 = message_of(j.dump());
  EXPECT_NE(m4.find("\\x1b[31mred: unknown field"), std::string::npos) << m4;
}

TEST(Manifest, RejectsBadNames) {
  for (const char* name :
       {"..", ".", "../x", "a/b", "/abs", ".hidden", "manifest.json", "", "x\ny", "sp ace"}) {
    expect_rejected([&](json& j) { j["files"][0]["name"] = name; }, "is not a plain file name");
  }
  expect_rejected([](json& j) { j["files"][1]["name"] = "shard_00000.bin"; }, "duplicate");
  expect_rejected([](json& j) { j["tensors"][1]["name"] = "w"; }, "tensors[1].name: duplicate");
}

TEST(Manifest, RejectsBadRanges) {
  auto piece = [](json& j, int f, int p) -> json& { return j["files"][f]["pieces"][p]; };
  expect_rejected([&](json& j) { piece(j, 0, 0)["bytes"] = 12; }, "bytes: 12 != 4 * 4 elements");
  expect_rejected([&](json& j) { piece(j, 0, 0)["end"] = 3; }, "!= 4 * 3 elements");
  expect_rejected(
      [&](json& j) {
        piece(j, 1, 0)["begin"] = 3;  // overlaps rank 0's [0,4)
        piece(j, 1, 0)["bytes"] = 28;
        piece(j, 1, 1)["offset"] = 28;
        j["files"][1]["size"] = 52;
      },
      "overlaps");
  expect_rejected(
      [&](json& j) {
        piece(j, 1, 0)["begin"] = 5;
        piece(j, 1, 0)["bytes"] = 20;
      },
      "elements [4,5) are in no piece");
  expect_rejected([&](json& j) { j["buffers"][0]["count"] = 11; }, "elements [10,11) are in no");
  expect_rejected([&](json& j) { j["buffers"][0]["count"] = 9; }, "past the end of buffer");
  expect_rejected([&](json& j) { piece(j, 0, 1)["offset"] = 8; }, "overlap bytes");
  expect_rejected([&](json& j) { piece(j, 0, 1)["offset"] = 20; }, "past the end of the file");
  expect_rejected([&](json& j) { piece(j, 0, 0)["begin"] = 5; }, "end 4 < begin 5");
  expect_rejected([&](json& j) { piece(j, 0, 0)["buffer"] = "grads"; }, "'grads' is not in");
  expect_rejected([&](json& j) { j["tensors"][1]["offset"] = 9; }, "past the end of buffer");
  expect_rejected([&](json& j) { j["tensors"][0]["shape"] = {-2, 4}; }, "is negative");
  expect_rejected(
      [&](json& j) {
        j["tensors"][0]["shape"] = {1u << 30, 1u << 30};
      },
      "more than 2^48 elements");
  expect_rejected([&](json& j) { piece(j, 0, 0)["end"] = uint64_t{1} << 62; }, "larger than");
}

TEST(Manifest, EmptyPiecesAndBuffersAreFine) {
  Manifest m = good();
  m.files[0].pieces.push_back({"params", 4, 4, 32, 0, 0xef46db3751d8e999ull});
  m.tensors.clear();  // tensors must lie inside every buffer, an empty one included
  m.buffers.push_back({"empty", "f32", 0});
  EXPECT_NO_THROW(parse_manifest(to_json(m), kPath));
}

TEST(Manifest, ShardDescriptorRoundTrip) {
  const Manifest m = good();
  const std::string text = shard_descriptor_to_json(10, m.files[1]);
  const ShardFileInfo f = parse_shard_descriptor(text, "d.json", 10);
  EXPECT_EQ(f.name, "shard_00001.bin");
  EXPECT_EQ(f.pieces.size(), 2u);
  EXPECT_THROW(parse_shard_descriptor(text, "d.json", 11), CheckpointError);
  EXPECT_THROW(parse_shard_descriptor(to_json(m), "d.json", 10), CheckpointError);
}

TEST(Manifest, ToJsonRejectsInvalidUtf8) {
  Manifest m = good();
  m.job = "\xff\xfe";
  EXPECT_THROW(to_json(m), CheckpointError);
}

}  // namespace
}  // namespace rm
