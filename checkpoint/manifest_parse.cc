// Manifest parsing: JSON -> Manifest with every type checked, then validate_manifest. Nothing
// here calls json::get<T> on a value whose type has not been checked, so the only exceptions
// that can leave are the CheckpointErrors thrown on purpose.
#include <algorithm>
#include <initializer_list>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/json_guard.h"
#include "checkpoint/manifest.h"
#include "checkpoint/manifest_checks.h"
#include "checkpoint/xxh_state.h"

namespace rm {
namespace {

using Json = nlohmann::json;

// Checked accessors, each naming the field on failure.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    manifest_fail(path_, field, what);
  }

  const Json& object(const Json& v, const std::string& field,
                     std::initializer_list<const char*> allowed) const {
    if (!v.is_object()) fail(field, std::string("expected an object, found ") + v.type_name());
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (std::none_of(allowed.begin(), allowed.end(),
                       [&](const char* k) { return it.key() == k; })) {
        fail(join(field, it.key()), "unknown field");
      }
    }
    return v;
  }
  const Json& member(const Json& obj, const char* key, const std::string& field) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail(join(field, key), "missing");
    return *it;
  }
  const Json& array(const Json& v, const std::string& field, size_t max_items) const {
    if (!v.is_array()) fail(field, std::string("expected an array, found ") + v.type_name());
    if (v.size() > max_items) fail(field, "more than " + std::to_string(max_items) + " entries");
    return v;
  }
  uint64_t uint(const Json& v, const std::string& field, uint64_t max) const {
    if (v.is_number_unsigned()) {
      const uint64_t x = v.get<uint64_t>();
      if (x > max) fail(field, std::to_string(x) + " is larger than " + std::to_string(max));
      return x;
    }
    if (v.is_number_integer()) fail(field, std::to_string(v.get<int64_t>()) + " is negative");
    fail(field, std::string("expected a non-negative integer, found ") + v.type_name());
  }
  std::string string(const Json& v, const std::string& field, size_t max_len) const {
    if (!v.is_string()) fail(field, std::string("expected a string, found ") + v.type_name());
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > max_len) fail(field, "longer than " + std::to_string(max_len) + " bytes");
    return s;
  }
  uint64_t hex64(const Json& v, const std::string& field) const {
    const std::string s = string(v, field, 64);
    const bool ok = s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
                      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                    });
    if (!ok) fail(field, "'" + s + "' is not 16 lowercase hex digits");
    return std::stoull(s, nullptr, 16);
  }

  static std::string join(const std::string& field, const std::string& key) {
    return field.empty() ? key : field + "." + key;
  }

 private:
  const std::string& path_;
};

Json parse_json(const std::string& text, const Reader& r, const char* what) {
  if (text.size() > kMaxManifestBytes) {
    r.fail("",
           std::string(what) + " larger than " + std::to_string(kMaxManifestBytes >> 20) + " MiB");
  }
  // Before nlohmann builds a tree: its size and depth (json_guard.h).
  if (const std::string why = check_json_shape(text); !why.empty()) r.fail("", why);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    r.fail("", std::string("invalid JSON: ") + e.what());
  }
}

void check_format(const Json& root, const Reader& r, const char* format) {
  const std::string f = r.string(r.member(root, "format", ""), "format", 64);
  if (f != format) r.fail("format", "'" + f + "', expected '" + format + "'");
  const uint64_t v = r.uint(r.member(root, "version", ""), "version", 1u << 30);
  if (v != static_cast<uint64_t>(kManifestVersion)) {
    r.fail("version", std::to_string(v) + " is not supported (this build reads version " +
                          std::to_string(kManifestVersion) + ")");
  }
}

ShardFileInfo parse_file(const Json& v, const std::string& field, const Reader& r) {
  r.object(v, field, {"name", "rank", "size", "pieces"});
  ShardFileInfo f;
  f.name = r.string(r.member(v, "name", field), field + ".name", 255);
  f.rank = static_cast<int>(r.uint(r.member(v, "rank", field), field + ".rank", kMaxWorldSize));
  f.size = r.uint(r.member(v, "size", field), field + ".size", kMaxFileBytes);
  const Json& pieces = r.array(r.member(v, "pieces", field), field + ".pieces", kMaxPiecesPerFile);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string pf = field + ".pieces[" + std::to_string(i) + "]";
    const Json& pv = pieces[i];
    r.object(pv, pf, {"buffer", "begin", "end", "offset", "bytes", "xxh64"});
    PieceInfo p;
    p.buffer = r.string(r.member(pv, "buffer", pf), pf + ".buffer", 128);
    p.begin = r.uint(r.member(pv, "begin", pf), pf + ".begin", kMaxElements);
    p.end = r.uint(r.member(pv, "end", pf), pf + ".end", kMaxElements);
    p.offset = r.uint(r.member(pv, "offset", pf), pf + ".offset", kMaxFileBytes);
    p.bytes = r.uint(r.member(pv, "bytes", pf), pf + ".bytes", kMaxFileBytes);
    p.xxh64 = r.hex64(r.member(pv, "xxh64", pf), pf + ".xxh64");
    f.pieces.push_back(std::move(p));
  }
  return f;
}

// The manifest's own checksum (manifest.h: state.manifest_xxh64), where it has one: its member
// is in the text once, as written, and the XXH64 of the text with its digits as zeros matches.
void check_manifest_checksum(const std::string& text, const Json& state, const Reader& r) {
  const auto it = state.find(kManifestChecksumKey);
  if (it == state.end()) return;  // written before manifests carried one
  const std::string field = std::string("state.") + kManifestChecksumKey;
  const uint64_t want = r.hex64(*it, field);
  const std::string member = std::string("\"") + kManifestChecksumKey + "\": \"";
  const size_t at = text.find(member);
  if (at == std::string::npos || text.find(member, at + 1) != std::string::npos) {
    r.fail(field, "not in the manifest's text once as written (rewritten or damaged)");
  }
  std::string unsealed = text;
  unsealed.replace(at + member.size(), 16, kUnsealed);
  const uint64_t got = XXH64(unsealed.data(), unsealed.size(), 0);
  if (got != want) {
    r.fail(field, "checksum mismatch: the manifest's text hashes to " + rm::hex64(got) + ", not " +
                      rm::hex64(want) + " (damaged, or edited since it was written)");
  }
}

}  // namespace

Manifest parse_manifest(const std::string& text, const std::string& path) {
  const Reader r(path);
  const Json root = parse_json(text, r, "manifest");
  r.object(root, "",
           {"format", "version", "step", "world_size", "shard_mode", "buffers", "files", "tensors",
            "state", "job"});
  check_format(root, r, "ringmaster-checkpoint");
  Manifest m;
  m.step = static_cast<int64_t>(r.uint(r.member(root, "step", ""), "step", kMaxStep));
  m.world_size =
      static_cast<int>(r.uint(r.member(root, "world_size", ""), "world_size", kMaxWorldSize));
  m.shard_mode = r.string(r.member(root, "shard_mode", ""), "shard_mode", 64);
  m.job = r.string(r.member(root, "job", ""), "job", kMaxManifestJobBytes);

  const Json& buffers = r.array(r.member(root, "buffers", ""), "buffers", kMaxBuffers);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const std::string f = "buffers[" + std::to_string(i) + "]";
    r.object(buffers[i], f, {"name", "dtype", "count"});
    BufferInfo b;
    b.name = r.string(r.member(buffers[i], "name", f), f + ".name", 128);
    b.dtype = r.string(r.member(buffers[i], "dtype", f), f + ".dtype", 16);
    b.count = r.uint(r.member(buffers[i], "count", f), f + ".count", kMaxElements);
    m.buffers.push_back(std::move(b));
  }

  const Json& tensors = r.array(r.member(root, "tensors", ""), "tensors", kMaxTensors);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string f = "tensors[" + std::to_string(i) + "]";
    const Json& tv = tensors[i];
    r.object(tv, f, {"name", "dtype", "shape", "offset"});
    TensorInfo t;
    t.name = r.string(r.member(tv, "name", f), f + ".name", 1024);
    t.dtype = r.string(r.member(tv, "dtype", f), f + ".dtype", 16);
    const Json& shape = r.array(r.member(tv, "shape", f), f + ".shape", kMaxTensorRank);
    for (size_t d = 0; d < shape.size(); ++d) {
      const std::string df = f + ".shape[" + std::to_string(d) + "]";
      t.shape.push_back(static_cast<int64_t>(r.uint(shape[d], df, kMaxElements)));
    }
    t.offset = r.uint(r.member(tv, "offset", f), f + ".offset", kMaxElements);
    m.tensors.push_back(std::move(t));
  }

  const Json& files = r.array(r.member(root, "files", ""), "files", kMaxFiles);
  for (size_t i = 0; i < files.size(); ++i) {
    m.files.push_back(parse_file(files[i], "files[" + std::to_string(i) + "]", r));
  }

  const Json& state = r.member(root, "state", "");
  if (!state.is_object()) {
    r.fail("state", std::string("expected an object, found ") + state.type_name());
  }
  check_manifest_checksum(text, state, r);
  m.state = state;
  m.state.erase(kManifestChecksumKey);
  validate_manifest(m, path);
  return m;
}

ShardFileInfo parse_shard_descriptor(const std::string& text, const std::string& path,
                                     int64_t expected_step) {
  const Reader r(path);
  const Json root = parse_json(text, r, "shard descriptor");
  r.object(root, "", {"format", "version", "step", "file"});
  check_format(root, r, "ringmaster-shard");
  const uint64_t step = r.uint(r.member(root, "step", ""), "step", kMaxStep);
  if (static_cast<int64_t>(step) != expected_step) {
    r.fail("step", std::to_string(step) + ", expected " + std::to_string(expected_step) +
                       " (a descriptor left over from another save?)");
  }
  ShardFileInfo f = parse_file(r.member(root, "file", ""), "file", r);
  validate_file_entry(f, kMaxWorldSize, path, "file");
  return f;
}

}  // namespace rm
