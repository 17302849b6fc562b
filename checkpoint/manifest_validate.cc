// Semantic checks of a manifest: names, bounds, and that the pieces of each buffer tile it.
#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/manifest.h"
#include "checkpoint/manifest_checks.h"

namespace rm {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool is_identifier(const std::string& s, size_t max_len) {
  return !s.empty() && s.size() <= max_len && std::all_of(s.begin(), s.end(), is_name_char);
}

bool is_printable_ascii(const std::string& s, size_t max_len) {
  return !s.empty() && s.size() <= max_len &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

std::string range_text(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + "," + std::to_string(end) + ")";
}

// Element count of a shape, or a failure if it is negative or beyond kMaxElements (checked
// factor by factor, so the product never overflows).
uint64_t shape_numel(const TensorInfo& t, const std::string& path, const std::string& field) {
  uint64_t n = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    const int64_t d = t.shape[i];
    const std::string f = field + ".shape[" + std::to_string(i) + "]";
    if (d < 0) manifest_fail(path, f, "negative dimension " + std::to_string(d));
    if (static_cast<uint64_t>(d) > kMaxElements) manifest_fail(path, f, "dimension too large");
    if (d != 0 && n > kMaxElements / static_cast<uint64_t>(d)) {
      manifest_fail(path, field + ".shape", "more than 2^48 elements");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

void validate_buffers(const Manifest& m, const std::string& path) {
  if (m.buffers.size() > kMaxBuffers) {
    manifest_fail(path, "buffers", "more than " + std::to_string(kMaxBuffers) + " buffers");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const BufferInfo& b = m.buffers[i];
    const std::string f = "buffers[" + std::to_string(i) + "]";
    if (!is_identifier(b.name, 128)) {
      manifest_fail(path, f + ".name", "'" + b.name + "' is not a name of [A-Za-z0-9_.-]");
    }
    if (!names.insert(b.name).second)
      manifest_fail(path, f + ".name", "duplicate '" + b.name + "'");
    if (b.dtype != "f32") {
      manifest_fail(path, f + ".dtype", "'" + b.dtype + "' is not supported (only f32)");
    }
    if (b.count > kMaxElements) manifest_fail(path, f + ".count", "more than 2^48 elements");
  }
}

void validate_tensors(const Manifest& m, const std::string& path) {
  if (m.tensors.size() > kMaxTensors) manifest_fail(path, "tensors", "too many tensors");
  std::set<std::string> names;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorInfo& t = m.tensors[i];
    const std::string f = "tensors[" + std::to_string(i) + "]";
    if (!is_printable_ascii(t.name, 1024)) {
      manifest_fail(path, f + ".name", "must be 1-1024 printable ASCII characters");
    }
    if (!names.insert(t.name).second)
      manifest_fail(path, f + ".name", "duplicate '" + t.name + "'");
    if (t.dtype != "f32") {
      manifest_fail(path, f + ".dtype", "'" + t.dtype + "' is not supported (only f32)");
    }
    if (t.shape.size() > kMaxTensorRank) manifest_fail(path, f + ".shape", "more than 16 dims");
    const uint64_t n = shape_numel(t, path, f);
    if (t.offset > kMaxElements) manifest_fail(path, f + ".offset", "beyond 2^48");
    // Every buffer shares the tensor layout (see manifest.h).
    for (const BufferInfo& b : m.buffers) {
      if (t.offset + n > b.count) {
        manifest_fail(path, f,
                      "'" + t.name + "' " + range_text(t.offset, t.offset + n) +
                          " is past the end of buffer '" + b.name + "' (" +
                          std::to_string(b.count) + " elements)");
      }
    }
  }
}

// Every buffer's pieces, over all files, must cover [0, count) once.
void validate_tiling(const Manifest& m, const std::string& path) {
  struct Ref {
    uint64_t begin, end;
    size_t file, piece;
  };
  std::vector<std::vector<Ref>> by_buffer(m.buffers.size());
  for (size_t fi = 0; fi < m.files.size(); ++fi) {
    const ShardFileInfo& file = m.files[fi];
    for (size_t pi = 0; pi < file.pieces.size(); ++pi) {
      const PieceInfo& p = file.pieces[pi];
      const std::string f = "files[" + std::to_string(fi) + "].pieces[" + std::to_string(pi) + "]";
      size_t bi = 0;
      while (bi < m.buffers.size() && m.buffers[bi].name != p.buffer) ++bi;
      if (bi == m.buffers.size()) {
        manifest_fail(path, f + ".buffer", "'" + p.buffer + "' is not in buffers");
      }
      if (p.end > m.buffers[bi].count) {
        manifest_fail(path, f + ".end",
                      std::to_string(p.end) + " is past the end of buffer '" + p.buffer + "' (" +
                          std::to_string(m.buffers[bi].count) + " elements)");
      }
      by_buffer[bi].push_back(Ref{p.begin, p.end, fi, pi});
    }
  }
  auto name = [](const Ref& r) {
    return "files[" + std::to_string(r.file) + "].pieces[" + std::to_string(r.piece) + "] " +
           range_text(r.begin, r.end);
  };
  for (size_t bi = 0; bi < m.buffers.size(); ++bi) {
    std::vector<Ref>& refs = by_buffer[bi];
    std::sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
      return std::tie(a.begin, a.end, a.file, a.piece) < std::tie(b.begin, b.end, b.file, b.piece);
    });
    const std::string f = "buffer '" + m.buffers[bi].name + "'";
    uint64_t covered = 0;
    const Ref* last = nullptr;
    for (const Ref& r : refs) {
      if (r.end == r.begin) continue;  // an empty piece (a rank with no slice) covers nothing
      if (r.begin > covered) {
        manifest_fail(path, f, "elements " + range_text(covered, r.begin) + " are in no piece");
      }
      if (r.begin < covered) manifest_fail(path, f, name(r) + " overlaps " + name(*last));
      covered = r.end;
      last = &r;
    }
    if (covered != m.buffers[bi].count) {
      manifest_fail(path, f,
                    "elements " + range_text(covered, m.buffers[bi].count) + " are in no piece");
    }
  }
}

// The manifest's own bytes in a message (a field's name, a value, the parser's "last read"),
// shown as text a terminal prints as it is: a damaged or hostile file may hold any bytes, and
// a message is read by people and grepped. Bytes outside printable ASCII are written \xNN (a
// manifest we write holds none); text longer than any message of ours (a tensor name is at most
// 1024 bytes) is cut where it would run on: the parser's "last read" of a 64 MiB string.
std::string shown_bytes(const std::string& s) {
  constexpr size_t kMaxShown = 4096;
  std::string out;
  for (const char ch : s) {
    if (out.size() >= kMaxShown) return out + "... (" + std::to_string(s.size()) + " bytes)";
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7e) {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// The state's members that the trainer, retention and the commands read, by type: the state is
// free-form JSON under the manifest's checksum, and a member of another type (an edited
// manifest, another tool's) made nlohmann's value() throw type_error -- out of retention, in the
// middle of a save that had committed. Absent members are fine (older manifests lack some).
void validate_state_types(const nlohmann::json& state, const std::string& path) {
  const auto check = [&](const char* key, bool ok, const char* what) {
    if (!ok) manifest_fail(path, std::string("state.") + key, std::string("must be ") + what);
  };
  const auto has = [&](const char* key) { return state.contains(key); };
  if (has("best")) check("best", state["best"].is_boolean(), "true or false");
  if (has("best_val_loss")) check("best_val_loss", state["best_val_loss"].is_number(), "a number");
  if (has("best_step")) {
    check("best_step", state["best_step"].is_number_integer(), "a whole number");
  }
  if (has("optimizer_steps")) {
    check("optimizer_steps",
          state["optimizer_steps"].is_number_integer() &&
              state["optimizer_steps"].get<int64_t>() >= 0,
          "a whole number >= 0");
  }
  if (has("skipped_batches")) {
    bool ok = state["skipped_batches"].is_array();
    for (size_t i = 0; ok && i < state["skipped_batches"].size(); ++i) {
      ok = state["skipped_batches"][i].is_number_integer();
    }
    check("skipped_batches", ok, "a list of whole numbers");
  }
}

}  // namespace

void manifest_fail(const std::string& path, const std::string& field, const std::string& what) {
  throw CheckpointError(path + ": " + (field.empty() ? "" : shown_bytes(field) + ": ") +
                        shown_bytes(what));
}

bool is_plain_file_name(const std::string& name) {
  return is_identifier(name, 255) && name[0] != '.' && name != kManifestFileName;
}

void validate_file_entry(const ShardFileInfo& file, int world_size, const std::string& path,
                         const std::string& field) {
  if (!is_plain_file_name(file.name)) {
    manifest_fail(path, field + ".name",
                  "'" + file.name + "' is not a plain file name (allowed: [A-Za-z0-9_.-], " +
                      "not starting with '.')");
  }
  if (file.rank < 0 || file.rank >= world_size) {
    manifest_fail(path, field + ".rank",
                  std::to_string(file.rank) +
                      " is outside [0, world_size=" + std::to_string(world_size) + ")");
  }
  if (file.size > kMaxFileBytes) manifest_fail(path, field + ".size", "beyond 2^52 bytes");
  if (file.pieces.size() > kMaxPiecesPerFile) manifest_fail(path, field + ".pieces", "too many");
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // byte ranges, to find overlaps
  for (size_t i = 0; i < file.pieces.size(); ++i) {
    const PieceInfo& p = file.pieces[i];
    const std::string f = field + ".pieces[" + std::to_string(i) + "]";
    if (!is_identifier(p.buffer, 128)) manifest_fail(path, f + ".buffer", "not a buffer name");
    if (p.end < p.begin) {
      manifest_fail(path, f,
                    "end " + std::to_string(p.end) + " < begin " + std::to_string(p.begin));
    }
    if (p.end > kMaxElements) manifest_fail(path, f + ".end", "beyond 2^48 elements");
    if (p.bytes != (p.end - p.begin) * sizeof(float)) {
      manifest_fail(
          path, f + ".bytes",
          std::to_string(p.bytes) + " != 4 * " + std::to_string(p.end - p.begin) + " elements");
    }
    if (p.offset > file.size || p.bytes > file.size - p.offset) {
      manifest_fail(path, f,
                    "bytes " + range_text(p.offset, p.offset + p.bytes) +
                        " are past the end of the file (" + std::to_string(file.size) + " bytes)");
    }
    if (p.bytes > 0) spans.emplace_back(p.offset, p.offset + p.bytes);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      manifest_fail(path, field + ".pieces",
                    "bytes " + range_text(spans[i].first, spans[i].second) + " overlap bytes " +
                        range_text(spans[i - 1].first, spans[i - 1].second));
    }
  }
}

void validate_manifest(const Manifest& m, const std::string& path) {
  if (m.step < 0 || m.step > kMaxStep) {
    manifest_fail(path, "step",
                  std::to_string(m.step) + " is outside [0, " + std::to_string(kMaxStep) + "]");
  }
  if (m.world_size < 1 || m.world_size > kMaxWorldSize) {
    manifest_fail(path, "world_size", std::to_string(m.world_size) + " is outside [1, 2^20]");
  }
  if (!is_identifier(m.shard_mode, 64)) {
    manifest_fail(path, "shard_mode", "'" + m.shard_mode + "' is not a name of [A-Za-z0-9_.-]");
  }
  if (m.job.size() > kMaxManifestJobBytes) manifest_fail(path, "job", "larger than 16 MiB");
  if (!m.state.is_object()) manifest_fail(path, "state", "must be a JSON object");
  validate_state_types(m.state, path);
  validate_buffers(m, path);
  validate_tensors(m, path);
  if (m.files.size() > kMaxFiles) manifest_fail(path, "files", "too many files");
  std::set<std::string> names;
  for (size_t i = 0; i < m.files.size(); ++i) {
    const std::string f = "files[" + std::to_string(i) + "]";
    validate_file_entry(m.files[i], m.world_size, path, f);
    if (!names.insert(m.files[i].name).second) {
      manifest_fail(path, f + ".name", "duplicate '" + m.files[i].name + "'");
    }
  }
  validate_tiling(m, path);
}

}  // namespace rm
