#include "worker/step_graph.h"

#include <cstdlib>

#include "base/input_error.h"

namespace rm {

namespace {

// RM_CUDA_GRAPH's value ("" when unset), one of "", "0" and "1"; check_switch()'s error otherwise.
std::string graph_switch() {
  const char* env = std::getenv("RM_CUDA_GRAPH");
  const std::string asked = env != nullptr ? env : "";
  if (asked != "" && asked != "0" && asked != "1") {
    throw InputError("RM_CUDA_GRAPH=" + asked +
                     ": expected 0 (off) or 1 (on, and say why where it cannot apply)");
  }
  return asked;
}

}  // namespace

void StepGraph::check_switch() {
  graph_switch();
}

bool StepGraph::wanted(const JobConfig& job, Compute& compute, const std::string& comm_backend,
                       std::string* why) {
  // On by default since the sitting of 2026-11-30 measured it (step_graph.h); RM_CUDA_GRAPH=0
  // turns it off. Where it cannot apply, only an explicit RM_CUDA_GRAPH=1 hears why.
  const std::string asked = graph_switch();
  if (why != nullptr) why->clear();
  if (asked == "0") return false;
  std::string no;
  if (!compute.can_capture()) {
    no = "the " + std::string(compute_kind_name(compute.kind())) +
         " backend records no graphs here (or the step is being profiled)";
  } else if (comm_backend != "self") {
    no = "more than one rank (a step graph holds no collectives)";
  } else if (job.parallel.shard != ShardMode::kNone) {
    no = "parallel.shard is not none";
  } else if (job.observability.trace) {
    no = "observability.trace is on";
  } else if (job.model.dropout > 0) {
    no = "model.dropout draws new masks every step (a recorded step would replay its masks)";
  }
  if (why != nullptr && asked == "1") *why = no;
  return no.empty();
}

StepGraph::StepGraph(Compute& compute, int micro_batches, size_t tokens)
    : compute_(compute), tokens_(tokens) {
  slots_ = static_cast<int*>(
      compute.allocate_host(2 * static_cast<size_t>(micro_batches) * tokens * sizeof(int)));
}

StepGraph::~StepGraph() {
  compute_.release_host(slots_);
}

StepGraph::Recording::Recording(StepGraph* graph) : graph_(graph) {
  if (graph_ != nullptr) graph_->compute_.begin_capture();
}

StepGraph::Recording::~Recording() {
  if (graph_ == nullptr) return;
  try {
    graph_->compute_.end_capture(/*keep=*/false);
  } catch (...) {
    // Already unwinding from the failure that matters.
  }
}

void StepGraph::Recording::commit() {
  if (graph_ == nullptr) return;
  StepGraph* const graph = graph_;
  graph_ = nullptr;
  graph->compute_.end_capture(/*keep=*/true);
  graph->compute_.replay();
}

}  // namespace rm
