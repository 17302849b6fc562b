#include "checkpoint/weights_file.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

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

namespace {

struct WeightsHeader {
  uint64_t count = 0, hash = 0;
};

// The header of the open file, checked against the file's size (and `expected_count` unless it
// is null): a wrong, huge or endless file is refused before any payload is read.
WeightsHeader read_header(int fd, const std::string& path, const size_t* expected_count) {
  const uint64_t size = io::regular_file_size(fd, path);
  char header[kHeader];
  if (size < kHeader) throw IoError(path + ": not a Ringmaster weights file (too short)");
  io::pread_exact(fd, header, kHeader, 0, path);
  if (std::memcmp(header, kWeightsMagic, 8) != 0) {
    throw IoError(path + ": not a Ringmaster weights file (bad magic)");
  }
  WeightsHeader h;
  std::memcpy(&h.count, header + 8, 8);
  std::memcpy(&h.hash, header + 16, 8);
  if (expected_count != nullptr && h.count != *expected_count) {
    throw IoError(path + ": holds " + std::to_string(h.count) + " parameters, the model has " +
                  std::to_string(*expected_count));
  }
  // (The first test keeps count * 4 from wrapping round to a size that matches.)
  if (h.count > (size - kHeader) / sizeof(float) || size != kHeader + h.count * sizeof(float)) {
    throw IoError(path + ": size " + std::to_string(size) + " bytes, expected " +
                  std::to_string(kHeader + h.count * sizeof(float)));
  }
  return h;
}

[[noreturn]] void corrupted(const std::string& path) {
  throw IoError(path + ": checksum mismatch (file is corrupted)");
}

}  // namespace

std::vector<float> load_weights(const std::string& path, size_t expected_count) {
  io::Fd fd = io::open_read(path);
  const WeightsHeader h = read_header(fd.get(), path, &expected_count);
  std::vector<float> out(h.count);
  io::pread_exact(fd.get(), out.data(), h.count * sizeof(float), kHeader, path);
  if (XXH64(out.data(), h.count * sizeof(float), 0) != h.hash) corrupted(path);
  return out;
}

size_t verify_weights(const std::string& path) {
  io::Fd fd = io::open_read(path);
  const WeightsHeader h = read_header(fd.get(), path, nullptr);
  const std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                         &XXH64_freeState);
  XXH64_reset(state.get(), 0);
  std::vector<char> piece(8u << 20);
  for (uint64_t at = 0, bytes = h.count * sizeof(float); at < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), bytes - at));
    io::pread_exact(fd.get(), piece.data(), n, kHeader + at, path);
    XXH64_update(state.get(), piece.data(), n);
    at += n;
  }
  if (XXH64_digest(state.get()) != h.hash) corrupted(path);
  return h.count;
}

}  // namespace rm
