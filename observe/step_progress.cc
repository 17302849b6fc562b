#include "observe/step_progress.h"

namespace rm {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kStart:
      return "start";
    case Phase::kData:
      return "data";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kGradientSync:
      return "gradient sync";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kEvaluate:
      return "evaluate";
    case Phase::kLog:
      return "log";
    case Phase::kCheckpointSave:
      return "checkpoint save";
    case Phase::kCheckpointWait:
      return "checkpoint wait";
    case Phase::kCheckpointLoad:
      return "checkpoint load";
  }
  return "?";
}

}  // namespace rm
