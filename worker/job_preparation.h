// One preparation of a job, for every process that starts training: `ringmaster run` before it
// launches its ranks, and each rank (alone, or under mpirun or srun) before it trains. The same
// checks, in the same order, through check_job(), so the two cannot drift:
//   1. the job file and its overrides (configs/job_loader.h: every error, with its place);
//   2. its data (worker/training_data.h: each file opened and its header checked);
//   3. the device (worker/device_select.h: the backend the job asks for, and a GPU per rank),
//      and the step graphs' switch (worker/step_graph.h: RM_CUDA_GRAPH's value) and the cuda
//      kernels' (kernels/gpu_switches.h), on every backend;
//   4. memory: the ranks sharing this host need no more RAM (or GPU memory) than it has
//      (planning/memory_fit.h).
//   5. the initial weights (model.init_from, worker/initial_weights.h): found, and every tensor
//      matched to the model; their checksums read too where JobPlacement says so; not where the
//      run goes on from a checkpoint (JobPlacement::fresh, from_given).
// Each throws the error type the error report turns into one message and exit 2
// (base/error_report.h), before anything is written. The run directory comes after, through
// one function too (base/run_dir.h: prepare_run), called by the launcher, by a lone rank, and
// under MPI by rank 0 once every rank's checks have agreed.
#pragma once

#include <string>
#include <vector>

#include "base/run_dir.h"
#include "configs/job_config.h"
#include "planning/memory_fit.h"
#include "worker/device_select.h"
#include "worker/training_data.h"

namespace rm {

// Where the process that checks sits among the job's ranks.
struct JobPlacement {
  int ranks = 1;       // every rank of the job (the data-parallel count the job is loaded for)
  int local_rank = 0;  // this process among the ranks of its host: which GPU it takes
  int ranks_here = 1;  // ranks on this host (with a hostfile, on its busiest host)
  // The host's ranks may each see GPUs of their own (device_select.h): a rank started by MPI;
  // not the launcher, whose ranks inherit its view.
  bool own_gpus_possible = false;
  // The memory check runs once per host: false on the other ranks of a host.
  bool checks_memory = true;
  // A rank names the host it found itself on in a memory refusal ("host h0", "node n1" under
  // Slurm); the launcher, which has not placed the ranks yet, says "this host".
  bool names_host = false;
  // Check 5 reads every byte of a checkpoint named by model.init_from (its checksums): once per
  // job, by whoever starts it (`run`, a lone rank); the ranks under it check the structure.
  bool verifies_initial_weights = false;
  // How the run starts, as its command line says. model.init_from is read at a run's first
  // start only, so check 5 is skipped where the run goes on from a checkpoint: --from, or a
  // committed one of its own without --fresh (a fine-tune restarted after its source was
  // removed goes on; if none of its checkpoints verifies, the start from init_from says why).
  bool fresh = false;
  bool from_given = false;
};

struct CheckedJob {
  JobConfig job;
  TrainingData data;
  DeviceChoice device;
  MemoryCapacity capacity;  // what the memory need was compared with (unset if not checked)
  MemoryFit fit;            // the estimate and its verdict (unset if not checked)
};

// Whether the run may start from model.init_from, so that check 5 applies: the job names a
// source, and the run does not go on from a checkpoint (--from, or a committed one of its own
// without --fresh). `submit` asks it too.
bool may_start_from_initial_weights(const JobConfig& job, bool fresh, bool from_given);

// Runs checks 1-5 above for the job file `path` with `sets` overrides; throws on the first
// that fails.
CheckedJob check_job(const std::string& path, const std::vector<std::string>& sets,
                     const JobPlacement& where);

// --from PATH, before anything is written (by the launcher, and by rank 0 before it prepares
// the run directory): a checkpoint directory whose manifest and files are all there with their
// sizes (its checksums are read as the ranks restore it), of this job's model; with --fresh,
// which empties the run directory first, not inside it; without, outside it (another run's) only
// into a run directory without checkpoints. Throws IoError (exit 2) naming --from and what is
// wrong. Empty `from`: nothing to check.
//
// The same --from again (a batch script that passes it on every Slurm requeue) once the run
// trains on the line it started: the run's newest committed checkpoint goes on from `from`
// (worker/checkpoint_line.h). It is then not started from again (which would remove that line's
// progress) but resumed as without --from, even where `from` is gone since (retention) or is
// another run's: kGoesOn. Where the line has saved no checkpoint on disk yet (the run directory
// holds none that is whole, and RUN_DIR/line.json says the line began at `from`), its steps may
// be in memory (checkpoint.memory_every): kLineGoesOn, resumed as kGoesOn, from memory if it
// holds a step of the line, else from `from` again.
enum class FromUse {
  kNone,        // no --from
  kStartFrom,   // resume from it, and the run's newer checkpoints go
  kGoesOn,      // the run already goes on from it: resume the run's newest checkpoint
  kLineGoesOn,  // the line it began has no checkpoint on disk yet: as kGoesOn
};
FromUse check_resume_source(const JobConfig& job, const std::string& from, bool fresh);

// How prepare_run_directory judges a finished run (worker/finished_run.h) before it writes.
enum class FinishedRunJudge {
  kNone,       // not at all: --from given, or judged already (`run`'s first attempt)
  kChecksums,  // every byte of the candidates read: by the launcher, which no rank waits for
  kStructure,  // their manifests and sizes alone: by a worker's rank 0 while the other ranks wait
               // for it at start-up. A refusal then is certain (reading the bytes too can only
               // pass over more checkpoints); a checkpoint damaged inside is passed over by the
               // resume, which reads it with every rank and refuses then (config.yaml rewritten,
               // weights.bin and the checkpoints kept: Checkpointing::resume)
};

// base/run_dir.h's prepare_run, the run's newest committed checkpoint that is all there standing
// in for a config.yaml that is gone (its manifest records the job): a run directory of
// checkpoints alone is checked for the same job as any other, and config.yaml is not rewritten
// for another job's run. With `judge` other than kNone (a resume without --from), a finished run
// is judged too, reading its newest checkpoint that verifies at that level: one that
// may not go on is refused with InputError (exit 2) before config.yaml is rewritten, the
// checkpoints passed over said on stdout first. Not a run with in-memory checkpoints
// (checkpoint.memory_every): its ranks may resume from memory newer than the disk, which only
// they can see; they judge it then.
RunStart prepare_run_directory(const JobConfig& job, bool fresh, std::string* changes,
                               FinishedRunJudge judge);

}  // namespace rm
