// The line a run trains on: which checkpoint it last started from with --from.
//
// `run --from CKPT` starts a line of its own (Checkpointing::drop_newer_checkpoints removes the
// run's checkpoints past CKPT). Every checkpoint the line writes records where it started, in its
// manifest state as
//   "line_from": {"checkpoint": "/abs/run/checkpoints/step_00000100", "as_given": "<--from,
//                 absolute, links not followed>", "step": 100,
//                 "manifest_digest": "<XXH64 of that checkpoint's manifest.json, hex>"}
// and a plain resume carries it on. A batch script that passes the same --from on every Slurm
// requeue then goes on with the line it started instead of removing the line's progress and
// training it again; `ringmaster run`'s own restarts pass --from again only where the attempt
// that failed never started training (launcher/supervisor.cc), its drop of the line left undone.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace rm {

// The "line_from" record of the checkpoint directory `ckpt` (its manifest.json read whole).
// Throws CheckpointError (IoError) if the manifest cannot be read or parsed.
// as_given: the path the user named it by ("" = ckpt), recorded as "as_given" (a link's
// spelling: checkpoints/best names the line's start whatever it points to later).
nlohmann::json checkpoint_line_origin(const std::string& ckpt, const std::string& as_given = "");

// RUN_DIR/line.json: the "line_from" record of the line the run trains on since its last --from
// resume, written (atomically, by rank 0) once that resume has succeeded. Until the line saves a
// checkpoint of its own, a restart resumes from the line's start itself -- as the run's own
// checkpoint, when it is in the run directory -- whose state records the line *it* was on; this
// file says which line it starts now.
void record_line_start(const std::string& run_dir, const nlohmann::json& line_from);

// RUN_DIR/line.json's record, null where there is none or it cannot be read.
nlohmann::json recorded_line_start(const std::string& run_dir);

// Removes RUN_DIR/line.json, durably (rank 0, as a run starts at step 0: it trains no line that a
// --from began, and what memory will hold is not that line's). Throws IoError.
void forget_line_start(const std::string& run_dir);

// The line a resume from the checkpoint `ckpt` (manifest state `state`) goes on: RUN_DIR/line.json
// when `ckpt` is that line's start (the same manifest bytes), else `state`'s line_from (null:
// none). Never throws for an unreadable line.json (then: `state`'s).
nlohmann::json line_of_checkpoint(const std::string& run_dir, const std::string& ckpt,
                                  const nlohmann::json& state);

// Whether a checkpoint whose manifest state is `state` goes on from the checkpoint named by
// `from`: its line_from is the same checkpoint -- the same manifest bytes and step when `from`
// is still there, else (retention removed it since, checkpoint.keep_last) the same path; or
// `from` is a link (checkpoints/best) given as it was then, whatever it points to now.
// Never throws: anything unreadable is "no".
bool goes_on_from(const nlohmann::json& state, const std::string& from);

}  // namespace rm
