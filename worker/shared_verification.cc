#include "worker/shared_verification.h"

#include <algorithm>
#include <vector>

namespace rm {

VerifyResult verify_checkpoint_together(Communicator& comm, const std::string& ckpt_dir) {
  const int R = comm.size();
  VerifyResult mine =
      verify_checkpoint(ckpt_dir, VerifyLevel::kChecksums, VerifyShare{comm.rank(), R});
  // Each rank's {ok, gone, hashed bytes} to every rank, in rank order.
  constexpr size_t kFields = 3;
  std::vector<double> all(kFields * static_cast<size_t>(R), 0.0);
  double* own = all.data() + kFields * static_cast<size_t>(comm.rank());
  own[0] = mine.ok ? 1 : 0;
  own[1] = mine.gone ? 1 : 0;
  own[2] = static_cast<double>(mine.hashed_bytes);
  comm.all_gather(all.data(), std::vector<size_t>(R, kFields), DType::kFloat64)->wait();
  int first_failed = -1;
  bool gone = false;
  double largest_share = 0;
  for (int r = 0; r < R; ++r) {
    const double* f = all.data() + kFields * static_cast<size_t>(r);
    if (f[0] == 0 && first_failed < 0) first_failed = r;
    gone = gone || f[1] != 0;
    largest_share = std::max(largest_share, f[2]);
  }
  VerifyResult agreed;
  // The step and size as rank 0 read them (every rank read the same manifest, unless it was
  // replaced meanwhile: then some share fails anyway).
  double header[2] = {static_cast<double>(mine.step), static_cast<double>(mine.data_bytes)};
  comm.broadcast(header, 2, DType::kFloat64, 0)->wait();
  agreed.step = static_cast<int64_t>(header[0]);
  agreed.data_bytes = static_cast<uint64_t>(header[1]);
  agreed.hashed_bytes = static_cast<uint64_t>(largest_share);
  if (first_failed < 0) {
    agreed.ok = true;
    return agreed;
  }
  agreed.gone = gone;
  // The failing rank's own words: which file and piece, found where.
  agreed.error = broadcast_string(comm, mine.error, first_failed);
  if (first_failed != 0) agreed.error += " (found by rank " + std::to_string(first_failed) + ")";
  return agreed;
}

void decide_with_shared_verification(
    Communicator& comm, const std::function<void(const CheckpointVerifier& verify)>& decide) {
  if (comm.rank() == 0) {
    decide([&comm](const std::string& dir) {
      if (dir.empty()) {  // would read as "done" on the others
        VerifyResult none;
        none.error = "no checkpoint directory to verify";
        return none;
      }
      // A request: the directory, then the verification itself.
      broadcast_string(comm, dir, 0);
      return verify_checkpoint_together(comm, dir);
    });
    broadcast_string(comm, std::string(), 0);  // done
    return;
  }
  for (;;) {
    const std::string dir = broadcast_string(comm, std::string(), 0);
    if (dir.empty()) return;
    verify_checkpoint_together(comm, dir);
  }
}

}  // namespace rm
