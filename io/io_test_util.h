// Test helpers for io/: a scratch directory holding a run tree ("run/") and a fault journal
// beside it, and a FaultFileSystem installed over it for the life of the fixture.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "io/atomic_file.h"
#include "io/fault_file_system.h"
#include "io/posix_io.h"
#include "io/power_cut.h"
#include "testing/temp_dir.h"

namespace rm {
namespace io {
namespace test {

using ScratchDir = testutil::TempDir;  // testing/temp_dir.h

// A run directory under fault injection: everything under run() is journaled.
class FaultyRun {
 public:
  explicit FaultyRun(FaultPlan plan = {}) {
    make_dir(run());
    plan.scope = run();
    plan.journal = journal();
    if (plan.count_under.empty()) plan.count_under = run();
    plan.freeze = true;
    fs_ = std::make_unique<FaultFileSystem>(plan);
    installed_ = std::make_unique<ScopedFileSystem>(fs_.get());
  }
  std::string run() const { return dir_.file("run"); }
  std::string journal() const { return dir_.file("journal.log"); }
  std::string at(const std::string& name) const { return join(run(), name); }
  FaultFileSystem& fs() { return *fs_; }
  // Uninstalls the fault layer (the machine is off) and applies the power cut.
  PowerCutReport power_cut(CutMode mode = CutMode::kDropUnsynced) {
    installed_.reset();
    return apply_power_cut(journal(), run(), mode);
  }

 private:
  ScratchDir dir_;
  std::unique_ptr<FaultFileSystem> fs_;
  std::unique_ptr<ScopedFileSystem> installed_;
};

inline void write_text(const std::string& path, const std::string& text,
                       Durability d = Durability::kDurable) {
  write_file_atomic(path, text.data(), text.size(), d);
}

// The file's content, or "<absent>".
inline std::string content(const std::string& path) {
  if (!exists(path)) return "<absent>";
  return read_file(path);
}

}  // namespace test
}  // namespace io
}  // namespace rm
