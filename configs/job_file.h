// Reading a job file from disk without trusting it: what load_job() reads before any parsing.
//
// The file is opened through io/posix_io.h (O_NONBLOCK: a FIFO does not wait for a writer),
// refused unless fstat says it is a regular file of at most kMaxJobBytes (yaml_guard.h), and
// read for exactly the size fstat gave, so /dev/zero, a directory, a pipe or a file that grows
// while it is read costs one system call or a bounded read, never a hang or unbounded memory.
// Thread-safe (no shared state); blocks only on the read of a regular file.
#pragma once

#include <string>

namespace rm {

// Fills *text with the whole file and returns "", or returns what is wrong (the caller adds the
// path), e.g. "cannot read job file: No such file or directory", "cannot read job file: a
// directory, not a regular file", "too large for a job file: 2097152 bytes, the limit is
// 1048576 (1 MiB)". `kind` names the file in those ("cluster file" for `plan --cluster`'s).
std::string read_job_file(const std::string& path, std::string* text,
                          const std::string& kind = "job file");

}  // namespace rm
