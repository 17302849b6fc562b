// Where a checkpoint lives on disk:
//
//   RUN_DIR/checkpoints/step_00001200/        a committed checkpoint (8+ digits, zero-padded)
//                       manifest.json         what the directory holds (manifest.h)
//                       shard_00000.bin ...   one file per writing rank
//   RUN_DIR/checkpoints/step_00001300.tmp/    being written, or left by a crash: never read
//   RUN_DIR/checkpoints/step_00001100.del.tmp being deleted by retention
//   RUN_DIR/checkpoints/best                  a link to the lowest validation loss's
//                                             (checkpoint.keep_best: retention.h)
//   RUN_DIR/checkpoints/best.tmp.PID          the link being made, or left by a crash
//
// A directory is a checkpoint only under its committed name, which only an atomic rename gives
// it after everything inside is durable; every other name is scratch. Pure string functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rm {

inline constexpr const char* kManifestFileName = "manifest.json";
inline constexpr const char* kBestLink = "best";   // in RUN_DIR/checkpoints
inline constexpr int64_t kMaxStep = 999999999999;  // 12 digits: a bound, not a plan
// The scratch names a committed step_N passes through, as step_N + suffix: retention renames it
// away before emptying it (retention.h), and a re-save of its step moves it aside until the new
// one is in place (checkpoint_writer.h). Both were committed checkpoints; a save's own scratch,
// step_N.tmp, never was.
inline constexpr const char* kDeletingSuffix = ".del.tmp";
inline constexpr const char* kReplacedSuffix = ".replaced.tmp";

std::string checkpoints_root(const std::string& run_dir);  // RUN_DIR/checkpoints
std::string step_dir_name(int64_t step);                   // "step_00001200"
std::string checkpoint_path(const std::string& run_dir, int64_t step);
std::string checkpoint_tmp_path(const std::string& run_dir, int64_t step);  // "...step_N.tmp"
std::string shard_file_name(int rank);                                      // "shard_00003.bin"
std::string shard_descriptor_name(int rank);  // "shard_00003.json" (written beside the shard)
// "shard_00003.failed": an empty file a rank creates in step_N.tmp/ when its save failed, so the
// committing rank stops waiting for it (empty: it can still be created on a full disk).
std::string shard_failure_name(int rank);

// Classifies an entry of checkpoints/. Committed: exactly step_dir_name(step). Scratch: that
// name followed by a suffix starting with '.' and ending in ".tmp". Anything else: nullopt.
struct StepDirName {
  int64_t step = 0;
  bool committed = false;
  std::string suffix;  // what follows step_dir_name(step): "" when committed, else ".tmp",
                       // kDeletingSuffix, kReplacedSuffix or another ".*.tmp"
};
std::optional<StepDirName> parse_step_dir_name(const std::string& name);

// Where `dir` (a path) names a save never committed (step_N.tmp, step_N.<anything>.tmp), what to
// say of it after its path: a reader that takes a checkpoint to use (sample, export, init_from)
// refuses it, as a resume passes it over -- its manifest may be whole, but nothing vouches that the
// save was. Empty for any other name.
std::string uncommitted_save_refusal(const std::string& dir);

}  // namespace rm
