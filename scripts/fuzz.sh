#!/usr/bin/env bash
# Builds the libFuzzer targets (cmake/fuzz.cmake) with clang and runs each for a bounded time,
# then reports per target: executions, coverage (libFuzzer's cov: and ft:) and any finding.
#
#   scripts/fuzz.sh                 every target
#   scripts/fuzz.sh job_fuzz ...    only these
#
# Environment:
#   RM_FUZZ_SECONDS  seconds per target (default 60); the run takes ceil(targets /
#                    RM_FUZZ_JOBS) x this, plus the build (~5 min from scratch on 2 cores,
#                    seconds when nothing changed)
#   RM_FUZZ_BUILD    the clang build directory (default build-fuzz)
#   RM_FUZZ_JOBS     compile jobs, and targets fuzzed at once (default 2; each fuzzer is one
#                    process)
#   RM_FUZZ_BUILD_ONLY=1  build, run nothing (CI builds at the lowest priority during
#                    `make test`, .ci/run)
#
# Each target fuzzes a working corpus, RM_FUZZ_BUILD/fuzz-runs/TARGET/corpus, kept between runs
# so coverage accumulates, plus its seed corpus in the repository, which libFuzzer only reads:
# nothing is ever written into the repository. The log and the crash inputs of the latest run
# are in RM_FUZZ_BUILD/fuzz-runs/TARGET/.
#
# Exit status: 0 when no target found anything; 1 when one crashed, leaked, ran out of memory
# or timed out (its input is printed, with how to make it a regression seed); 2 when the
# toolchain or the build is missing or broken. Needs clang-14, libclang-rt-14-dev (libFuzzer
# and the sanitizers) and libomp-14-dev (OpenMP for clang): scripts/install-deps.sh installs
# them as root (RM_WITH_FUZZ=1), or prints the command.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

seconds=${RM_FUZZ_SECONDS:-60}
build=${RM_FUZZ_BUILD:-build-fuzz}
jobs=${RM_FUZZ_JOBS:-2}
[[ $build == /* ]] || build=$repo/$build
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: RM_FUZZ_SECONDS must be a positive number of seconds, got '$seconds'" >&2
  exit 2
fi
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: RM_FUZZ_JOBS must be a positive number, got '$jobs'" >&2
  exit 2
fi

# ---- Toolchain: clang-14, libclang-rt-14-dev (libFuzzer, sanitizers), libomp-14-dev ---------
RM_WITH_FUZZ=1 scripts/install-deps.sh || exit 2

# ---- Build: only the fuzz targets --------------------------------------------------------------
started=$SECONDS
if [[ -f $build/CMakeCache.txt ]] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang' "$build/CMakeCache.txt"; then
  echo "fuzz: $build is not a clang build; remove it or set RM_FUZZ_BUILD" >&2
  exit 2
fi
# RelWithDebInfo: optimised enough to fuzz fast, with line numbers in the sanitizers' reports.
if ! log=$(CC=clang-14 CXX=clang++-14 cmake -S "$repo" -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRM_WITH_CUDA=OFF 2>&1); then
  echo "$log" >&2
  echo "fuzz: cmake failed" >&2
  exit 2
fi
if ! grep -q '^RM_HAVE_LIBFUZZER:INTERNAL=1' "$build/CMakeCache.txt"; then
  echo "fuzz: clang-14 in $build cannot link -fsanitize=fuzzer (is libclang-rt-14-dev whole?)" >&2
  exit 2
fi
echo "fuzz: building the fuzz targets in $build"
if ! log=$(cmake --build "$build" -j "$jobs" --target fuzz_targets 2>&1); then
  echo "$log" | tail -40 >&2
  echo "fuzz: the build failed" >&2
  exit 2
fi
build_seconds=$((SECONDS - started))
if [[ ${RM_FUZZ_BUILD_ONLY:-0} == 1 ]]; then
  echo "fuzz: built in ${build_seconds}s (RM_FUZZ_BUILD_ONLY: nothing run)"
  exit 0
fi

# ---- Run ---------------------------------------------------------------------------------------
# Targets as cmake/fuzz.cmake registered them: NAME<TAB>SEED CORPUS<TAB>MAX_LEN.
targets=()
while IFS=$'\t' read -r name corpus max_len; do
  if [[ $# -gt 0 ]]; then
    wanted=0
    for w in "$@"; do [[ $w == "$name" ]] && wanted=1; done
    [[ $wanted == 1 ]] || continue
  fi
  targets+=("$name"$'\t'"$corpus"$'\t'"$max_len")
done <"$build/fuzz/targets.tsv"
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "fuzz: no fuzz target matches: $*" >&2
  exit 2
fi

# The harnesses' scratch files (fuzz/scratch_dir.h) go here, in memory, and go away at exit even
# when a fuzzer crashes before it can clean up.
scratch=$(mktemp -d /dev/shm/rm_fuzz_sh.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export RM_FUZZ_SCRATCH=$scratch
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# fuzz_target NAME CORPUS MAX_LEN: one fuzzer run, its exit status written to fuzz-runs/NAME/rc.
fuzz_target() {
  local name=$1 corpus=$2 max_len=$3 runs=$build/fuzz-runs/$1 rc=0
  # -timeout: one input running this long is a hang. The outer timeout only guards against a
  # fuzzer that stops answering altogether (its own clock runs inside the process).
  timeout -k 10 $((seconds + 120)) "$build/fuzz/$name" \
    -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$runs/artifacts/" \
    "$runs/corpus" "$corpus" >"$runs/fuzz.log" 2>&1 || rc=$?
  echo "$rc" >"$runs/rc"
}

echo "fuzz: ${#targets[@]} targets x ${seconds}s, $jobs at once (build took ${build_seconds}s)"
running=0
for t in "${targets[@]}"; do
  IFS=$'\t' read -r name corpus max_len <<<"$t"
  runs=$build/fuzz-runs/$name
  rm -rf "$runs/artifacts" "$runs/rc"
  mkdir -p "$runs/corpus" "$runs/artifacts"
  if [[ $running -ge $jobs ]]; then
    wait -n || true  # a fuzzer's status is in its rc file
    running=$((running - 1))
  fi
  echo "fuzz: $name for ${seconds}s (log: $runs/fuzz.log)"
  fuzz_target "$name" "$corpus" "$max_len" &
  running=$((running + 1))
done
wait || true

report=()
findings=()
for t in "${targets[@]}"; do
  IFS=$'\t' read -r name corpus max_len <<<"$t"
  runs=$build/fuzz-runs/$name
  artifacts=$runs/artifacts
  rc=$(cat "$runs/rc" 2>/dev/null || echo 255)

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$runs/fuzz.log" | tail -1)
  if [[ -z $execs ]]; then  # no final stats (killed): the last status line's count
    execs=$(grep -o '^#[0-9]*' "$runs/fuzz.log" | tail -1 | tr -d '#' || true)
  fi
  last=$(grep -E 'cov: [0-9]+ ft: [0-9]+' "$runs/fuzz.log" | tail -1 || true)
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.*corp: ([0-9]+).*/\1/p' <<<"$last")
  inputs=$(find "$artifacts" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  result=ok
  if [[ -n $inputs ]]; then
    result=$(basename "$(head -1 <<<"$inputs")" | cut -d- -f1)  # crash, leak, timeout, oom
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
    result=hung
  elif [[ $rc -ne 0 ]]; then
    result="failed(rc=$rc)"
  fi
  report+=("$(printf '%-18s %-10s %12s %8s %8s %8s' "$name" "$result" "${execs:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}")")
  if [[ $result != ok ]]; then
    # The first line that says what went wrong: a sanitizer, libFuzzer, or an escaped exception.
    why=$(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|what\(\):|ALARM:|out-of-memory' \
      "$runs/fuzz.log" || true)
    findings+=("$name: $result${why:+ -- $why}")
    findings+=("  log:   $runs/fuzz.log")
    while IFS= read -r input; do
      [[ -n $input ]] && findings+=("  input: $input")
    done <<<"$inputs"
    findings+=("  reproduce: $build/fuzz/$name INPUT   (reruns just that input)")
    findings+=("  once fixed: cp INPUT ${corpus#"$repo"/}/regression_WHAT  (bad_WHAT if it must be")
    findings+=("    rejected); the GCC build then replays it in every test run: ctest -R $name")
  fi
done

echo
printf '%-18s %-10s %12s %8s %8s %8s\n' target result executions cov ft corpus
printf '%s\n' "${report[@]}"
echo "fuzz: ${#targets[@]} targets x ${seconds}s; build ${build_seconds}s, total $((SECONDS - started))s"
if [[ ${#findings[@]} -gt 0 ]]; then
  echo
  echo "fuzz: FINDINGS"
  printf '%s\n' "${findings[@]}"
  exit 1
fi
echo "fuzz: no findings"
