// The manifest of a checkpoint: RUN_DIR/checkpoints/step_NNNNNNNN/manifest.json.
//
// checkpoint/ knows nothing of models, only of named flat buffers, the tensors that are views
// into them, and the shard files that hold slices of them:
//
//   buffers  every flat buffer saved ("params", "adam_m", "adam_v"): dtype f32, element count.
//   tensors  the caller's tensor list (name, dtype, shape, element offset). All buffers share
//            this layout (optimizer moments mirror the parameters), so every tensor must lie
//            inside every buffer. Recorded for tools and exports; loading needs only buffers.
//   files    every shard file: name, writing rank, exact byte size and its pieces. A piece is
//            elements [begin, end) of one buffer at byte `offset` of the file, `bytes` long,
//            with the XXH64 (seed 0) of those bytes. The pieces of each buffer, over all
//            files, tile [0, count) exactly: no gap, no overlap. That is what makes a
//            checkpoint written by N ranks readable by M ranks (checkpoint_reader.h).
//   state    a free-form JSON object the caller fills (data cursor, RNG counters, optimizer
//            step, schedule position...); checkpoint/ only checks that it is an object.
//   job      the resolved job, opaque text (YAML); shard_mode, world_size, step: as written.
//   state.manifest_xxh64  the XXH64 of the manifest's own text with these 16 digits as zeros
//            (with_manifest_checksum): the job and the state, which no file's checksum covers
//            and nothing else checks, cannot change unseen (a flipped byte in the job once ran a
//            model of other heads, verified). Inside the free-form state, so that builds from
//            before it (which refuse unknown top-level fields) still read the checkpoint.
//            Manifests written before 2026-11-30 have none and are read as before; parse takes
//            it out of Manifest::state.
//
// Floats are stored little-endian (the only byte order this code builds for).
//
// parse_manifest trusts nothing: every field is type-checked, unknown fields are rejected,
// counts are bounded, ranges are checked against buffers and files, names are plain file names.
// Any problem throws CheckpointError "<path>: <field>: <reason>", e.g.
//   ".../step_00001200/manifest.json: files[1].pieces[0].end: 5000 is past the end of buffer
//    'params' (4000 elements)".
// All functions are pure (no I/O) and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.h"

namespace rm {

inline constexpr int kManifestVersion = 1;
inline constexpr const char* kManifestChecksumKey = "manifest_xxh64";  // in the state
inline constexpr const char* kUnsealed = "0000000000000000";  // its value while it is hashed

// Bounds that make a hostile manifest harmless (no overflow, no absurd allocation) while
// leaving room for any real job: 2^48 floats is 1 PiB per buffer.
inline constexpr uint64_t kMaxElements = uint64_t{1} << 48;
inline constexpr uint64_t kMaxFileBytes = uint64_t{1} << 52;
inline constexpr int kMaxWorldSize = 1 << 20;
inline constexpr size_t kMaxFiles = size_t{1} << 20;
inline constexpr size_t kMaxPiecesPerFile = size_t{1} << 16;
inline constexpr size_t kMaxBuffers = 256;
inline constexpr size_t kMaxTensors = size_t{1} << 20;
inline constexpr size_t kMaxTensorRank = 16;
inline constexpr size_t kMaxManifestJobBytes = size_t{16} << 20;
// Checked with fstat before a byte is read. A rank adds ~620 bytes (its file entry of three
// pieces, indented): 64 MiB is ~100,000 ranks; json_guard.h's value count bounds the tree built
// from the text.
inline constexpr size_t kMaxManifestBytes = size_t{64} << 20;

struct BufferInfo {
  std::string name;  // [A-Za-z0-9_.-], 1-128 chars
  std::string dtype = "f32";
  uint64_t count = 0;  // elements
};

struct TensorInfo {
  std::string name;  // printable ASCII, 1-1024 chars
  std::string dtype = "f32";
  std::vector<int64_t> shape;  // row-major; [] is a scalar
  uint64_t offset = 0;         // elements from the start of each buffer
};

struct PieceInfo {
  std::string buffer;
  uint64_t begin = 0, end = 0;  // element range in the buffer
  uint64_t offset = 0;          // byte offset in the file
  uint64_t bytes = 0;           // (end - begin) * 4
  uint64_t xxh64 = 0;           // XXH64, seed 0, of the piece's bytes
};

struct ShardFileInfo {
  std::string name;   // plain file name inside the checkpoint directory
  int rank = 0;       // the rank that wrote it
  uint64_t size = 0;  // the file's exact size in bytes
  std::vector<PieceInfo> pieces;
};

struct Manifest {
  int64_t step = 0;
  int world_size = 1;
  std::string shard_mode;  // e.g. "none", "optimizer", "gradients", "full"
  std::string job;         // the resolved job file, opaque
  std::vector<BufferInfo> buffers;
  std::vector<TensorInfo> tensors;
  std::vector<ShardFileInfo> files;
  nlohmann::json state = nlohmann::json::object();

  const BufferInfo* find_buffer(const std::string& name) const;  // null if absent
  uint64_t data_bytes() const;                                   // sum of file sizes
};

// Serialises (format "ringmaster-checkpoint", version 1), its checksum last. Does not validate;
// throws CheckpointError only if a string is not valid UTF-8 (JSON cannot hold it).
std::string to_json(const Manifest& manifest);

// `text` (a manifest as serialised) with its state's manifest_xxh64 member, "0000000000000000"
// there exactly once, set to the XXH64 (seed 0) of `text`. parse_manifest checks it.
std::string with_manifest_checksum(const std::string& text);

// Parses and validates; see the header comment. Never throws anything but CheckpointError.
Manifest parse_manifest(const std::string& text, const std::string& path_for_errors);

// The semantic checks of parse_manifest, for manifests built in memory (commit runs them on
// what it is about to write: it trusts nothing, not even its caller).
void validate_manifest(const Manifest& manifest, const std::string& path_for_errors);

// The descriptor a rank writes beside its shard (shard_NNNNN.json) so that rank 0 can assemble
// the manifest without a collective: {"format":"ringmaster-shard","version":1,"step":N,
// "file":{...as in the manifest...}}. parse checks the file entry on its own (buffers are
// checked when the manifest is assembled) and that the step is `expected_step`.
std::string shard_descriptor_to_json(int64_t step, const ShardFileInfo& file);
ShardFileInfo parse_shard_descriptor(const std::string& text, const std::string& path_for_errors,
                                     int64_t expected_step);

}  // namespace rm
