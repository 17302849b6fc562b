// The one exception type of checkpoint/: everything it throws is a CheckpointError (IoError, in
// atomic_file.h, is the kind raised by a failed system call). what() starts with the path of
// the file or directory concerned, then names the field or operation and the reason.
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
