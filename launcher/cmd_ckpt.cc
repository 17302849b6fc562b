// `ringmaster ckpt list|verify|inspect|export`: placeholder while being written.
#include "launcher/commands.h"
#include "launcher/exit_codes.h"

namespace rm {

int cmd_ckpt_list(const CkptArgs&) { return kExitFailure; }
int cmd_ckpt_verify(const CkptArgs&) { return kExitFailure; }
int cmd_ckpt_inspect(const CkptArgs&) { return kExitFailure; }
int cmd_ckpt_export(const CkptArgs&) { return kExitFailure; }

}  // namespace rm
