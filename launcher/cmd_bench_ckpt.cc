// `ringmaster bench ckpt`: placeholder until the benchmark lands.
#include "launcher/commands.h"
#include "launcher/exit_codes.h"

namespace rm {

int cmd_bench_ckpt(const BenchCkptArgs&) {
  print_error("bench ckpt: not implemented yet");
  return kExitFailure;
}

}  // namespace rm
