// The final weights of a run as one checksummed file (RUN_DIR/weights.bin):
//   8 bytes magic "RMWGHT01" | uint64 float count | uint64 XXH64 of the payload | float32[count]
// little-endian. Written atomically (atomic_file.h); loading checks magic, size and checksum
// before returning anything. (The checkpoint format of the checkpoint issue supersedes this.)
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "io/atomic_file.h"

struct XXH64_state_s;

namespace rm {

void save_weights(const std::string& path, const float* params, size_t count);

// The same file written as the parameters arrive, in order and in pieces of any size, so the
// writer never holds the model: a 7B model's weights.bin needs 28 GB written, not 28 GB held.
// The header's checksum is filled in once the last piece is in. Atomic like save_weights:
// until commit() the target is untouched, and a writer destroyed uncommitted (a failed append,
// an exception between pieces) removes its temporary file. Not thread-safe. Throws IoError.
class WeightsFileWriter {
 public:
  WeightsFileWriter(const std::string& path, size_t count);
  ~WeightsFileWriter();
  WeightsFileWriter(const WeightsFileWriter&) = delete;
  WeightsFileWriter& operator=(const WeightsFileWriter&) = delete;

  void append(const float* params, size_t count);  // more than announced is an IoError
  void commit();  // throws, writing nothing, unless exactly the announced count came

 private:
  struct HashDeleter {
    void operator()(XXH64_state_s* state) const;
  };
  std::string path_;
  size_t count_, written_ = 0;
  AtomicFileWriter out_;
  std::unique_ptr<XXH64_state_s, HashDeleter> hash_;
};

// Throws IoError naming the file and the check that failed (magic, count, size, checksum).
std::vector<float> load_weights(const std::string& path, size_t expected_count);

// The same checks without the model at hand (`ckpt verify` of a run directory): the payload is
// hashed in pieces, never held. Returns the parameter count; throws IoError as load_weights.
size_t verify_weights(const std::string& path);

}  // namespace rm
