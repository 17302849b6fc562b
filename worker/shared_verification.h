// Verifying a checkpoint with every rank of the job, each reading its share (VerifyShare in
// checkpoint/checkpoint_reader.h), instead of rank 0 reading all of it while the others wait.
//
// Why: a resume verifies every byte of the checkpoint it takes (newest first, until one
// verifies). Done by rank 0 alone, the others waited in a collective under parallel.timeout_s
// (300 s by default) for as long as one process took to read the whole checkpoint -- 84 GB of a
// 7B model's weights and Adam moments at 250 MB/s is 336 s: a resume that timed out on every
// attempt, on exactly the storage where it matters. Shared, the wait is the largest share's
// read -- about 1/N of it where the checkpoint has many more pieces than N (a writer rank's file
// holds three, one per buffer, and a piece is not split: a checkpoint of 1 writer rank verified
// by 8 ranks is read in thirds) -- and N ranks on N nodes read in parallel.
//
// Collective: every rank makes the same calls in the same order, over a host-memory
// communicator (broadcasts and an all_gather of doubles).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint/checkpoint_reader.h"
#include "collectives/communicator.h"

namespace rm {

// Every rank verifies its share (part comm.rank() of comm.size()) of ckpt_dir with checksums
// and returns the same verdict: ok when every share is; otherwise gone when any rank found the
// directory gone (removed meanwhile: look again, as for verify_checkpoint), else not ok with the
// error of the lowest rank whose share failed (naming the file and piece). step and data_bytes
// are rank 0's; hashed_bytes is the largest share's (the bytes one rank read).
VerifyResult verify_checkpoint_together(Communicator& comm, const std::string& ckpt_dir);

// Rank 0 calls decide(verify), where each verify(dir) is verify_checkpoint_together with every
// other rank joining it; on the other ranks this serves those verifications and returns once
// decide has returned on rank 0 (rank 0 then tells them: one broadcast). decide's other work is
// rank 0's alone. If decide throws on rank 0, the others are left waiting for its next request:
// the caller ends the job (rank_main aborts the communicator on any error of one rank's).
void decide_with_shared_verification(
    Communicator& comm, const std::function<void(const CheckpointVerifier& verify)>& decide);

}  // namespace rm
