// Where the step loop of this rank is, for the watchdog (watchdog.h): the training thread marks
// each phase of a step as it begins and beats within long phases; the watchdog thread reads.
//
// Cost: a mark or a beat is two or three relaxed atomic stores, no lock, no allocation, no
// fence. The trainer marks a handful of phases per micro-batch and ShardedState beats once per
// parameter unit (a layer's tensors), never per element, so training speed is unchanged whether
// a watchdog watches or not.
//
// Threading: one writer (the thread that trains), any number of readers. A reader may see the
// phase of one mark with the step of the next; it only reads after seconds without a beat,
// when nothing moves.
#pragma once

#include <atomic>
#include <cstdint>

namespace rm {

enum class Phase : uint8_t {
  kStart,           // run() began, before the first step
  kData,            // filling a micro-batch
  kForward,         // a micro-batch's forward
  kBackward,        // its backward (gradient reductions start here)
  kGradientSync,    // finishing the gradient reductions, the loss all-reduce, the norm
  kOptimizer,       // the update (and the parameter all-gather when sharded)
  kEvaluate,        // validation batches
  kLog,             // metrics line and log (rank 0)
  kCheckpointSave,  // writing this rank's shard; rank 0 also collects and commits (sync saves)
  kCheckpointWait,  // waiting for an asynchronous save (its staging copy, or all of it)
  kCheckpointLoad,  // reading a checkpoint back (rollback)
};

// "forward", "checkpoint save", ...
const char* phase_name(Phase phase);

// Told of every phase a StepProgress enters, on the thread that marks it (a trace recorder).
class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  virtual void on_phase(Phase phase, int64_t step) = 0;
};

class StepProgress {
 public:
  // Training thread. `step` is 1-based, as the logs print steps: the step being trained, or the
  // one just finished (evaluation, log, checkpoint of step k).
  void enter(Phase phase, int64_t step) {
    step_.store(step, std::memory_order_relaxed);
    enter(phase);
  }
  void enter(Phase phase) {
    phase_.store(phase, std::memory_order_relaxed);
    beat();
    if (observer_ != nullptr) observer_->on_phase(phase, step());
  }
  // Training thread, before marking starts; null: none (the default, and all it costs is this
  // test).
  void set_observer(PhaseObserver* observer) { observer_ = observer; }
  // Progress within the current phase (a parameter unit of forward or backward).
  void beat() {
    beats_.store(beats_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // Any thread.
  uint64_t beats() const { return beats_.load(std::memory_order_relaxed); }
  Phase phase() const { return phase_.load(std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> beats_{0};
  std::atomic<int64_t> step_{0};
  std::atomic<Phase> phase_{Phase::kStart};
  PhaseObserver* observer_ = nullptr;
};

}  // namespace rm
