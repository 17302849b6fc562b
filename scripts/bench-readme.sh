#!/usr/bin/env bash
# Every speed figure of docs/performance.md (and the README's headline rows), each beside its
# baseline measured in the same run:
#   training   Ringmaster's `bench train` beside PyTorch (scripts/torch_gpt_ddp.py, the same GPT:
#              pre-LN blocks, GELU tanh, tied head, AdamW) on the same shape, batch and threads;
#              1 process x 2 threads, and weak scaling 1 -> 2 processes x 1 thread
#   all-reduce `bench allreduce --np 2`: the communicator beside plain MPI_Allreduce
#   checkpoint `bench ckpt`: saves beside a plain write+fsync, restores beside a plain read
# Machines here are shared and noisy: each training row runs REPEATS times, Ringmaster and
# PyTorch alternating, and prints the median of the runs' own medians with the spread.
#
# PyTorch: Debian's python3-torch (apt-get install python3-torch python3-numpy); without it the
# PyTorch columns say "not installed" and everything else runs.
#   scripts/bench-readme.sh                  # all rows, REPEATS=3 (about 20 minutes here)
#   REPEATS=1 STEPS=6 scripts/bench-readme.sh train   # quick: training rows only
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-3}
steps=${STEPS:-12}
what=${1:-all}
bin=build/ringmaster
torch=scripts/torch_gpt_ddp.py
[[ -x $bin ]] || { echo "bench-readme: $bin is missing: run 'make build' first" >&2; exit 2; }
have_torch=false
# The kernel set Ringmaster runs on this CPU (kernels/cpu/blas_kernels.h). Debian's PyTorch
# calls the same OpenBLAS, which on a CPU newer than the library falls back to its generic
# kernels: PyTorch runs with this set forced, so that both sides use the same kernels.
blas_core=$(env -u OPENBLAS_CORETYPE $bin bench cpu --threads 1 |
  sed -nE 's/^blas: OpenBLAS [0-9.]+, (\w+) kernels.*/\1/p')
cpu_model=$($bin bench cpu --threads 1 | sed -nE 's/^# bench cpu: //p')
/usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=true

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit} m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.0f [%.0f-%.0f]\n", m, v[1], v[NR]}'; }
first() { awk '{print $1}'; }

# ringmaster_tokps SHAPE_SETS NPROC THREADS -> "tokens/s MFU%"
ringmaster_tokps() {
  local sets=$1 np=$2 threads=$3 mb
  mb=$(sed -E 's/.*train.micro_batch=([0-9]+).*/\1/' <<<"$sets")
  # shellcheck disable=SC2086
  $bin bench train configs/shakespeare.yaml $sets --set train.global_batch=$((mb * np)) \
    --set parallel.threads_per_rank="$threads" --nproc "$np" --steps "$steps" |
    sed -nE 's/^train step: .* \| ([0-9.]+) tokens\/s .* MFU vs sgemm ([0-9.]+)%.*/\1 \2/p'
}
# torch_tokps SHAPE_ARGS NPROC THREADS -> tokens/s
torch_tokps() {
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=$3 OPENBLAS_CORETYPE=$blas_core /usr/bin/python3 $torch $1 --nproc "$2" --threads "$3" --steps "$steps" \
    --no-compare-nosync --ar-reps 1 |
    sed -nE 's/^step.*tokens\/s\(global\) +([0-9.]+).*/\1/p'
}

# name | Ringmaster overrides | PyTorch shape (the same model, micro-batch per process)
shapes=(
  "default job shape (L4 H4 C128 T128 B16)|--set model.seq_len=128 --set model.layers=4 --set model.heads=4 --set model.width=128 --set train.micro_batch=16|--L 4 --H 4 --C 128 --T 128 --B 16"
  "width 768 (L2 H12 C768 T256 B4)|--set model.seq_len=256 --set model.layers=2 --set model.heads=12 --set model.width=768 --set train.micro_batch=4|--L 2 --H 12 --C 768 --T 256 --B 4"
)

train_rows() {
  echo "## training: tokens/s (all processes), median of $repeats runs [min-max], $steps steps each"
  printf '%-40s %-14s %-22s %-22s %s\n' "shape" "processes" "Ringmaster" "PyTorch 1.13" "ratio"
  for spec in "${shapes[@]}"; do
    IFS='|' read -r name sets shape <<<"$spec"
    for layout in "1 2" "1 1" "2 1"; do
      read -r np threads <<<"$layout"
      local rm_runs="" mfu_runs="" pt_runs=""
      for ((i = 0; i < repeats; i++)); do
        read -r tokps mfu < <(ringmaster_tokps "$sets" "$np" "$threads")
        rm_runs+="$tokps"$'\n'
        mfu_runs+="$mfu"$'\n'
        if $have_torch; then pt_runs+="$(torch_tokps "$shape" "$np" "$threads")"$'\n'; fi
      done
      local rm pt ratio="" mfu
      rm=$(printf '%s' "$rm_runs" | median)
      mfu=$(printf '%s' "$mfu_runs" | median | first)
      pt="not installed"
      if $have_torch; then
        pt=$(printf '%s' "$pt_runs" | median)
        ratio=$(awk -v a="$(first <<<"$rm")" -v b="$(first <<<"$pt")" 'BEGIN{printf "%.2fx", a/b}')
      fi
      printf '%-40s %-14s %-22s %-22s %s\n' "$name" "${np} x ${threads} thr" "$rm" "$pt" "$ratio (MFU $mfu%)"
      eval "rm_${np}_${threads}=$(first <<<"$rm")"
      $have_torch && eval "pt_${np}_${threads}=$(first <<<"$pt")"
    done
    # Weak scaling: 2 processes x 1 thread against twice 1 process x 1 thread.
    awk -v n="$name" -v r1="$rm_1_1" -v r2="$rm_2_1" -v p1="${pt_1_1:-0}" -v p2="${pt_2_1:-0}" \
      'BEGIN {printf "%-40s weak scaling 1 -> 2 x 1 thr: Ringmaster %.0f%%", n, 100*r2/(2*r1);
              if (p1 > 0) printf ", PyTorch DDP (gloo) %.0f%%", 100*p2/(2*p1); printf "\n"}'
  done
}

allreduce_rows() {
  echo "## all-reduce, 2 ranks: Ringmaster's communicator beside MPI_Allreduce (busbw GB/s)"
  $bin bench allreduce --np 2
}

ckpt_rows() {
  echo "## checkpoint: save beside a plain write+fsync, restore beside a plain read"
  $bin bench ckpt --gib "${CKPT_GIB:-1}" --repeats "${CKPT_REPEATS:-3}"
}

echo "# bench-readme: $(date -u +%FT%TZ) on $(hostname), $(nproc) cores, ringmaster $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# cpu: $cpu_model; OpenBLAS kernels $blas_core for Ringmaster and PyTorch alike"
$have_torch || echo "# PyTorch: not installed (apt-get install python3-torch python3-numpy)"
case $what in
  all) train_rows; allreduce_rows; ckpt_rows ;;
  train) train_rows ;;
  allreduce) allreduce_rows ;;
  ckpt) ckpt_rows ;;
  *) echo "usage: scripts/bench-readme.sh [all|train|allreduce|ckpt]" >&2; exit 2 ;;
esac
