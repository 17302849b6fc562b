#include "checkpoint/weights_file.h"

#include <xxhash.h>

#include <cstdint>
#include <cstring>

#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {
namespace {

constexpr char kMagic[8] = {'R', 'M', 'W', 'G', 'H', 'T', '0', '1'};
constexpr size_t kHeader = 24;

}  // namespace

void save_weights(const std::string& path, const float* params, size_t count) {
  // Header, then the parameters straight from the caller's buffer: no second copy of a model
  // that may take most of the host's memory.
  const size_t payload = count * sizeof(float);
  char header[kHeader] = {};
  const uint64_t n = count;
  const uint64_t hash = XXH64(params, payload, 0);
  std::memcpy(header, kMagic, 8);
  std::memcpy(header + 8, &n, 8);
  std::memcpy(header + 16, &hash, 8);
  AtomicFileWriter out(path);
  out.append(header, kHeader);
  out.append(params, payload);
  out.commit();
}

std::vector<float> load_weights(const std::string& path, size_t expected_count) {
  // Header and size first: the payload is read (and allocated) only once the file's real size
  // matches what the model needs, so a wrong, huge or endless file costs nothing.
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  char header[kHeader];
  if (size < kHeader) throw IoError(path + ": not a Ringmaster weights file (too short)");
  io::pread_exact(fd.get(), header, kHeader, 0, path);
  if (std::memcmp(header, kMagic, 8) != 0) {
    throw IoError(path + ": not a Ringmaster weights file (bad magic)");
  }
  uint64_t n = 0, hash = 0;
  std::memcpy(&n, header + 8, 8);
  std::memcpy(&hash, header + 16, 8);
  if (n != expected_count) {
    throw IoError(path + ": holds " + std::to_string(n) + " parameters, the model has " +
                  std::to_string(expected_count));
  }
  if (size != kHeader + n * sizeof(float)) {
    throw IoError(path + ": size " + std::to_string(size) + " bytes, expected " +
                  std::to_string(kHeader + n * sizeof(float)));
  }
  std::vector<float> out(n);
  io::pread_exact(fd.get(), out.data(), n * sizeof(float), kHeader, path);
  if (XXH64(out.data(), n * sizeof(float), 0) != hash) {
    throw IoError(path + ": checksum mismatch (file is corrupted)");
  }
  return out;
}

}  // namespace rm
