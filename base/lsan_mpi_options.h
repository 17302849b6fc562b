// LeakSanitizer's options for a process that calls MPI_Init, in builds with AddressSanitizer
// (scripts/sanitize.sh; nothing in any other build).
//
// Open MPI 4 does not free what MPI_Init allocates, and dlclose()s its components in
// MPI_Finalize: at exit LSan finds ~3,400 unreachable blocks, many allocated inside a component
// that is no longer mapped, whose frames print as <unknown module>. tests/sanitizers/lsan.supp
// suppresses them by the Open MPI library that some frame of their stack is in (libmpi's
// MPI_Init, for those). That needs whole stacks: LSan's default, fast unwinder follows frame
// pointers, which Open MPI's code omits, and stops inside the component. The slow unwinder
// (fast_unwind_on_malloc=0) reaches MPI_Init, but costs on every allocation: measured 10x on an
// allocation-heavy test (MemoryFit.ASmallerMicroBatchKeepsTheValidationSet, 7.3 s against
// 0.73 s). So it is asked for here, by the programs that call MPI_Init, and not for every
// process as sanitize.sh did: a program defines LSan's hook once, e.g.
//
//   #if defined(__SANITIZE_ADDRESS__)
//   extern "C" const char* __lsan_default_options() { return rm::lsan_options_for_mpi(); }
//   #endif
//
// Options in LSAN_OPTIONS still override these (the runtime reads the hook first).
#pragma once

namespace rm {

inline const char* lsan_options_for_mpi() {
  return "fast_unwind_on_malloc=0";
}

}  // namespace rm
