// For a program whose processes call MPI_Init, in builds with AddressSanitizer
// (scripts/sanitize.sh; in any other build this header defines nothing). Include it in exactly
// one source file of the program, the one with main(): it defines a function.
//
// Open MPI 4 does not free what MPI_Init allocates: at exit LeakSanitizer finds ~3,400
// unreachable blocks, which tests/sanitizers/lsan.supp suppresses by the Open MPI library or
// component their allocation was made in. Open MPI also dlclose()s its components in
// MPI_Finalize, and a frame in an unloaded component prints as <unknown module> and matches
// nothing. LSan's default, fast unwinder follows frame pointers, which Open MPI's code omits,
// so it often stops inside the component: a stack may hold no frame but the component's. Until
// 2026-12-05 these programs asked for the slow unwinder instead (fast_unwind_on_malloc=0), which
// reaches MPI_Init in libmpi but unwinds the whole stack on every allocation of the process:
// 68 of ASan's heaviest tests took 279 s with it, 187-189 s without (docs/reliability.md).
//
// So the program keeps the components mapped instead: its own dlclose() does nothing, and
// shadows libc's for every library of the process (the executable comes first in the symbol
// lookup). A leak in a component then names the component's file, under Open MPI's
// directory, which the suppressions match; the fast unwinder's first frame is enough.
// Libraries stay loaded until exit, which only a sanitizer build does.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
// Exported from the executable (the linker exports a symbol that a shared library it links
// uses, as Open MPI's use dlclose: `nm -D` lists it in ringmaster and the MPI test programs), so
// that their dlclose calls resolve to it. Were it not, their leaks would be reported: loudly.
extern "C" __attribute__((visibility("default"), used)) int dlclose(void* /*handle*/) {
  return 0;
}
#endif
