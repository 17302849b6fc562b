// Export to the safetensors format (Hugging Face), and a checking reader for its header:
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   JSON: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
//                    "__metadata__": {"<key>": "<value>", ...}}   (padded with spaces so the
//                    data starts 8-byte aligned)
//   the data  every tensor's raw little-endian bytes; data_offsets are relative to the start of
//             the data and tile it exactly, in name order here.
//
// Knows nothing of models: mapping a model's tensors to Hugging Face names is the caller's job.
// Blocking, thread-safe (no shared state); throws CheckpointError (IoError for I/O).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_error.h"

namespace rm {

struct SafetensorsTensor {
  std::string name;
  std::string dtype = "F32";  // the only dtype written
  std::vector<int64_t> shape;
  const float* data = nullptr;  // product(shape) floats, caller-owned, read during the call
};

// Writes `path` atomically (temporary file, fsync, rename): data goes from the callers'
// buffers straight to write(2), no copy of the weights is gathered in memory.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // data_offsets: bytes from the start of the data
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;              // N
  uint64_t data_bytes = 0;                // file size - 8 - N
  std::vector<SafetensorsEntry> tensors;  // sorted by begin
  std::map<std::string, std::string> metadata;
};

// Reads and checks the header against the file: N sane (<= 100 MB, inside the file), valid
// JSON, known dtypes, each tensor's byte size matching its shape, offsets tiling the data
// exactly. Throws CheckpointError naming the file and what is wrong.
SafetensorsHeader read_safetensors_header(const std::string& path);

// One F32 tensor's values, e.g. to compare an export with its source.
std::vector<float> read_safetensors_f32(const std::string& path, const SafetensorsHeader& header,
                                        const std::string& name);

}  // namespace rm
