#include "worker/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rm {
namespace {

struct Fault {
  char kind[16] = "";
  int rank = -1;
  long long step = -1;
};

Fault parse() {
  Fault f;
  const char* spec = std::getenv("RM_TEST_FAULT");
  if (spec && std::sscanf(spec, "%15[a-z]:%d:%lld", f.kind, &f.rank, &f.step) != 3) {
    std::fprintf(stderr, "ringmaster: ignoring malformed RM_TEST_FAULT='%s'\n", spec);
    f.rank = -1;
  }
  return f;
}

}  // namespace

void maybe_inject_fault(int rank, int64_t step) {
  static const Fault fault = parse();
  if (fault.rank != rank || fault.step != step) return;
  std::fprintf(stderr, "ringmaster: [rank %d] RM_TEST_FAULT: %s at step %lld\n", rank,
               fault.kind, fault.step);
  std::fflush(stderr);
  if (std::strcmp(fault.kind, "stop") == 0) raise(SIGSTOP);
  if (std::strcmp(fault.kind, "kill") == 0) raise(SIGKILL);
  if (std::strcmp(fault.kind, "sleep") == 0) sleep(3600);
}

}  // namespace rm
