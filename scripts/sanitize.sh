#!/usr/bin/env bash
# The sanitizer stage of CI: builds the project with AddressSanitizer + UndefinedBehaviorSanitizer
# (build-asan/) and with ThreadSanitizer (build-tsan/), runs a subset of the tests under each and
# fails on any test failure or any sanitizer report, from any process (mpirun's ranks and the
# ringmaster children of the CLI tests are instrumented too), on any alternative of TSAN_TESTS
# that selects no test and, where RM_REQUIRE is set (CI), on any test of the subset that did not
# run (a skip passes ctest; tests/check_ctest_skips.py, as after `make test`).
#   scripts/sanitize.sh [asan|tsan|all]    all by default; JOBS (2) build and ctest jobs;
#                                          CMAKE_FLAGS are passed to cmake (CI: -DRM_WERROR=ON)
#   scripts/sanitize.sh build [asan|tsan|all]  the builds only, nothing run: CI makes both at
#                                          the lowest priority while `make test` runs (.ci/run),
#                                          and the `all` after it finds them up to date
# (Building TSan's tree at nice 19 during ASan's tests instead saved 16 s of 8 minutes: those
# tests keep the CPU busier than `make test`'s, and ran 18% slower beside the build.)
#   scripts/sanitize.sh list [BUILD_DIR]   builds and runs nothing: each test program of a
#                                          configured build (build-asan/, else build/) and
#                                          whether it runs under ASan, or why not
#
# Build type: Debug (-O0 -g, asserts on). Measured under ASan: a file compiles ~2x slower at
# -O1 and ~3x slower at -O2 (RelWithDebInfo), i.e. ~+7 and ~+14 minutes of build at -j1, while
# the whole test subset below takes 4 minutes: no faster tests can win that back. The loops that
# dominate run time are optimised anyway (kernels/cpu at -O3 in sanitizer builds: measured
# Cli.RunTrains... 33 s -> 2 s, RunLock.* 108-191 s -> 21 s; the reduction kernels always).
#
# Measured on this 2-core machine (Debian 12, GCC 12), from scratch:
#                 build -j1   tests ctest -j1   tests ctest -j2
#   asan+ubsan      413 s         238 s             171 s      (357 tests)
#   tsan            194 s          62 s              51 s      (23 tests)
# CI at -j2: the builds take about half (~5 min together), so the stage takes ~9 minutes.
# Not re-measured since the ASan subset grew to every test program (16 more programs built and
# ~60 more test cases run, a few of them small 2-rank training runs: recompute_cli_test,
# report_cli_test, metrics_cli_test, hosts_cli_test); expect a few minutes more.
#
# The subsets (ASAN_EXCLUDE, TSAN_TESTS below):
#   asan  every test program is built and every test runs, except the programs in ASAN_NOT_BUILT
#         (each with its reason there) and these tests:
#           collectives_np1/np4, collectives_bf16_np3, dp_equivalence_np1/np4, grad_reduce_np2:
#             the same code as the np2/np3 runs that stay (15-48 s each under ASan);
#           the RunLock tests of 3000-step runs (3 x 21 s; its lease tests run),
#             Mode/WatchdogCliSlowSaves.* (2 x 15 s of deliberately slow saves: timing, not
#             memory): passed clean when measured; too long for the budget;
#           the tests that measure a run's peak resident memory against the estimate
#             (MemoryFitCli.TheEstimateMatches..., MemoryFitCli.TheFinalWeights...,
#             MemoryFitCli.AZero3RankMakesOnlyItsShard..., MemoryFitCli.TextEncodedWith...,
#             RecomputeCli.PeakResidentMemoryIsLower...): ASan's shadow memory, redzones and
#             quarantine of freed blocks add to the RSS they measure;
#           MemorySnapshot.ASegmentThatCannotBeMapped...: it caps a child's address space just
#             above what the child maps, which under ASan includes terabytes of reserved shadow,
#             so the cap never bites there;
#           ReportCli.RefusesWhatIsNotARunDirectory... (five reports of a long run),
#             TraceRecorder.StopsAtTheEventCap..., .AtTheCapEvery... and .PastTheCap... (traces
#             past their event cap): JSON-heavy loops
#             at -O0 under ASan, over 300 s and 289 s there against 3 s and 2 s in Release, which
#             put CI past an hour; the same code runs under ASan in the other ReportCli and
#             TraceRecorder tests, and the event cap under TSan;
#           EvalChoicesCli.ATrainedModelPicksTheTrueContinuation...: 300 steps of training
#             and two evaluations to show the accuracy is far above chance (87 s under ASan in
#             CI), a check of the model, not of memory; the choice scoring runs under ASan in the
#             other EvalChoicesCli tests, after the same 300 steps in fp32 and bf16;
#           CpuKernelsCli.OnACpuWithout... and .OnAnAvx2Cpu...: they run the binary under
#             qemu-x86_64 on an emulated older CPU, where ASan's shadow (terabytes of reserved
#             address space) cannot be set up: qemu-user's process is killed (96 s, then 137).
#             The instruction-set guard they test runs at the start of every ASan process;
#           slurm_*: they need the Slurm cluster and take minutes even in Release;
#           cluster_*, collectives_two_and_three_hosts, collectives_faults_across_hosts: the
#             test hosts' rsh agent starts remote processes with a fresh environment, as ssh
#             does, so they run without this script's sanitizer options and suppressions (Open
#             MPI's own leaks then fail them, or a report goes to a stderr that a test expecting
#             the job to fail never reads); they run in every `make test`.
#         The script fails, naming it, on a test program of the build that is in neither
#         ASAN_TARGETS nor ASAN_NOT_BUILT: a new test program runs under ASan unless it is listed
#         with its reason.
#   tsan  the threads we start and the signals: the async checkpoint writer (AsyncWriter.*), the
#         trace recorder fed by a save's thread and the training thread (TraceRecorder.*), the
#         watchdog and the communicator's activity seqlock (Watchdog.*, CommActivity.*), the
#         MPI communicator (collectives_np2), and a stop signal to one rank of a real 2-rank run
#         (the rank's signal handler, its writer and watchdog threads, MPI, in one process).
#         The other stop-signal tests signal the launcher, which waits in waitpid() with
#         SA_RESTART handlers: TSan runs a handler only when the interrupted call returns, so
#         under TSan the launcher would pass the signal on after the job has ended (a TSan
#         artifact, checked with a 20-line program; the launcher has no threads for TSan to
#         check). ASan runs those tests.
#
# Environment, and why:
#   ASan+UBSan: leaks are checked. Open MPI 4 leaks what MPI_Init allocates;
#     tests/sanitizers/lsan.supp suppresses its libraries and components by name. The programs
#     that call MPI_Init keep those components mapped (base/lsan_mpi_program.h: their dlclose
#     does nothing), so that a leak's first frame names its component with LSan's fast unwinder.
#     Until 2026-12-05 they used the slow unwinder instead, to reach a libmpi frame, at a cost on
#     every allocation: 68 of ASan's tests took 279 s with it and 187-189 s now, back to back
#     (docs/reliability.md). Turning leak checks off for the MPI tests instead would also hide
#     our own leaks in the worker, which only runs under MPI: a leak planted in
#     testing/mpi_test_main.cc is still reported, at its line.
#     UBSan ends the process at its first report (-fno-sanitize-recover=undefined).
#   TSan: OMP_THREAD_LIMIT=1. libgomp is not instrumented, so TSan does not see its barriers and
#     reports data handed between OpenMP threads as races (measured: GptModel.OverfitsOneBatch
#     reports a "race" on a variable that the OpenMP region reads and the main thread writes
#     after the join). OMP_NUM_THREADS=1 is not enough: the worker sets its own thread count
#     (parallel.threads_per_rank, or cores / local ranks), and only the thread limit also caps
#     omp_set_num_threads. TSan then checks the threads we start ourselves, which is the point.
#     setarch -R: GCC 12's TSan cannot map its shadow on kernels with vm.mmap_rnd_bits=32.
#   Reports: ASan, LSan and TSan write them to files in BUILD/sanitizer-reports/ (log_path), one
#     per process, so that a report from a child whose stderr a test captures, or whose exit
#     code a test expects to be non-zero, still fails the stage: the script prints them all and
#     exits 1. Every sanitizer also exits non-zero (ASan/UBSan 1, TSan 66) and mpirun passes a
#     rank's non-zero exit on, so the test that hit it fails too. One gap: UBSan inside ASan
#     (GCC 12) prints to stderr whatever log_path says; a UBSan report in a ringmaster child
#     fails every CLI test except one that expects exit 1 (DiskFull, RestartOff, the rank-fault
#     tests), and those run code that other tests run expecting success.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
which=${1:-all}
JOBS=${JOBS:-2}
CMAKE_FLAGS=${CMAKE_FLAGS:-}

# ---- The subsets (ctest -R include, -E exclude; test names as ctest -N lists them) -----------
# ASan: every test but these (and the tests of the programs not built: *_NOT_BUILT).
ASAN_EXCLUDE='^(slurm_.*|cluster_.*|collectives_two_and_three_hosts|collectives_faults_across_hosts|collectives_np[14]|collectives_bf16_np3|dp_equivalence_np[14]|grad_reduce_np2)$|^RunLock\.(SecondRunOnALiveRunDirectoryIsRefused|AKilledRunLeavesNoStaleLock|InsideASlurmJobARunWaitsForTheOldHolder)$|^Mode/WatchdogCliSlowSaves\.|^MemoryFitCli\.(TheEstimateMatchesThePeakResidentMemoryOfRealRuns|TheFinalWeightsAreWrittenWithoutACopyOfTheModel|AZero3RankMakesOnlyItsShardOfTheInitialWeights|TextEncodedWithATokenizerIsCountedAndTheRunStaysNearTheEstimate)$|^RecomputeCli\.PeakResidentMemoryIsLowerAndTheRunRecordsIt$|^MemorySnapshot\.ASegmentThatCannotBeMappedIsNotLeftBehind$|^CpuKernelsCli\.(OnACpuWithoutTheBuildsExtensionsItRefusesBeforeMainInsteadOfDying|OnAnAvx2CpuItSaysToRebuildForX86_64V3)$|^EvalChoicesCli\.ATrainedModelPicksTheTrueContinuationFarMoreOftenThanChance$|^ReportCli\.RefusesWhatIsNotARunDirectoryAndWritesNothing$|^TraceRecorder\.(StopsAtTheEventCapAndSaysHowManyItDropped|AtTheCapEveryKeptReductionKeepsItsEnd|PastTheCapAReenteredPhaseOrUnitIsOneDrop)$|_NOT_BUILT$'
ASAN_TARGETS=(ringmaster collectives_fault_worker
  kernels_cpu_test device_arena_test timed_compute_test io_test data_test configs_test checkpoint_test worker_test
  base_test model_test planning_test observe_test memory_estimate_test
  device_step_test step_graph_test memory_checkpoint_cli_test
  manifest_fuzz_corpus_test safetensors_fuzz_corpus_test llmc_model_file_fuzz_corpus_test
  job_fuzz_corpus_test
  token_shard_fuzz_corpus_test choice_file_fuzz_corpus_test
  collectives_self_test collectives_nccl_plan_test collectives_test collectives_fault_test
  dp_equivalence_test grad_reduce_test stream_order_test
  report_test slurm_checks_test gpu_peak_test restart_placement_test mpi_session_dir_test child_process_test
  cli_test cpu_kernels_cli_test memory_fit_cli_test recompute_cli_test hosts_cli_test plan_cli_test resume_cli_test
  init_from_cli_test eval_choices_cli_test spike_skip_cli_test tokenizer_cli_test gpt2_tokenizer_reference_test bpe_tokenizer_fuzz_corpus_test
  console_cli_test events_cli_test report_cli_test metrics_cli_test trace_cli_test
  run_lock_cli_test disk_full_cli_test multirank_cli_test device_cli_test precision_cli_test
  ckpt_cli_test bench_ckpt_cli_test bench_cli_test stop_signal_cli_test nan_rollback_cli_test restart_cli_test
  watchdog_cli_test reshard_cli_test save_error_cli_test gtest_by_suite_fixture
  cli_values_cli_test from_checkpoint_cli_test input_files_cli_test reader_pin_cli_test)
# The test programs not built under ASan, and why. Nothing else may be left out (check_programs).
declare -A ASAN_NOT_BUILT=(
  [hostile_files_cli_test]="every test runs ringmaster under prlimit --data=512MiB, and ASan's shadow memory (terabytes of reserved, never touched address space) counts against RLIMIT_DATA, so the binary cannot start; the same parsers run in-process under ASan in configs_test (hostile_job_test) and checkpoint_test (hostile_files_test)"
  [crash_save_cli_test]="22 kill-and-resume trials, 110 s under ASan (passed clean when measured): too long for the budget; the kill-and-resume path runs under ASan in resume_cli_test and restart_cli_test"
  [power_cut_cli_test]="6 minutes of power cuts even in Release; the fault layer and the power-cut replay it drives run under ASan in io_test"
  [kernels_cuda_host_test]="CUDA: the sanitizer builds configure RM_WITH_CUDA=OFF (CI has no GPU to run the CUDA path on); scripts/gpu-check.sh runs it on a GPU machine"
  [kernels_cuda_gpu_test]="CUDA: as kernels_cuda_host_test"
  [collectives_nccl_test]="NCCL: needs CUDA, as kernels_cuda_host_test"
)
# Not the later event-cap tests: one thread, 200000 events; the cap under TSan is the first's.
TSAN_EXCLUDE='^TraceRecorder\.(AtTheCapEveryKeptReductionKeepsItsEnd|PastTheCapAReenteredPhaseOrUnitIsOneDrop)$'
TSAN_TESTS='^(AsyncWriter\.|Watchdog\.|CommActivity\.|TraceRecorder\.|collectives_np2$|Signals/StopSignal\.SavesStopsAndResumesExactly/sigusr1_to_one_of_two_ranks)'
TSAN_TARGETS=(checkpoint_test worker_test observe_test collectives_test stop_signal_cli_test)

now() { date +%s; }

# test_programs DIR: the test programs of configured build DIR, one a line: the programs of its
# tests' commands inside the build tree, and the gtest programs not built (ctest lists those as
# PROGRAM_NOT_BUILT).
test_programs() {
  (cd "$1" && ctest --show-only=json-v1) | python3 -c '
import json, os, sys
build = os.path.realpath(sys.argv[1])
names = set()
for t in json.load(sys.stdin)["tests"]:
    if t["name"].endswith("_NOT_BUILT"):
        names.add(t["name"][: -len("_NOT_BUILT")])
        continue
    for arg in t.get("command", []):
        if os.path.realpath(arg).startswith(build + os.sep):
            names.add(os.path.basename(arg))
print("\n".join(sorted(names)))' "$1"
}

# check_programs DIR [print]: fails naming each test program of DIR that is neither built under
# ASan nor listed with its reason in ASAN_NOT_BUILT; with "print", lists every program's fate.
check_programs() {
  local dir=$1 mode=${2:-} p t status=0 programs
  programs=$(test_programs "$dir") || return 1
  [[ -n $programs ]] || { echo "sanitize: no tests found in $dir" >&2; return 1; }
  for p in $programs; do
    local built=0
    for t in "${ASAN_TARGETS[@]}"; do [[ $t == "$p" ]] && built=1; done
    if [[ $built == 1 ]]; then
      [[ $mode == print ]] && printf '  %-32s asan\n' "$p"
    elif [[ -n ${ASAN_NOT_BUILT[$p]:-} ]]; then
      [[ $mode == print ]] && printf '  %-32s not under asan: %s\n' "$p" "${ASAN_NOT_BUILT[$p]}"
    else
      echo "sanitize: test program $p is neither in ASAN_TARGETS nor in ASAN_NOT_BUILT (with its reason): add it to one" >&2
      status=1
    fi
  done
  return $status
}

# configure_and_build DIR SANITIZERS TARGET...: a Debug build with RM_SANITIZE, of the targets
# that the subset runs (the tests of executables not built are listed by ctest as *_NOT_BUILT).
configure_and_build() {
  local dir=$1 san=$2 generator=()
  shift 2
  # As the Makefile's fresh builds: one unit per library, and Ninja for a directory not yet
  # configured (a configured one keeps its generator; cmake refuses to change it).
  if [[ ! -f $dir/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
  # shellcheck disable=SC2086
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Debug -DRM_SANITIZE="$san" \
    -DRM_WITH_CUDA=OFF -DRM_UNITY_LIBS=ON $CMAKE_FLAGS >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; return 1; }
  cmake --build "$dir" -j "$JOBS" --target "$@"
}

# run_tests DIR INCLUDE EXCLUDE [WRAPPER...]: ctest on the subset (run by WRAPPER if given), then
# fail on any test that did not run and on any sanitizer report. MPI's idle ranks yield and
# OpenMP's idle threads sleep, as under `make test` (the Makefile says why: JOBS tests at a time
# start more threads than there are cores).
run_tests() {
  local dir=$1 include=$2 exclude=$3 status=0
  export OMPI_MCA_mpi_yield_when_idle=1 OMP_WAIT_POLICY=passive
  shift 3
  # --no-tests=error: a subset that matches nothing (a renamed test) fails, not passes.
  local junit=$root/$dir/ctest-sanitize.xml
  local args=(--output-on-failure --no-tests=error -j "$JOBS" -R "$include" --output-junit "$junit")
  [[ -n $exclude ]] && args+=(-E "$exclude")
  rm -f "$dir/Testing/Temporary/LastTestsFailed.log" "$junit"
  if ! (cd "$dir" && "$@" ctest "${args[@]}"); then
    # Once more, alone (scripts/ctest-rerun-failed.sh); a sanitizer report from either run
    # still fails the stage below.
    local rerun=("$root/scripts/ctest-rerun-failed.sh" . -R "$include")
    [[ -n $exclude ]] && rerun+=(-E "$exclude")
    (cd "$dir" && "$@" "${rerun[@]}") || status=$?
  fi
  # A skip passes ctest: as after `make test` in CI, a test of the subset that did not run fails
  # the stage by name (the rerun's own tests are checked by the rerun script). Where no part of
  # the machine is required (RM_REQUIRE unset: not CI), a test that needs a missing part (the
  # tokenizer's npm packages, say) skips as under `make test`, and is only named.
  if [[ ! -f $junit ]]; then
    echo "sanitize: ctest wrote no $junit" >&2
    status=1
  elif ! python3 "$root/tests/check_ctest_skips.py" "$junit" "$root/tests/allowed_skips.txt"; then
    if [[ -n ${RM_REQUIRE:-} ]]; then
      status=1
    else
      echo "sanitize: tests skipped (a failure where RM_REQUIRE is set, as in CI)" >&2
    fi
  fi
  local reports
  reports=$(find "$dir/sanitizer-reports" -type f -size +0 2>/dev/null | sort)
  if [[ -n $reports ]]; then
    echo "sanitize: sanitizer reports (one file per process) in $dir/sanitizer-reports:" >&2
    for f in $reports; do
      echo "==== $f" >&2
      cat "$f" >&2
    done
    status=1
  fi
  return $status
}

# A fresh report folder before the build: the build runs the test binaries (gtest discovery),
# and a report from one of those counts as well.
reports_dir() {
  rm -rf "$1/sanitizer-reports"
  mkdir -p "$1/sanitizer-reports"
  echo "$root/$1/sanitizer-reports"
}

# The sanitizers' options of each build, for its tests and for the build itself (which runs the
# test programs to list their tests). A fresh report folder each time: a report of an earlier
# build's listing comes again when the tests run the same program.
asan_env() {
  local logs
  mkdir -p build-asan
  logs=$(reports_dir build-asan)
  export ASAN_OPTIONS="detect_leaks=1:log_path=$logs/asan:log_exe_name=1"
  export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
  # The same log_path here: UBSan parses its options after ASan's, and without one there it sets
  # the report path back to stderr for ASan's reports too.
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/asan:log_exe_name=1"
}
tsan_env() {
  local logs
  mkdir -p build-tsan
  logs=$(reports_dir build-tsan)
  export TSAN_OPTIONS="suppressions=$root/tests/sanitizers/tsan.supp:second_deadlock_stack=1:log_path=$logs/tsan:log_exe_name=1"
  export OMP_THREAD_LIMIT=1
}
unset_env() { unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS OMP_THREAD_LIMIT; }

build_asan() { (asan_env && configure_and_build build-asan address,undefined "${ASAN_TARGETS[@]}"); }
build_tsan() { (tsan_env && configure_and_build build-tsan thread "${TSAN_TARGETS[@]}"); }

asan() {
  local dir=build-asan t0 t1 t2
  asan_env
  t0=$(now)
  # `|| return`: set -e does not apply inside a function called as `asan || status=1`.
  configure_and_build $dir address,undefined "${ASAN_TARGETS[@]}" || return 1
  check_programs $dir || return 1
  t1=$(now)
  local status=0
  run_tests $dir . "$ASAN_EXCLUDE" || status=$?
  t2=$(now)
  unset_env
  echo "sanitize: asan+ubsan build $((t1 - t0)) s, tests $((t2 - t1)) s" >&2
  return $status
}

# every_tsan_prefix_selects DIR: each alternative of TSAN_TESTS selects some test of DIR. ctest's
# --no-tests=error only fails a subset that selects nothing at all; a renamed suite would drop out
# of TSan's quietly while the others still run.
every_tsan_prefix_selects() {
  local dir=$1 inner alt status=0 alternatives
  inner=${TSAN_TESTS#^(}
  inner=${inner%)}
  IFS='|' read -ra alternatives <<<"$inner"
  for alt in "${alternatives[@]}"; do
    if ! (cd "$dir" && ctest -N -R "^$alt") | grep -q '^Total Tests: [1-9]'; then
      echo "sanitize: TSAN_TESTS' alternative '$alt' selects no test of $dir (renamed?)" >&2
      status=1
    fi
  done
  return $status
}

tsan() {
  local dir=build-tsan t0 t1 t2
  tsan_env
  t0=$(now)
  configure_and_build $dir thread "${TSAN_TARGETS[@]}" || return 1
  every_tsan_prefix_selects $dir || return 1
  t1=$(now)
  local status=0
  # Without address-space randomisation: GCC 12's TSan cannot map its shadow memory on kernels
  # that randomise mmap with 32 bits (vm.mmap_rnd_bits=32); setarch -R is harmless elsewhere.
  run_tests $dir "$TSAN_TESTS" "$TSAN_EXCLUDE" setarch "$(uname -m)" -R || status=$?
  t2=$(now)
  unset_env
  echo "sanitize: tsan build $((t1 - t0)) s, tests $((t2 - t1)) s" >&2
  return $status
}

case $which in
  list)
    dir=${2:-}
    if [[ -z $dir ]]; then dir=build-asan; [[ -f $dir/CTestTestfile.cmake ]] || dir=build; fi
    echo "sanitize: the test programs of $dir under ASan+UBSan (tests left out besides: ASAN_EXCLUDE):"
    check_programs "$dir" print
    ;;
  asan) asan ;;
  tsan) tsan ;;
  build)
    t0=$(now)
    case ${2:-all} in
      asan) build_asan ;;
      tsan) build_tsan ;;
      all) build_asan || exit 1; build_tsan ;;  # not `&&`: set -e spares its left side
      *) echo "usage: scripts/sanitize.sh build [asan|tsan|all]" >&2; exit 2 ;;
    esac
    echo "sanitize: build ${2:-all} made in $(($(now) - t0)) s (nothing run)" >&2
    ;;
  all)
    status=0
    asan || status=1
    tsan || status=1
    exit $status
    ;;
  *)
    echo "usage: scripts/sanitize.sh [asan|tsan|all] | build [asan|tsan|all] | list [BUILD_DIR]" >&2
    exit 2
    ;;
esac
