#!/usr/bin/env bash
# Which BLAS should Ringmaster's CPU path use on this machine? `ringmaster bench train` at the
# job's own GEMM shapes, 2 ranks x 1 thread (make demo's layout), with each candidate, the
# candidates alternated REPEATS times; medians of tokens/s and of the sgemm rate at the job's
# shapes, and each one's ratio to the default (OpenBLAS with the kernels ringmaster chooses).
#   OpenBLAS 0.3.21 as ringmaster runs it (kernels for this CPU: kernels/cpu/blas_kernels.h)
#   OpenBLAS forced to Haswell (AVX2) and to Prescott (SSE3: what it does on a CPU it does not know)
#   BLIS 0.9 (Debian's libblis4-openmp) and ATLAS 3.10 (libatlas3-base), through LD_PRELOAD of
#   their cblas_sgemm (the banner still names OpenBLAS: its other functions stay loaded)
# Installs libblis4-openmp and libatlas3-base if missing (as root).
#   scripts/bench-blas.sh [JOB_SETS...]   REPEATS=3 STEPS=8 by default
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-3}
steps=${STEPS:-8}
bin=build/ringmaster
[[ -x $bin ]] || { echo "bench-blas: $bin is missing: run 'make build' first" >&2; exit 2; }
for p in libblis4-openmp libatlas3-base; do
  dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $p >/dev/null
done
lib=/usr/lib/x86_64-linux-gnu
names=(ringmaster haswell prescott blis atlas)
envs=("env -u OPENBLAS_CORETYPE"
      "env OPENBLAS_CORETYPE=Haswell"
      "env OPENBLAS_CORETYPE=Prescott"
      "env -u OPENBLAS_CORETYPE BLIS_NUM_THREADS=1 LD_PRELOAD=$lib/blis-openmp/libblis.so.4"
      "env -u OPENBLAS_CORETYPE LD_PRELOAD=$lib/libcblas.so.3")
shapes=("--set train.micro_batch=16"
        "--set model.layers=2 --set model.heads=12 --set model.width=768 --set model.seq_len=256 --set train.micro_batch=4")
labels=("default job: L4 H4 C128 T128, 16 seq/rank" "width 768: L2 H12 C768 T256, 4 seq/rank")
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; $repeats runs each, alternated"
for si in "${!shapes[@]}"; do
  mb=$(sed -E 's/.*train.micro_batch=([0-9]+).*/\1/' <<<"${shapes[$si]}")
  for r in $(seq "$repeats"); do
    for i in "${!names[@]}"; do
      # shellcheck disable=SC2086
      ${envs[$i]} $bin bench train configs/shakespeare.yaml ${shapes[$si]} \
        --set train.global_batch=$((mb * 2)) --set parallel.threads_per_rank=1 --nproc 2 \
        --steps "$steps" > "$out/run.txt" 2>&1 || { cat "$out/run.txt" >&2; exit 1; }
      sed -nE 's/^train step: .* \| ([0-9.]+) tokens\/s .*/\1/p' "$out/run.txt" >> "$out/$si-${names[$i]}.tok"
      sed -nE 's/^sgemm at these shapes: ([0-9.]+) GFLOP\/s per rank.*/\1/p' "$out/run.txt" >> "$out/$si-${names[$i]}.gf"
    done
  done
  echo; echo "${labels[$si]}"
  printf '%-12s %12s %16s %10s\n' blas tokens/s "sgemm GFLOP/s" "vs ours"
  base=$(median < "$out/$si-ringmaster.tok")
  for n in "${names[@]}"; do
    t=$(median < "$out/$si-$n.tok"); g=$(median < "$out/$si-$n.gf")
    printf '%-12s %12.0f %16.1f %9.2fx\n' "$n" "$t" "$g" "$(awk -v a="$t" -v b="$base" 'BEGIN{print a/b}')"
  done
done
