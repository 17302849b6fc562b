// Reading checkpoints: verification, listing, choosing where to resume, and resharding reads.
//
// Loading executes nothing the files say without checking it first: the manifest is parsed by
// parse_manifest (which trusts nothing), every file's actual size is compared with the manifest
// before any byte is read, and every piece's XXH64 is checked before its data is handed out.
//
// Resharding: read_range() reads any element range of a buffer, whatever the number of ranks
// and the shard mode that wrote it, by walking the pieces that overlap the range. A job saved by
// N ranks resumes on M ranks with each rank reading its own new slice (or the whole buffer).
//
// Threading: the free functions are thread-safe (no shared state). A CheckpointReader is not;
// use one per thread. Everything blocks on file I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_pin.h"
#include "checkpoint/manifest.h"

namespace rm {

enum class VerifyLevel {
  kStructure,  // manifest parses and matches the directory name; every file present, exact size
  kChecksums,  // and every piece's XXH64 matches (reads all the data)
};

// Part `part` of `parts` of a checkpoint's verification: the share of one rank where every rank
// of a job verifies the checkpoint together (worker/shared_verification.h), each reading about
// 1/parts of its bytes, so that a large checkpoint on slow storage verifies in the time of its
// largest share rather than of all of it on one rank while the others wait. The parts together
// check every file and every piece exactly once: a piece belongs to the part whose range holds
// its middle byte, the bytes of all pieces laid end to end in manifest order and cut into
// `parts` near-equal contiguous ranges (so a part reads few files, and file r of a checkpoint
// written by as many ranks as verify it falls to part r); a file without pieces is structure-
// checked by part (file index % parts); a file, by every part that holds one of its pieces.
// Pieces are indivisible (one checksum each): with more parts than pieces, some parts read
// nothing.
struct VerifyShare {
  int part = 0;
  int parts = 1;  // 1: the whole checkpoint
};

struct VerifyResult {
  bool ok = false;
  // When !ok, the bad file's path and what failed, e.g.
  //   ".../step_00001200/shard_00001.bin: checksum mismatch in piece params[1000,2000) ..."
  std::string error;
  int64_t step = -1;        // from the manifest, when it parsed
  uint64_t data_bytes = 0;  // sum of the shard files' sizes, when the manifest parsed
  uint64_t hashed_bytes = 0;  // the bytes this verification hashed (its share's pieces')
  // When !ok: no directory was there to verify (removed, most likely by a live run's retention
  // between a listing and this read): no damage.
  bool gone = false;
  explicit operator bool() const { return ok; }
};

// Never throws for a bad checkpoint: every problem becomes the result's error. The checkpoint is
// pinned while it is read (checkpoint_pin.h): retention leaves it alone meanwhile. With a share,
// the manifest (and its step against the directory's name) is checked as always, the files and
// pieces only of that part (VerifyShare): it is ok when its part is.
VerifyResult verify_checkpoint(const std::string& ckpt_dir,
                               VerifyLevel level = VerifyLevel::kChecksums,
                               const VerifyShare& share = {});

// How a caller verifies a candidate checkpoint (find_resume_checkpoint): verify_checkpoint at
// kChecksums by default, or every rank of a job together (worker/shared_verification.h).
using CheckpointVerifier = std::function<VerifyResult(const std::string& ckpt_dir)>;

// ckpt_dir/manifest.json, parsed and validated. Throws CheckpointError.
Manifest load_manifest(const std::string& ckpt_dir);
// The same, and *digest (if not null) set to the XXH64 of manifest.json's bytes as 16 hex
// digits: which checkpoint it is (a copy elsewhere is the same one).
Manifest load_manifest(const std::string& ckpt_dir, std::string* digest);

struct CheckpointInfo {
  std::string path;
  int64_t step = 0;
  bool committed = false;  // false: a step_N*.tmp directory, never read
  uint64_t bytes = 0;      // total size of the files in the directory
  int64_t mtime_unix = 0;  // of manifest.json, or of the directory if there is none
  VerifyResult verify;     // for scratch directories: not ok, "incomplete (never committed)"
  // find_resume_checkpoint's choice is pinned for as long as this (or a copy) lives: a live run's
  // retention does not remove it while the caller reads it. Empty otherwise.
  std::shared_ptr<const CheckpointPin> pin;
};

// Every checkpoint directory under RUN_DIR/checkpoints/ (committed and scratch), sorted by
// step (scratch before committed at equal steps), each verified at `level`. An absent
// checkpoints/ directory is an empty list, and one removed while the list is made (a live run's
// retention) is left out. Throws CheckpointError if it cannot be listed.
std::vector<CheckpointInfo> list_checkpoints(const std::string& run_dir,
                                             VerifyLevel level = VerifyLevel::kChecksums);

// Whether RUN_DIR/checkpoints/ holds a committed checkpoint, whether or not it verifies (a run
// there resumes, or passes them over saying why; nothing is to be removed or skipped on the
// guess that there is none). True when they cannot be listed, for the same reason.
bool holds_committed_checkpoint(const std::string& run_dir);

// The newest committed checkpoint that verifies with checksums, or nullopt; pinned (above).
// Appends to *report (if given) one line per newer directory passed over and why, newest first:
//   "skipped .../step_00001300: .../shard_00001.bin: checksum mismatch in piece ..."
//   "ignored .../step_00001400.tmp: incomplete (never committed)"
// Verifies newest first (with `verify`; null: verify_checkpoint at kChecksums) and stops at the
// first good one. A checkpoint that vanishes before it is pinned (retention of a live run, which
// by then has a newer one) makes it look again.
std::optional<CheckpointInfo> find_resume_checkpoint(const std::string& run_dir,
                                                     std::vector<std::string>* report = nullptr,
                                                     const CheckpointVerifier& verify = nullptr);

// Reads a checkpoint piece by piece. Files are opened (and their sizes checked) on first use;
// a piece's checksum is checked, over the whole piece, the first time any part of it is read.
// At most kMaxOpenFiles of its files are open at once (the least recently used is closed for the
// next): a checkpoint of thousands of ranks verifies under the usual soft limit of 1024 open
// files. A file opened again must be the same file (device and inode) at the same size, or the
// read throws: a piece checked once is not hashed again.
class CheckpointReader {
 public:
  // Loads manifest.json; throws CheckpointError where its step is not the one the directory is
  // named for (step_N, step_N.tmp).
  explicit CheckpointReader(std::string ckpt_dir);
  CheckpointReader(std::string ckpt_dir, Manifest manifest);  // validates the given manifest
  ~CheckpointReader();                                        // closes its files
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  static constexpr size_t kMaxOpenFiles = 64;

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  size_t open_files() const { return open_.size(); }  // for tests: at most kMaxOpenFiles

  // Opens every file and checks its size (VerifyLevel::kStructure).
  void check_files();
  // Checks every piece's checksum not checked yet (VerifyLevel::kChecksums).
  void verify_all();
  // check_files() and (at kChecksums) verify_all() of one part (VerifyShare), the sizes of all
  // its files before any byte is hashed. Returns the bytes of the pieces it hashed.
  uint64_t verify_share(const VerifyShare& share, VerifyLevel level);
  // Elements [begin, end) of `buffer` into dst (end - begin floats). Throws CheckpointError on
  // a bad range, file or checksum; dst's contents are then unspecified.
  void read_range(const std::string& buffer, uint64_t begin, uint64_t end, float* dst);
  std::vector<float> read_buffer(const std::string& buffer);  // the whole buffer

 private:
  struct PieceRef {
    uint64_t begin, end;
    size_t file, piece;
  };
  // The file's descriptor, valid until the next file_fd call for another file.
  int file_fd(size_t file);
  std::string file_path(size_t file) const;
  // Hashes a byte range of a file through the bounce buffer into state (an XXH64_state_t*).
  void hash_bytes(int fd, uint64_t offset, uint64_t bytes, const std::string& path, void* state);
  void verify_piece(size_t file, size_t piece);
  void read_piece(const PieceRef& ref, uint64_t begin, uint64_t end, float* dst);
  [[noreturn]] void checksum_mismatch(size_t file, size_t piece, uint64_t got) const;

  std::string dir_;
  Manifest manifest_;
  struct FileIdentity {
    uint64_t device = 0, inode = 0;
    bool known = false;  // set on the first open
  };
  std::vector<int> fds_;                      // [file]: -1 while closed
  std::vector<FileIdentity> identity_;        // [file]
  std::vector<size_t> open_;                  // the open files, least recently used first
  std::vector<std::vector<bool>> verified_;   // [file][piece]
  std::vector<std::vector<PieceRef>> index_;  // [buffer]: its non-empty pieces, by begin
  std::vector<char> bounce_;                  // allocated on first use
};

// One-shot form of CheckpointReader::read_range for a manifest the caller already holds (it is
// validated again: nothing here trusts its input).
void read_range(const std::string& ckpt_dir, const Manifest& manifest, const std::string& buffer,
                uint64_t begin, uint64_t end, float* dst);

}  // namespace rm
