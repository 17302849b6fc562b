// `ringmaster trace RUN_DIR [-o FILE]` (commands.h): merge, write atomically, say where.
#include <cstdio>
#include <exception>

#include "base/exit_codes.h"
#include "io/atomic_file.h"
#include "io/io_error.h"
#include "io/posix_io.h"
#include "launcher/cli_checks.h"
#include "launcher/commands.h"
#include "launcher/trace_merge.h"

namespace rm {

int cmd_trace(const TraceArgs& args) {
  TraceMergePlan plan;
  try {
    if (!args.output.empty()) cli::refuse_overwriting_input("-o", args.output, args.run_dir);
    plan = plan_trace_merge(args.run_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringmaster trace: %s\n", e.what());
    return kExitBadInput;
  }
  const std::string out = args.output.empty() ? io::join(args.run_dir, "trace.json") : args.output;
  MergedTrace merged;
  try {
    AtomicFileWriter writer(out);
    merged = write_merged_trace(plan, args.run_dir, writer);
    writer.commit();
  } catch (const std::exception& e) {
    // As `report` answers a file it cannot write: an IoError is the path's (bad input); so is a
    // rank file that changed under the merge.
    std::fprintf(stderr, "ringmaster trace: %s\n", e.what());
    return kExitBadInput;
  }
  for (const std::string& note : merged.notes) std::fprintf(stderr, "ringmaster trace: %s\n", note.c_str());
  std::printf("%s: %zu events of %d ranks; open it in Perfetto (ui.perfetto.dev, \"Open trace "
              "file\") or chrome://tracing (\"Load\")\n",
              out.c_str(), merged.events, merged.ranks);
  return kExitOk;
}

}  // namespace rm
