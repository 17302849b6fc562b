// The exceptions of checkpoint/: a CheckpointError for a checkpoint that is not what it must be
// (a manifest field, a checksum, a missing shard), and an IoError (io/io_error.h) for a failed
// system call or a file that is no regular file. Both are std::runtime_errors whose what()
// starts with the path of the file or directory concerned, then names the field or operation
// and the reason.
//
// Expected outcomes that a caller branches on (a checkpoint that does not verify, no checkpoint
// to resume from) are returned as values instead (VerifyResult, std::optional), in the spirit of
// LevelDB's Status; exceptions are for a caller that asked for something that cannot be done.
#pragma once

#include <stdexcept>

namespace rm {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace rm
