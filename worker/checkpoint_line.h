// The line a run trains on: which checkpoint it last started from with --from.
//
// `run --from CKPT` starts a line of its own (Checkpointing::drop_newer_checkpoints removes the
// run's checkpoints past CKPT). Every checkpoint the line writes records where it started, in its
// manifest state as
//   "line_from": {"checkpoint": "/abs/run/checkpoints/step_00000100", "step": 100,
//                 "manifest_digest": "<XXH64 of that checkpoint's manifest.json, hex>"}
// and a plain resume carries it on. A batch script that passes the same --from on every Slurm
// requeue then goes on with the line it started instead of removing the line's progress and
// training it again; `ringmaster run`'s own restarts never pass --from again.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace rm {

// The "line_from" record of the checkpoint directory `ckpt` (its manifest.json read whole).
// Throws CheckpointError (IoError) if the manifest cannot be read or parsed.
nlohmann::json checkpoint_line_origin(const std::string& ckpt);

// Whether a checkpoint whose manifest state is `state` goes on from the checkpoint named by
// `from`: its line_from is the same checkpoint -- the same manifest bytes and step when `from`
// is still there, else (retention removed it since, checkpoint.keep_last) the same path.
// Never throws: anything unreadable is "no".
bool goes_on_from(const nlohmann::json& state, const std::string& from);

}  // namespace rm
