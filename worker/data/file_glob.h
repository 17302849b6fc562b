// Expanding the file lists of a job ("data/fineweb_train_*.bin") into paths.
#pragma once

#include <string>
#include <vector>

namespace rm {

// Returns the files named by `patterns`, in pattern order; each pattern's matches are sorted
// bytewise (not by locale), so shard_000001 < shard_000002 and the order is the same on every
// host. A pattern containing none of * ? [ is a plain path and must exist.
// Throws DataError: "no data files given" (empty list); "no files match 'PATTERN'" and why,
// naming the directory looked in ("the directory 'data/fineweb10B' (under /home/me) does not
// exist", "... in the directory 'data'"); "PATH: <strerror>" (missing plain path); or which
// directory glob(3) could not read.
// Duplicates are kept: a file named twice is read twice.
std::vector<std::string> expand_globs(const std::vector<std::string>& patterns);

}  // namespace rm
