#!/usr/bin/env bash
# The one command for a GPU owner: builds Ringmaster with CUDA, runs the GPU tests, trains the
# default job on the GPUs in every shard mode against the CPU backend's loss curve, and runs
# bench train on one GPU and the all-reduce benchmark over NCCL; prints a verdict per check and
# exits non-zero if any check failed.
#
#   scripts/gpu-check.sh [--steps N] [--build DIR]
#
# Nothing of the CUDA path had run on a GPU when this script was written (README, "GPUs"): it is
# how the first run tells us what is wrong, so it keeps going after a failed check and keeps
# every log under $OUT (default runs/gpu-check).
#
# Tolerances: the GPU runs use TF32 GEMMs and bf16 where the job says so, and reduce in another
# order than the CPU, so they cannot match bit for bit. fp32 runs must stay within 0.05 nats of
# the CPU's loss at every logged step, bf16 runs within 0.10 (the bf16 CPU emulation tracks fp32
# within 0.013 nats on the CPU tests; the GPU's extra rounding in attention adds some).
set -uo pipefail

STEPS=300
BUILD=build-gpu
OUT=${OUT:-runs/gpu-check}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--build DIR]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
RM="$BUILD/ringmaster"
JOB=configs/shakespeare.yaml
# shellcheck source=scripts/gpu-test-verdicts.sh
source scripts/gpu-test-verdicts.sh
declare -a VERDICTS=()
FAILED=0

verdict() {  # verdict NAME PASS|FAIL|SKIP DETAIL
  VERDICTS+=("$(printf '%-44s %-4s %s' "$1" "$2" "$3")")
  [[ $2 == FAIL ]] && FAILED=1
  printf '%-44s %-4s %s\n' "$1" "$2" "$3"
}

# 0. GPUs.
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > "$OUT/gpus.txt" 2>&1; then
  echo "gpu-check: no GPU visible (nvidia-smi -L failed); this script is for a machine with one" >&2
  exit 2
fi
GPUS=$(grep -c '^GPU ' "$OUT/gpus.txt")
echo "gpu-check: $GPUS GPU(s):"; cat "$OUT/gpus.txt"

# 1. Build with CUDA and NCCL, warnings as errors.
if cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRM_WERROR=ON > "$OUT/cmake.log" 2>&1 &&
   cmake --build "$BUILD" -j"$(nproc)" > "$OUT/build.log" 2>&1 &&
   grep -q 'CUDA=ON NCCL=ON' "$OUT/cmake.log"; then
  verdict "build (CUDA and NCCL, -Werror)" PASS "$BUILD"
else
  verdict "build (CUDA and NCCL, -Werror)" FAIL "see $OUT/cmake.log, $OUT/build.log"
  printf '%s\n' "${VERDICTS[@]}"; exit 1
fi

# 2. The GPU test binaries (they skip without a GPU; here nothing may skip: the GPU tests are the
# only skips CI allows, tests/allowed_skips.txt, so that they run here is what covers them).
for t in kernels/cuda/kernels_cuda_gpu_test kernels/cuda/kernels_cuda_host_test; do
  suite_verdicts "$(basename "$t")" "$BUILD/$t" "$OUT/$(basename "$t")"
done
# The NCCL communicator under mpirun: ctest counts a run whose ranks skipped every test (gtest's
# GTEST_SKIP inside mpirun) as passed, so the output is read here (ctest -V) and any skip fails.
# One GPU per rank: a 1-GPU machine runs the 1-rank case and says the 2-rank one needs 2 GPUs;
# the start-up case (rank 0 cannot start NCCL) puts its 2 ranks on one GPU.
nccl_check() {  # nccl_check CTEST_NAME WHAT
  local rc=0
  (cd "$BUILD" && ctest -R "^$1\$" -V) > "$OUT/$1.log" 2>&1 || rc=$?
  gtest_log_verdict "NCCL communicator $2" "$rc" "$OUT/$1.log"
}
nccl_check collectives_nccl_np1 "tests (1 rank)"
nccl_check collectives_nccl_startup_np2 "start-up failure (2 ranks)"
if [[ $GPUS -ge 2 ]]; then
  nccl_check collectives_nccl_np2 "tests (2 ranks)"
else
  verdict "NCCL communicator tests (2 ranks)" SKIP "needs 2 GPUs (this machine has $GPUS)"
fi

# 3. Training: the CPU backend's curve, then the GPU in each shard mode, on 1 and all GPUs.
COMMON=(--set train.steps="$STEPS" --set train.eval_every=0 --set checkpoint.every=0 --fresh)
# The job's global batch (16) stays the CPU reference's on any number of ranks: past 2 ranks the
# micro-batch shrinks to 16 / ranks (its 8 would need a global batch of 8 x ranks).
train() {  # train NAME NPROC BACKEND PRECISION SHARD [GRAD_REDUCE]
  local mb=$(($2 <= 2 ? 8 : 16 / $2))
  # An earlier check's run of this name would otherwise stand in for one that fails at start.
  rm -rf "${OUT:?}/$1"
  "$RM" run "$JOB" --nproc "$2" "${COMMON[@]}" --set train.micro_batch=$mb --set run_dir="$OUT/$1" \
    --set parallel.backend="$3" \
    --set parallel.precision="$4" --set parallel.shard="$5" \
    --set parallel.grad_reduce="${6:-fp32}" > "$OUT/$1.log" 2>&1
}
# The verdict on run NAME's curve: its largest |loss difference| from the metrics file REF (a run
# of WHAT) at most TOL (0: the same losses to the bit).
curve_verdict() {  # curve_verdict NAME REF WHAT TOL
  local d
  d=$(max_diff "$2" "$OUT/$1/metrics.jsonl")
  if python3 -c "import sys; sys.exit(0 if float('$d') <= $4 else 1)"; then
    verdict "train $1" PASS "max |loss - $3| $d <= $4"
  else
    verdict "train $1" FAIL "max |loss - $3| $d > $4 ($OUT/$1.log)"
  fi
}
# Largest |loss difference| of two metrics files; "inf" unless both log the same steps (a run
# that died partway is not compared over the steps it reached).
max_diff() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def losses(p):
    try: return {j["step"]: j["loss"] for j in map(json.loads, open(p)) if "loss" in j}
    except Exception: return {}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
print(max(abs(a[s] - b[s]) for s in a) if a and set(a) == set(b) else "inf")
PY
}
for precision in fp32 bf16; do
  tol=$([[ $precision == fp32 ]] && echo 0.05 || echo 0.10)
  if ! train "cpu-$precision" 1 cpu "$precision" none; then
    verdict "train cpu $precision (reference)" FAIL "$OUT/cpu-$precision.log"
    continue
  fi
  counts=(1); [[ $GPUS -gt 1 ]] && counts+=("$GPUS")  # a 1-GPU machine trains each once
  for nproc in "${counts[@]}"; do
    if (( 16 % nproc != 0 )); then
      verdict "train cuda $precision on $nproc GPUs" SKIP "the job's 16 sequences a step do not split over $nproc ranks"
      continue
    fi
    for shard in none optimizer gradients full; do
      [[ $nproc == 1 && $shard != none ]] && continue
      for wire in fp32 bf16; do
        # Gradients sent as bf16: once per shard mode, on all GPUs, for the bf16 job.
        [[ $wire == bf16 && ( $precision != bf16 || $nproc == 1 ) ]] && continue
        name="cuda-$precision-np$nproc-$shard$([[ $wire == bf16 ]] && echo -bf16reduce)"
        if ! train "$name" "$nproc" cuda "$precision" "$shard" "$wire"; then
          verdict "train $name" FAIL "$OUT/$name.log"
          continue
        fi
        curve_verdict "$name" "$OUT/cpu-$precision/metrics.jsonl" cpu "$tol"
      done
    done
  done
done

# 3a. The 1-GPU runs took the defaults: step graphs (fp32 and bf16) and cuDNN's attention (bf16).
# A silent fallback would pass the curves above, only slower.
for precision in fp32 bf16; do
  log="$OUT/cuda-$precision-np1-none.log"
  [[ -f $log ]] || continue
  missing=""
  grep -q 'recorded as one graph and run' "$log" || missing+=" no step graph;"
  grep -q 'recording step .* failed' "$log" && missing+=" a recording failed;"
  if [[ $precision == bf16 ]]; then
    grep -q 'attention through cuDNN' "$log" || missing+=" not cuDNN's attention;"
    grep -q "cuDNN's attention .*\(refused\|unavailable\)" "$log" && missing+=" cuDNN refused;"
  fi
  if [[ -z $missing ]]; then
    verdict "defaults used (cuda $precision, 1 GPU)" PASS \
      "step graphs$([[ $precision == bf16 ]] && echo ", cuDNN's attention")"
  else
    verdict "defaults used (cuda $precision, 1 GPU)" FAIL "$missing ($log)"
  fi
done

# 3b. The switches, one at a time on one GPU: step graphs off (RM_CUDA_GRAPH=0; on by default,
# worker/step_graph.h) and the cross-entropy's rows kept in shared memory (RM_CUDA_CE_ROW_IN_SMEM=1,
# kernels/cuda/cross_entropy.h) must log the default bf16 run's losses to the bit; the flash
# kernels instead of cuDNN's attention (RM_CUDNN_ATTENTION=0: what runs where cuDNN is missing)
# must keep the CPU's curve within the bf16 tolerance. (The flash kernels' row-fragment switches:
# gpu-speed.sh.)
ref="$OUT/cuda-bf16-np1-none/metrics.jsonl"
for sw in RM_CUDA_GRAPH=0 RM_CUDA_CE_ROW_IN_SMEM=1 RM_CUDNN_ATTENTION=0; do
  name="cuda-bf16-np1-none-${sw%%=*}"
  # shellcheck disable=SC2163  # sw is VAR=value: exported as it is
  if [[ ! -f $ref ]]; then
    verdict "train $name" SKIP "no default run to compare with"
  elif ! (export "$sw" && train "$name" 1 cuda bf16 none); then
    verdict "train $name" FAIL "$OUT/$name.log"
  elif [[ $sw == RM_CUDA_GRAPH=0 ]] && grep -q 'recorded as one graph' "$OUT/$name.log"; then
    verdict "train $name" FAIL "a graph was recorded with RM_CUDA_GRAPH=0: $OUT/$name.log"
  elif [[ $sw == RM_CUDNN_ATTENTION=0 ]] && grep -q 'attention through cuDNN' "$OUT/$name.log"; then
    verdict "train $name" FAIL "cuDNN's attention ran with RM_CUDNN_ATTENTION=0: $OUT/$name.log"
  elif [[ $sw == RM_CUDNN_ATTENTION=0 ]]; then
    curve_verdict "$name" "$OUT/cpu-bf16/metrics.jsonl" cpu 0.10
  else
    curve_verdict "$name" "$ref" default 0
  fi
done

# 4. Benchmarks: the default job's step on one GPU beside cuBLAS at its GEMM shapes (GPT-2's
# shape and the peers: scripts/gpu-speed.sh), and all-reduce busbw over NCCL.
if "$RM" bench train "$JOB" --set parallel.backend=cuda --set parallel.precision=bf16 \
    --steps 10 > "$OUT/bench_train.log" 2>&1; then
  verdict "bench train (cuda bf16)" PASS "$(grep -m1 '^train step' "$OUT/bench_train.log" | cut -c1-100)"
else
  verdict "bench train (cuda bf16)" FAIL "$OUT/bench_train.log"
fi
if [[ $GPUS -ge 2 ]]; then
  if "$RM" bench allreduce --np "$GPUS" --backend nccl > "$OUT/bench_allreduce.log" 2>&1; then
    verdict "bench allreduce (nccl, $GPUS ranks)" PASS "$OUT/bench_allreduce.log"
  else
    verdict "bench allreduce (nccl, $GPUS ranks)" FAIL "$OUT/bench_allreduce.log"
  fi
else
  verdict "bench allreduce (nccl)" SKIP "needs 2 GPUs"
fi

echo; echo "gpu-check summary ($OUT):"
printf '%s\n' "${VERDICTS[@]}"
exit $FAILED
