#include "worker/job_preparation.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "base/input_error.h"
#include "base/run_dir.h"
#include "checkpoint/checkpoint_paths.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "configs/job_diff.h"
#include "configs/job_loader.h"
#include "io/io_error.h"
#include "io/posix_io.h"
#include "kernels/gpu_switches.h"
#include "planning/host_memory.h"
#include "worker/checkpoint_line.h"
#include "worker/data/encoded_text.h"
#include "worker/finished_run.h"
#include "worker/initial_weights.h"
#include "worker/step_graph.h"

namespace rm {

CheckedJob check_job(const std::string& path, const std::vector<std::string>& sets,
                     const JobPlacement& where) {
  CheckedJob c;
  c.job = load_job(path, sets, where.ranks);
  c.data = open_training_data(c.job);
  c.device = choose_device(c.job.parallel.backend, where.local_rank, where.ranks_here,
                           where.own_gpus_possible);
  StepGraph::check_switch();
  if (const std::string bad = gpu_switches_error(); !bad.empty()) throw InputError(bad);
  if (where.checks_memory) {
    c.capacity.host = host_memory();
    c.capacity.gpu = c.device.kind == ComputeKind::kCuda ? gpu_memory() : 0;
    if (where.names_host) {
      char name[256] = {};
      ::gethostname(name, sizeof name - 1);
      c.capacity.slurm = std::getenv("SLURM_JOB_ID") != nullptr;
      c.capacity.host_name = std::string(c.capacity.slurm ? "node " : "host ") + name;
    }
    c.fit = check_memory_fit(c.job, where.ranks, where.ranks_here, c.device.kind, c.capacity,
                             tokenized_text_bytes(c.job.data));
  }
  if (may_start_from_initial_weights(c.job, where.fresh, where.from_given)) {
    check_initial_weights(
        c.job, where.verifies_initial_weights ? VerifyLevel::kChecksums : VerifyLevel::kStructure);
  }
  return c;
}

bool may_start_from_initial_weights(const JobConfig& job, bool fresh, bool from_given) {
  return !job.model.init_from.empty() && !from_given &&
         (fresh || !holds_committed_checkpoint(job.run_dir));
}

FromUse check_resume_source(const JobConfig& job, const std::string& from, bool fresh) {
  namespace fs = std::filesystem;
  if (from.empty()) return FromUse::kNone;
  FromUse use = FromUse::kStartFrom;
  if (!fresh) {
    // The line `from` started already has a checkpoint: the newest committed one that is all
    // there (a resume takes the newest that verifies, and falls back to `from` itself when none
    // of the line does: Checkpointing::resume).
    const auto list = list_checkpoints(job.run_dir, VerifyLevel::kStructure);
    bool whole = false;  // the run holds a committed checkpoint that is all there
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      if (!it->committed || !it->verify.ok) continue;
      whole = true;
      try {
        const nlohmann::json state = load_manifest(it->path).state;
        if (goes_on_from(state, from)) return FromUse::kGoesOn;
        // The newest is the line's start itself (line.json names it: its own state records the
        // line *it* was on), here as the run's own checkpoint: the line has not saved yet.
        if (goes_on_from({{"line_from", line_of_checkpoint(job.run_dir, it->path, state)}}, from)) {
          use = FromUse::kLineGoesOn;
        }
      } catch (const std::exception&) {
      }
      break;
    }
    // None of its own yet: the line this --from began (line.json) may have trained on in memory.
    if (!whole) {
      const nlohmann::json line = recorded_line_start(job.run_dir);
      if (!line.is_null() && goes_on_from({{"line_from", line}}, from)) {
        use = FromUse::kLineGoesOn;
      }
    }
    // A line that has not saved goes on from memory, or from `from` again if memory holds none:
    // `from` is checked as for a start from it where it is there (bad input, exit 2, not a rank's
    // failure that a restart would repeat); where retention removed it since, memory must hold
    // the line (the ranks say so if not).
    if (use == FromUse::kLineGoesOn && !fs::exists(from)) return use;
  }
  const std::string what = "--from " + from + ": ";
  if (!fs::is_directory(from)) {
    throw IoError(what + "no such directory (give a checkpoint: RUN_DIR/checkpoints/step_N)");
  }
  if (!fs::exists(fs::path(from) / kManifestFileName)) {
    throw IoError(what + "not a checkpoint (no " + kManifestFileName +
                  "; give one of RUN_DIR/checkpoints/step_N)");
  }
  const VerifyResult v = verify_checkpoint(from, VerifyLevel::kStructure);
  if (!v.ok) throw IoError(what + "does not verify: " + v.error);
  // Its model must be this job's (the ranks would find out only as they restore it, one by one).
  JobConfig source;
  try {
    source = load_stored_job(CheckpointReader(from).manifest().job, from + "/manifest.json");
  } catch (const std::exception& e) {
    throw IoError(what + "its job does not load: " + e.what());
  }
  // The architecture only: recompute, chunking, dropout and init_from change how it trains, not
  // which tensors it has.
  const auto architecture = [](const ModelConfig& m) {
    JobConfig j;
    j.model.type = m.type;
    j.model.vocab_size = m.vocab_size;
    j.model.seq_len = m.seq_len;
    j.model.layers = m.layers;
    j.model.heads = m.heads;
    j.model.width = m.width;
    j.model.mlp_embed = m.mlp_embed;
    j.model.mlp_context = m.mlp_context;
    return j;
  };
  if (const std::string d =
          describe_differences(architecture(source.model), architecture(job.model));
      !d.empty()) {
    throw IoError(what + "a checkpoint of another model (" + d + ")");
  }
  const fs::path rel =
      fs::weakly_canonical(from).lexically_relative(fs::weakly_canonical(job.run_dir));
  const bool inside = !rel.empty() && *rel.begin() != "..";
  if (fresh && inside) {
    throw IoError(what + "inside " + job.run_dir +
                  ", which --fresh empties first: drop --fresh (the run then goes on from this "
                  "checkpoint), or copy the checkpoint elsewhere");
  }
  // Another run's checkpoint starts this run from it: into a run directory with checkpoints of
  // its own it would leave those of its steps up to it, of an unrelated line, for a restart to go
  // back to.
  // (Committed ones whose files are there: scratch and damaged ones are never resumed from, and a
  // restart that goes on from --from finds those its failed attempt left.)
  if (!fresh && !inside) {
    for (const CheckpointInfo& c : list_checkpoints(job.run_dir, VerifyLevel::kStructure)) {
      if (c.committed && c.verify.ok) {
        throw IoError(what + "another run directory's checkpoint, but " + job.run_dir +
                      "/checkpoints holds checkpoints of its own: give --fresh to start this run "
                      "from it, or a new run_dir");
      }
    }
  }
  return use;
}

RunStart prepare_run_directory(const JobConfig& job, bool fresh, std::string* changes,
                               FinishedRunJudge judge) {
  const auto recorded = [](const std::string& run_dir) -> std::pair<std::string, std::string> {
    const auto list = list_checkpoints(run_dir, VerifyLevel::kStructure);
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      if (!it->committed || !it->verify.ok) continue;
      try {
        return {it->path + "/" + kManifestFileName, load_manifest(it->path).job};
      } catch (const std::exception&) {
      }
    }
    return {};
  };
  const auto finished_run = [&](RunStart start) {
    if (start != RunStart::kResume || judge == FinishedRunJudge::kNone) return;
    if (job.checkpoint.memory_every > 0) return;  // memory may hold the end: the ranks judge
    if (!io::exists(run_file(job.run_dir, "weights.bin"))) return;  // not finished: no reading
    std::vector<std::string> skipped;
    const VerifyLevel level =
        judge == FinishedRunJudge::kChecksums ? VerifyLevel::kChecksums : VerifyLevel::kStructure;
    const std::optional<CheckpointInfo> newest = find_resume_checkpoint(
        job.run_dir, &skipped,
        [level](const std::string& dir) { return verify_checkpoint(dir, level); });
    const FinishedRun verdict = judge_finished_run(job, newest);
    if (verdict == FinishedRun::kGoesOn) return;
    for (const std::string& line : skipped) std::printf("ringmaster: %s\n", line.c_str());
    std::fflush(stdout);
    throw InputError(finished_run_refusal(job.run_dir, verdict, newest ? newest->step : 0));
  };
  // Under the run lock, before anything looks for a checkpoint: a replace cut short puts back
  // the checkpoint it had moved aside (checkpoint_writer.h), or the resume would pass over it.
  own_run_dir(job.run_dir);
  restore_replaced_checkpoints(job.run_dir);
  return prepare_run(job, fresh, changes, recorded, finished_run);
}

}  // namespace rm
