// The test hooks the shipped binary keeps, behind one seam: install_test_hooks_from_env() is the
// only code of the ringmaster binary that reads an RM_TEST_* variable, and launcher/main.cc calls
// it once, at the start of every ringmaster process (the launcher, the supervisor's child, each
// rank under mpirun or srun). Each hook is off unless its variable is set; off, it costs nothing
// but a comparison. What each does, where it lives, and the tests that set it:
//   RM_TEST_FAULT        one rank stops, dies, sleeps, NaNs, saves slowly or is killed mid-save
//                        at a chosen moment (worker/fault_injection.h): the watchdog, restart,
//                        NaN, crash-save and Slurm tests
//   RM_TEST_IO_FAULT     the file layer journals every mutating call for simulated power cuts,
//                        and fails or tears one (io/fault_file_system.h): the power-cut,
//                        save-error and I/O tests
//   RM_TEST_READ_PAUSE_MS
//                        a reader (eval, sample, export, ckpt inspect; rank 0 of a --from
//                        resume) sleeps between choosing and pinning its checkpoint and reading
//                        it (checkpoint/checkpoint_pin.h):
//                        the reader-pin tests, which race a live run's retention
//   RM_TEST_HOST_MEMORY, RM_TEST_GPU_MEMORY
//                        the memory the pre-flight checks see (planning/host_memory.h): the
//                        memory-fit tests, the same on any machine
// The test programs' own harness (testing/) is never linked into the binary.
#pragma once

namespace rm {

// Installs every hook whose variable is set. Throws IoError for a malformed RM_TEST_IO_FAULT
// (the caller exits 2); a malformed RM_TEST_FAULT or memory figure is reported on stderr and
// ignored.
void install_test_hooks_from_env();

}  // namespace rm
