// A private scratch directory for the fuzz targets whose code under test reads files (manifests,
// safetensors, token shards): the harness writes each input there under its name.
//
// Made on first use inside $RM_FUZZ_SCRATCH if set (scripts/fuzz.sh sets it, and removes it, so
// a crashed fuzzer leaves nothing behind), else /dev/shm when present (a fuzzer writes a file
// per input and should not wear a disk, nor pay for its fsyncs), else $TMPDIR or /tmp. Removed
// with its contents at normal process exit. Not thread-safe; one per process.
#pragma once

#include <string>
#include <string_view>

namespace rm::fuzz {

// The directory; throws std::runtime_error if it cannot be made.
const std::string& scratch_dir();

// Writes `bytes` to scratch_dir()/name (a plain file name, replaced if present) and returns the
// path. Throws std::runtime_error on I/O errors: the environment's fault, not the input's.
std::string write_scratch_file(const std::string& name, std::string_view bytes);

}  // namespace rm::fuzz
