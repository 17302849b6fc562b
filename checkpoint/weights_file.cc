#include "checkpoint/weights_file.h"

#include <xxhash.h>

#include <cstdint>
#include <cstring>

#include "io/atomic_file.h"
#include "io/posix_io.h"

namespace rm {
namespace {

constexpr char kWeightsMagic[8] = {'R', 'M', 'W', 'G', 'H', 'T', '0', '1'};
constexpr size_t kHeader = 24;

}  // namespace

void save_weights(const std::string& path, const float* params, size_t count) {
  WeightsFileWriter out(path, count);
  out.append(params, count);
  out.commit();
}

WeightsFileWriter::WeightsFileWriter(const std::string& path, size_t count)
    : path_(path), count_(count), out_(path), hash_(XXH64_createState()) {
  if (!hash_ || XXH64_reset(hash_.get(), 0) != XXH_OK) throw IoError(path + ": no hash state");
  // The header with the checksum still zero; commit() writes the real one over it.
  char header[kHeader] = {};
  const uint64_t n = count;
  std::memcpy(header, kWeightsMagic, 8);
  std::memcpy(header + 8, &n, 8);
  out_.append(header, kHeader);
}

WeightsFileWriter::~WeightsFileWriter() = default;

void WeightsFileWriter::HashDeleter::operator()(XXH64_state_s* state) const {
  XXH64_freeState(state);
}

void WeightsFileWriter::append(const float* params, size_t count) {
  if (count > count_ - written_) {
    throw IoError(path_ + ": " + std::to_string(written_ + count) + " parameters written, " +
                  std::to_string(count_) + " announced");
  }
  // Bytes go straight from the caller's buffer to write(2): no copy of the piece.
  XXH64_update(hash_.get(), params, count * sizeof(float));
  out_.append(params, count * sizeof(float));
  written_ += count;
}

void WeightsFileWriter::commit() {
  if (written_ != count_) {
    throw IoError(path_ + ": only " + std::to_string(written_) + " of " +
                  std::to_string(count_) + " parameters were written");
  }
  const uint64_t hash = XXH64_digest(hash_.get());
  out_.rewrite(16, &hash, sizeof hash);
  out_.commit();
}

std::vector<float> load_weights(const std::string& path, size_t expected_count) {
  // Header and size first: the payload is read (and allocated) only once the file's real size
  // matches what the model needs, so a wrong, huge or endless file costs nothing.
  io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  char header[kHeader];
  if (size < kHeader) throw IoError(path + ": not a Ringmaster weights file (too short)");
  io::pread_exact(fd.get(), header, kHeader, 0, path);
  if (std::memcmp(header, kWeightsMagic, 8) != 0) {
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
