#include "checkpoint/safetensors_writer.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/json_guard.h"
#include "io/atomic_file.h"
#include "io/posix_io.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

namespace rm {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit of the reference implementation
constexpr uint64_t kMaxNumel = uint64_t{1} << 48;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw CheckpointError(path + ": " + what);
}

uint64_t numel(const std::vector<int64_t>& shape, const std::string& path,
               const std::string& name) {
  uint64_t n = 1;
  for (const int64_t d : shape) {
    if (d < 0 || static_cast<uint64_t>(d) > kMaxNumel ||
        (d != 0 && n > kMaxNumel / static_cast<uint64_t>(d))) {
      fail(path, "tensor '" + name + "': bad shape");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

uint64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const SafetensorsTensor*> order;
  std::set<std::string> names;
  for (const SafetensorsTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") fail(path, "bad tensor name '" + t.name + "'");
    if (!names.insert(t.name).second) fail(path, "duplicate tensor '" + t.name + "'");
    if (t.dtype != "F32") fail(path, "tensor '" + t.name + "': only F32 is written");
    if (numel(t.shape, path, t.name) > 0 && t.data == nullptr) {
      fail(path, "tensor '" + t.name + "' has no data");
    }
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return a->name < b->name;
  });

  Json header = Json::object();
  uint64_t offset = 0;
  for (const SafetensorsTensor* t : order) {
    const uint64_t bytes = numel(t->shape, path, t->name) * sizeof(float);
    header[t->name] =
        Json{{"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    fail(path, std::string("cannot write header: ") + e.what());  // invalid UTF-8 in a name
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();  // little-endian host: the bytes of n are the format's

  AtomicFileWriter out(path);
  out.append(&n, sizeof n);
  out.append(text.data(), text.size());
  for (const SafetensorsTensor* t : order) {
    out.append(t->data, numel(t->shape, path, t->name) * sizeof(float));
  }
  out.commit();
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  SafetensorsHeader h;
  if (size < 8) fail(path, "shorter than the 8-byte header length");
  io::pread_exact(fd.get(), &h.header_bytes, 8, 0, path);
  if (h.header_bytes > kMaxHeaderBytes || h.header_bytes > size - 8) {
    fail(path, "header length " + std::to_string(h.header_bytes) + " is impossible for a " +
                   std::to_string(size) + "-byte file");
  }
  h.data_bytes = size - 8 - h.header_bytes;
  std::string text(h.header_bytes, '\0');
  io::pread_exact(fd.get(), text.data(), text.size(), 8, path);
  if (const std::string why = check_json_shape(text); !why.empty()) fail(path, "header: " + why);
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "header is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const Json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__." + m.key() + " is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor '" + name + "': ";
    if (!v.is_object() || v.size() != 3 || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      fail(path, what + "expected exactly dtype, shape and data_offsets");
    }
    SafetensorsEntry e;
    e.name = name;
    if (!v["dtype"].is_string()) fail(path, what + "dtype is not a string");
    e.dtype = v["dtype"].get<std::string>();
    const uint64_t elem = dtype_bytes(e.dtype);
    if (elem == 0) fail(path, what + "unknown dtype '" + e.dtype + "'");
    const Json& shape = v["shape"];
    if (!shape.is_array()) fail(path, what + "shape is not an array");
    for (const Json& d : shape) {
      if (!d.is_number_unsigned()) fail(path, what + "shape holds a non-natural number");
      if (d.get<uint64_t>() > kMaxNumel) fail(path, what + "dimension too large");
      e.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    const Json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      fail(path, what + "data_offsets is not [begin, end]");
    }
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end < e.begin || e.end > h.data_bytes) {
      fail(path, what + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "] outside the " + std::to_string(h.data_bytes) + "-byte data");
    }
    if (e.end - e.begin != numel(e.shape, path, name) * elem) {
      fail(path, what + std::to_string(e.end - e.begin) + " bytes do not match shape and dtype");
    }
    h.tensors.push_back(std::move(e));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t at = 0;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.begin != at) {
      fail(path, "tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) +
                     ", expected " + std::to_string(at) + " (data must be contiguous)");
    }
    at = e.end;
  }
  if (at != h.data_bytes) {
    fail(path, "tensors cover " + std::to_string(at) + " of " + std::to_string(h.data_bytes) +
                   " data bytes");
  }
  return h;
}

std::vector<float> read_safetensors_f32(const std::string& path, const SafetensorsHeader& header,
                                        const std::string& name) {
  for (const SafetensorsEntry& e : header.tensors) {
    if (e.name != name) continue;
    if (e.dtype != "F32") fail(path, "tensor '" + name + "' is " + e.dtype + ", not F32");
    std::vector<float> out((e.end - e.begin) / sizeof(float));
    io::Fd fd = io::open_read(path);
    io::pread_exact(fd.get(), out.data(), e.end - e.begin, 8 + header.header_bytes + e.begin, path);
    return out;
  }
  fail(path, "no tensor '" + name + "'");
}

}  // namespace rm
