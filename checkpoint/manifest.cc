// Manifest serialisation. Keys are written in a fixed, human-friendly order (ordered_json):
// a manifest is also read by people deciding which checkpoint to keep.
#include "checkpoint/manifest.h"

#include "checkpoint/xxh_state.h"

#include <cstdio>
#include <string_view>

namespace rm {
namespace {

using OJson = nlohmann::ordered_json;

OJson file_json(const ShardFileInfo& f) {
  OJson pieces = OJson::array();
  for (const PieceInfo& p : f.pieces) {
    pieces.push_back(OJson{{"buffer", p.buffer},
                           {"begin", p.begin},
                           {"end", p.end},
                           {"offset", p.offset},
                           {"bytes", p.bytes},
                           {"xxh64", hex64(p.xxh64)}});
  }
  return OJson{{"name", f.name}, {"rank", f.rank}, {"size", f.size}, {"pieces", pieces}};
}

std::string dump(const OJson& j) {
  try {
    return j.dump(1) + "\n";
  } catch (const nlohmann::json::exception& e) {
    // Only invalid UTF-8 can get here (the job text is opaque bytes to us).
    throw CheckpointError(std::string("manifest: cannot serialise: ") + e.what());
  }
}

}  // namespace

std::string with_manifest_checksum(const std::string& text) {
  const std::string member = std::string("\"") + kManifestChecksumKey + "\": \"" + kUnsealed + "\"";
  const size_t at = text.find(member);
  // The reader finds the member by its key alone: a second member of that name anywhere (a state
  // object nested in the state) would make the manifest unreadable, so it is refused here.
  const std::string key = std::string("\"") + kManifestChecksumKey + "\": \"";
  if (at == std::string::npos || text.find(key, text.find(key) + 1) != std::string::npos) {
    throw CheckpointError("manifest: cannot add its checksum: its placeholder is not there once");
  }
  std::string out = text;
  out.replace(at + member.size() - 17, 16, hex64(XXH64(text.data(), text.size(), 0)));
  return out;
}

const BufferInfo* Manifest::find_buffer(const std::string& name) const {
  for (const BufferInfo& b : buffers) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

uint64_t Manifest::data_bytes() const {
  uint64_t total = 0;
  for (const ShardFileInfo& f : files) total += f.size;
  return total;
}

std::string to_json(const Manifest& m) {
  OJson buffers = OJson::array();
  for (const BufferInfo& b : m.buffers) {
    buffers.push_back(OJson{{"name", b.name}, {"dtype", b.dtype}, {"count", b.count}});
  }
  OJson files = OJson::array();
  for (const ShardFileInfo& f : m.files) files.push_back(file_json(f));
  OJson tensors = OJson::array();
  for (const TensorInfo& t : m.tensors) {
    tensors.push_back(
        OJson{{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"offset", t.offset}});
  }
  OJson j;
  j["format"] = "ringmaster-checkpoint";
  j["version"] = kManifestVersion;
  j["step"] = m.step;
  j["world_size"] = m.world_size;
  j["shard_mode"] = m.shard_mode;
  j["buffers"] = std::move(buffers);
  j["files"] = std::move(files);
  j["tensors"] = std::move(tensors);
  j["state"] = OJson(m.state);
  j["state"][kManifestChecksumKey] = kUnsealed;
  j["job"] = m.job;
  return with_manifest_checksum(dump(j));
}

std::string shard_descriptor_to_json(int64_t step, const ShardFileInfo& file) {
  OJson j;
  j["format"] = "ringmaster-shard";
  j["version"] = kManifestVersion;
  j["step"] = step;
  j["file"] = file_json(file);
  return dump(j);
}

}  // namespace rm
