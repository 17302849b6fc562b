#!/usr/bin/env bash
# gpu-speed.sh [STEPS] [SECTIONS] -- one prepared sitting on a GPU machine, run inside the packed build's
# environment (../shared/gpu/on-device.sh: ringmaster, kernels_cuda_gpu_test and the anchors on
# PATH), from the checkout's root. Prints a verdict per check; the logs go to /tmp/gpu-speed and
# come back as $OUT/logs.tgz beside $OUT/verdicts.txt (the device tool returns few files):
#   1. kernels_cuda_gpu_test, a suite a process: every GPU test, none may skip;
#      collectives_nccl_test on one rank, and rank 0 failing to start NCCL on two
#   2. the default job, 300 steps, cuda bf16 against the cpu fp32 curve (max |loss diff| <= 0.10,
#      gpu-check.sh's bf16 tolerance; the default runs cuDNN's attention and step graphs, and must
#      say so), and again with each switch: step graphs off (RM_CUDA_GRAPH=0) and the
#      cross-entropy's rows in shared memory (RM_CUDA_CE_ROW_IN_SMEM=1): the same losses to the
#      bit; the flash kernels instead of cuDNN's attention (RM_CUDNN_ATTENTION=0, and with two row
#      fragments a warp in their dK/dV or dQ kernel, RM_FLASH_DKV_FRAGMENTS=2,
#      RM_FLASH_DQ_FRAGMENTS=2) and cuDNN's accumulating backward (RM_CUDNN_ATTENTION=2): within
#      the same tolerance of the cpu curve
#   3. bench train at GPT-2 124M's shape (V 50257, L12, C768, H12, T1024), bf16, 16 and 4 sequences,
#      each with a profiled step (--profile 1: every kernel and GEMM timed alone); then each
#      switch off and on, alternated twice, and a profiled step with it on
#   2c. a killed run resumes bit for bit: the default job on cuda bf16 (the defaults: cuDNN's
#      attention, step graphs), 60 steps straight, and killed at step 45 then resumed from its
#      checkpoint of step 40: the same weights.bin, byte for byte
#   4. peers.sh STEPS: Ringmaster beside PyTorch, llm.c and llm.c + cuDNN in the same sitting
#      (skipped with STEPS=0: a shorter sitting that checks a change and times Ringmaster alone)
#   2d. data.choices on cuda: the default job scoring a multiple-choice file every 100 steps
#      (scripts/shakespeare_choices.py): at least 0.9 at step 300, within 3 examples in 200 of
#      `eval --choices --backend cpu` of the same weights, and the curve's losses to the bit;
#      `eval` on the GPU (its default for a cuda run): --choices within 2 examples of the
#      score in training, --data within 0.02 of the CPU's loss; `sample` on the GPU
# SECTIONS (default all): a comma-separated subset of tests (1), curves (2), choices (2d), resume (2c), bench
# (3), switches (3b), peers (4), so that a sitting whose device calls are limited to 10 minutes can take the
# script in two or three calls on the same warm machine.
# A base to time against, alternated twice with the change in step 3 (unprofiled) and measured
# by peers.sh as ringmaster-base: the packed base build (pack BUILD BASE_BUILD), or, with
# BASE_ENV="VAR=value ..." (a change switched off by environment variables), the same binary
# with those variables set.
set -u
STEPS=${1:-20}
SECTIONS=${2:-tests,curves,choices,resume,bench,switches,peers}
want() { [[ ,$SECTIONS, == *,$1,* ]]; }
RESULT=${OUT:-/tmp/gpu-speed-out}
OUT=/tmp/gpu-speed
rm -rf "$OUT" && mkdir -p "$OUT" "$RESULT"
FAILED=0
# Verdicts and the bench logs reach $RESULT as they come: a run cut short still returns them.
verdict() {
  printf '%-40s %-4s %s\n' "$1" "$2" "$3" | tee -a "$OUT/verdicts.txt" "$RESULT/verdicts.txt"
  [[ $2 == FAIL ]] && FAILED=1
}
# shellcheck source=scripts/gpu-test-verdicts.sh
source "$(dirname "$0")/gpu-test-verdicts.sh"
# The packed Open MPI whole, mpirun and plugins too. on-device.sh puts the packed libraries first
# on the library path, but Open MPI and PMIx load their plugins from the directories compiled
# into them, where the GPU image now has another Open MPI's: on 2026-11-30 every mpirun there
# failed (mca_pmix_ext3x.so: undefined symbol: PMIx_Info_create). OPAL_PKGLIBDIR and
# PMIX_PKGLIBDIR move those directories. mpirun is the packed orterun: the packed `mpirun` is
# Debian's link to /etc/alternatives/mpirun, which on the GPU machine is the image's.
packed=$(dirname "$(dirname "$(command -v ringmaster)")")/ompi
if [[ -x $packed/bin/orterun && -d $packed/lib/openmpi/lib/openmpi3 ]]; then
  export OPAL_PKGLIBDIR=$packed/lib/openmpi/lib/openmpi3
  [[ -d $packed/lib/pmix2/lib/pmix ]] && export PMIX_PKGLIBDIR=$packed/lib/pmix2/lib/pmix
  mkdir -p /tmp/rm-packed-mpirun && ln -sfn "$packed/bin/orterun" /tmp/rm-packed-mpirun/mpirun
  export PATH=/tmp/rm-packed-mpirun:$PATH
fi
echo "mpirun: $(readlink -f "$(command -v mpirun)")"
nvidia-smi -L | tee "$OUT/gpus.txt"

# The shapes and switches the sections share.
gpt2=(--set model.vocab_size=50257 --set model.layers=12 --set model.heads=12 --set model.width=768
      --set model.seq_len=1024 --set parallel.backend=cuda --set parallel.precision=bf16
      --set optimizer.lr=6e-4)
# The default job's 300-step curve (2, 2b, 2d).
job=(configs/shakespeare.yaml --fresh --set train.steps=300 --set train.eval_every=0
     --set checkpoint.every=0 --set train.log_every=25)
# The switches (2b, 3b). cuDNN's attention (deterministic backward) and step graphs are the
# defaults since the sitting of 2026-11-30; each switch is one or more VAR=value joined by "+":
# cuDNN's accumulating backward, the flash kernels (and their row fragments), graphs off, the
# cross-entropy's rows in shared memory.
SWITCHES=(RM_CUDNN_ATTENTION=2 RM_CUDNN_ATTENTION=0 RM_CUDNN_ATTENTION=0+RM_FLASH_DKV_FRAGMENTS=2
          RM_CUDNN_ATTENTION=0+RM_FLASH_DQ_FRAGMENTS=2 RM_CUDA_GRAPH=0 RM_CUDA_CE_ROW_IN_SMEM=1)
# The switch's variables, one a word.
vars_of() { tr '+' ' ' <<< "$1"; }
curve_diff() {  # max |loss difference| of two runs' metrics.jsonl; "inf" unless both logged the
               # same steps, 10 or more (a run that died early agrees over the steps it has)
  python3 - "$1" "$2" <<'PY'
import json, sys
def losses(p):
    try: return {j["step"]: j["loss"] for j in map(json.loads, open(p))}
    except Exception: return {}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
common = sorted(set(a) & set(b))
same = set(a) == set(b) and len(common) >= 10
print(f"{max(abs(a[s] - b[s]) for s in common):.4f}" if same else "inf")
PY
}

# 1. GPU tests.
if want tests; then
  suite_verdicts "gpu tests" "$(command -v kernels_cuda_gpu_test)" "$OUT/gpu-tests" 240
  # The NCCL communicator with one rank, and its start-up where rank 0 cannot start NCCL (two
  # ranks on the one GPU, no network interface NCCL may use): as gpu-check.sh runs them.
  nccl_run() {  # nccl_run WHAT NP MPIRUN_ARGS...
    local what=$1 np=$2 log="$OUT/nccl-np$2.log" rc=0
    shift 2
    timeout 120 mpirun -np "$np" --oversubscribe "$@" > "$log" 2>&1 || rc=$?
    gtest_log_verdict "NCCL $what" "$rc" "$log"
  }
  nccl_run "tests (1 rank)" 1 collectives_nccl_test '--gtest_filter=-NcclStartup.*'
  nccl_run "start-up failure (2 ranks)" 2 -x NCCL_SOCKET_IFNAME=rm_no_such_interface \
    collectives_nccl_test '--gtest_filter=NcclStartup.*'
fi

# 2. The loss curve against the CPU's.
if want curves; then
  # A warm machine keeps the last call's runs: a run that fails at start would leave them to be
  # compared as its own.
  rm -rf /tmp/gs-*
  rc_cpu=0 rc_cuda=0
  timeout 240 ringmaster run "${job[@]}" --set run_dir=/tmp/gs-cpu --set parallel.backend=cpu \
    --set parallel.threads_per_rank=8 > "$OUT/curve-cpu.log" 2>&1 || rc_cpu=$?
  timeout 240 ringmaster run "${job[@]}" --set run_dir=/tmp/gs-cuda --set parallel.backend=cuda \
    --set parallel.precision=bf16 > "$OUT/curve-cuda.log" 2>&1 || rc_cuda=$?
  d=$(curve_diff /tmp/gs-cpu/metrics.jsonl /tmp/gs-cuda/metrics.jsonl)
  if [[ $rc_cpu != 0 || $rc_cuda != 0 ]]; then
    verdict "loss curve cuda bf16 vs cpu fp32" FAIL \
      "a run failed: cpu exit $rc_cpu, cuda exit $rc_cuda ($OUT/curve-*.log)"
  elif python3 -c "import sys; sys.exit(0 if float('$d') <= 0.10 else 1)"; then
    verdict "loss curve cuda bf16 vs cpu fp32" PASS "max |diff| $d over 300 steps"
  else
    verdict "loss curve cuda bf16 vs cpu fp32" FAIL "max |diff| $d ($OUT/curve-*.log)"
  fi
  if ! grep -q "attention through cuDNN" "$OUT/curve-cuda.log" ||
     ! grep -q 'recorded as one graph and run' "$OUT/curve-cuda.log"; then
    verdict "defaults: cuDNN attention, graphs" FAIL "not both used ($OUT/curve-cuda.log)"
  else
    verdict "defaults: cuDNN attention, graphs" PASS "both used"
  fi
  # 2b. The same job with each switch: the same losses to the bit where only the launches
  # change (graphs off, the cross-entropy's rows in shared memory), the cpu tolerance where
  # other attention kernels run.
  for sw in "${SWITCHES[@]}"; do
    tag=${sw//[=+]/}
    log="$OUT/curve-$tag.log"
    rc=0
    # shellcheck disable=SC2046  # the switch's variables, a word each
    timeout 240 env $(vars_of "$sw") ringmaster run "${job[@]}" --set run_dir="/tmp/gs-$tag" \
      --set parallel.backend=cuda --set parallel.precision=bf16 > "$log" 2>&1 || rc=$?
    losses=$(grep -so '"loss":[^,]*' "/tmp/gs-$tag/metrics.jsonl")
    default_losses=$(grep -so '"loss":[^,]*' /tmp/gs-cuda/metrics.jsonl)
    # A recording that failed leaves the run call by call, with the default's bits: the run must
    # say its graph was recorded and ran, and no recording failed.
    if [[ $rc != 0 ]]; then
      verdict "loss curve $sw" FAIL "exit $rc: $(tail -1 "$log" | cut -c1-160) ($log)"
    elif [[ $sw == RM_CUDA_GRAPH=0 ]] && grep -q 'recorded as one graph' "$log"; then
      verdict "loss curve $sw" FAIL "a graph was recorded ($log)"
    elif [[ $sw == RM_CUDNN_ATTENTION=* ]]; then  # other kernels: the tolerance, not the bits
      d=$(curve_diff /tmp/gs-cpu/metrics.jsonl "/tmp/gs-$tag/metrics.jsonl")
      if [[ $sw == RM_CUDNN_ATTENTION=0* ]] && grep -q "attention through cuDNN" "$log"; then
        verdict "loss curve $sw" FAIL "cuDNN used all the same ($log)"
      elif [[ $sw == RM_CUDNN_ATTENTION=0* ]] &&
           python3 -c "import sys; sys.exit(0 if float('$d') <= 0.10 else 1)"; then
        verdict "loss curve $sw" PASS "max |diff| to cpu $d over 300 steps"
      elif [[ $sw == RM_CUDNN_ATTENTION=0* ]]; then
        verdict "loss curve $sw" FAIL "max |diff| to cpu $d ($log)"
      elif ! grep -q "attention through cuDNN" "$log" || grep -q "refused" "$log"; then
        why=$(grep -m1 'cuDNN\|RM_CUDNN' "$log" | cut -c1-200)
        verdict "loss curve $sw" FAIL "cuDNN not used: ${why:-no word of it} ($log)"
      elif python3 -c "import sys; sys.exit(0 if float('$d') <= 0.10 else 1)"; then
        verdict "loss curve $sw" PASS "max |diff| to cpu $d over 300 steps"
      else
        verdict "loss curve $sw" FAIL "max |diff| to cpu $d ($log)"
      fi
    elif [[ -z $default_losses ]]; then  # two failed runs log the same nothing
      verdict "loss curve $sw" FAIL "no default run's losses to compare with"
    elif [[ $losses == "$default_losses" ]]; then
      verdict "loss curve $sw" PASS "the default run's $(wc -l <<< "$losses") losses, bit for bit"
    else
      verdict "loss curve $sw" FAIL "losses differ ($log)"
    fi
  done
fi

# 2d. data.choices on the cuda backend: the default job evaluating every 100 steps, each
# evaluation scoring shakespeare_choices.py's 200 examples (their right completions from the
# text, the wrong ones shuffles of its bytes).
if want choices; then
  rm -rf /tmp/gs-choices /tmp/gs-choices.bin
  log="$OUT/choices-cuda.log"
  rc=0
  python3 scripts/shakespeare_choices.py data/tinyshakespeare.txt /tmp/gs-choices.bin 200 \
    > "$log" 2>&1 || rc=$?
  [[ $rc == 0 ]] && { timeout 240 ringmaster run "${job[@]}" --set run_dir=/tmp/gs-choices \
    --set parallel.backend=cuda --set parallel.precision=bf16 --set train.eval_every=100 \
    --set data.choices=/tmp/gs-choices.bin >> "$log" 2>&1 || rc=$?; }
  [[ $rc != 0 ]] && verdict "data.choices on cuda bf16" FAIL "exit $rc: $(tail -1 "$log" | cut -c1-160) ($log)"
  gpu=$(python3 - /tmp/gs-choices/metrics.jsonl <<'PY' 2>/dev/null
import json, sys
print(next(j["choice_accuracy"] for j in map(json.loads, open(sys.argv[1]))
           if j.get("step") == 300 and "choice_accuracy" in j))
PY
)
  # The same final weights scored by `eval`: on the CPU (fp32), and on the GPU (the job's
  # backend and precision, eval's default for this run; never run on a GPU before).
  cpu=$(timeout 120 ringmaster eval /tmp/gs-choices --choices /tmp/gs-choices.bin --backend cpu \
        2>> "$log" | sed -n 's/^accuracy=\([0-9.]*\) .*/\1/p')
  ev=$(timeout 120 ringmaster eval /tmp/gs-choices --choices /tmp/gs-choices.bin 2>> "$log" |
       sed -n 's/^accuracy=\([0-9.]*\) .*/\1/p')
  tokens=(--data data/tinyshakespeare.txt --max-tokens 100000)
  loss_cpu=$(timeout 120 ringmaster eval /tmp/gs-choices "${tokens[@]}" --backend cpu 2>> "$log" |
             sed -n 's/^loss=\([0-9.]*\) .*/\1/p')
  loss_gpu=$(timeout 120 ringmaster eval /tmp/gs-choices "${tokens[@]}" 2>> "$log" |
             sed -n 's/^loss=\([0-9.]*\) .*/\1/p')
  if ! grep -q '^ringmaster: using .*, on cuda.*, bf16$' "$log"; then
    verdict "eval on cuda bf16" FAIL "eval did not run on the GPU in bf16 ($log)"
  elif python3 -c "import sys; g, e, a, b = float('$gpu'), float('$ev'), float('$loss_cpu'), float('$loss_gpu'); sys.exit(0 if abs(g - e) <= 0.0101 and abs(a - b) <= 0.02 else 1)" 2>/dev/null; then
    verdict "eval on cuda bf16" PASS "--choices $ev (in training $gpu); --data loss $loss_gpu (cpu $loss_cpu)"
  else
    verdict "eval on cuda bf16" FAIL "--choices ${ev:-none} (in training ${gpu:-none}); --data loss ${loss_gpu:-none} (cpu ${loss_cpu:-none}) ($log)"
  fi
  # Learnt (a 300-step model scores about 0.97 where chance is 0.25, and so does scoring the
  # wrong positions) and the CPU's picks but for 3 examples in 200 (bf16 on near ties).
  if python3 -c "import sys; g, c = float('$gpu'), float('$cpu'); sys.exit(0 if g >= 0.9 and abs(g - c) <= 0.0151 else 1)" 2>/dev/null; then
    verdict "data.choices on cuda bf16" PASS "accuracy $gpu at step 300; eval --choices (cpu) $cpu"
  else
    verdict "data.choices on cuda bf16" FAIL "accuracy ${gpu:-none} at step 300, eval --choices (cpu) ${cpu:-none} ($log)"
  fi
  # sample on the GPU (its default for this run; never run on a GPU before): 60 greedy bytes.
  rc=0
  text=$(timeout 120 ringmaster sample /tmp/gs-choices --tokens 60 --temperature 0 \
         --prompt ROMEO 2> "$OUT/sample-cuda.log") || rc=$?
  if [[ $rc == 0 && ${#text} -ge 60 ]] &&
     grep -q '^ringmaster: using .*, on cuda.*, bf16$' "$OUT/sample-cuda.log"; then
    verdict "sample on cuda bf16" PASS "$(head -c 60 <<< "$text" | tr '\n' ' ')"
  else
    verdict "sample on cuda bf16" FAIL "exit $rc, ${#text} bytes ($OUT/sample-cuda.log)"
  fi
  # Evaluations leave training as it was: the default curve run's losses, bit for bit (as on
  # the CPU), when section 2 ran in this call.
  if [[ -s /tmp/gs-cuda/metrics.jsonl ]]; then
    if [[ $(grep -so '"loss":[^,]*' /tmp/gs-choices/metrics.jsonl) == "$(grep -so '"loss":[^,]*' /tmp/gs-cuda/metrics.jsonl)" ]]; then
      verdict "evaluations leave training (cuda)" PASS "the default run's 300 losses, bit for bit"
    else
      verdict "evaluations leave training (cuda)" FAIL "losses differ from /tmp/gs-cuda's ($log)"
    fi
  fi
fi

# 2c. Kill and resume, bit for bit.
if want resume; then
  rm -rf /tmp/gs-straight /tmp/gs-killed
  rjob=(configs/shakespeare.yaml --set train.steps=60 --set train.eval_every=0
        --set checkpoint.every=20 --set parallel.backend=cuda --set parallel.precision=bf16)
  rc_straight=0 rc_killed=0 rc_resumed=0
  timeout 240 ringmaster run "${rjob[@]}" --fresh --set run_dir=/tmp/gs-straight \
    > "$OUT/resume-straight.log" 2>&1 || rc_straight=$?
  RM_TEST_FAULT=kill:0:45 timeout 240 ringmaster run "${rjob[@]}" --fresh \
    --set run_dir=/tmp/gs-killed > "$OUT/resume-killed.log" 2>&1 || rc_killed=$?
  timeout 240 ringmaster run "${rjob[@]}" --set run_dir=/tmp/gs-killed \
    > "$OUT/resume-resumed.log" 2>&1 || rc_resumed=$?
  # The killed run must have died at step 45 (else the resume would find its end at 60 and
  # train nothing), and the resume go on from the checkpoint of step 40.
  if [[ $rc_straight != 0 || $rc_killed == 0 || $rc_resumed != 0 ]]; then
    verdict "kill at 45, resume (cuda bf16)" FAIL "exits: straight $rc_straight, killed \
$rc_killed (must not be 0), resumed $rc_resumed ($OUT/resume-*.log)"
  elif ! grep -q 'resuming from .*(step 40)' "$OUT/resume-resumed.log"; then
    verdict "kill at 45, resume (cuda bf16)" FAIL "no resume from step 40 ($OUT/resume-resumed.log)"
  elif cmp -s /tmp/gs-straight/weights.bin /tmp/gs-killed/weights.bin; then
    verdict "kill at 45, resume (cuda bf16)" PASS "weights.bin identical to the straight run's"
  else
    verdict "kill at 45, resume (cuda bf16)" FAIL "weights differ ($OUT/resume-*.log)"
  fi
fi

# 3. bench train at GPT-2 124M's shape.
if want bench; then
  for B in 16 4; do
    if timeout 240 ringmaster bench train configs/shakespeare.yaml "${gpt2[@]}" \
        --set train.global_batch=$B --set train.micro_batch=$B --steps 10 --warmup 3 --profile 1 \
        > "$OUT/bench-train-b$B.log" 2>&1; then
      verdict "bench train 124M B=$B" PASS "$(grep '^train step' "$OUT/bench-train-b$B.log" | cut -c1-150)"
    else
      verdict "bench train 124M B=$B" FAIL "$(tail -3 "$OUT/bench-train-b$B.log" | tr '\n' ' ')"
    fi
    cp "$OUT/bench-train-b$B.log" "$RESULT/"
    if [[ -n ${BASE_ENV:-} ]] || command -v ringmaster-base >/dev/null; then
      for i in 1 2; do
        for side in base change; do
          cmd=(ringmaster)
          if [[ $side == base && -n ${BASE_ENV:-} ]]; then
            read -ra cmd <<<"$BASE_ENV"; cmd+=(ringmaster)
          elif [[ $side == base ]]; then
            cmd=(ringmaster-base)
          fi
          log="$OUT/ab-b$B-$side-$i.log"
          rc=0
          timeout 240 env "${cmd[@]}" bench train configs/shakespeare.yaml "${gpt2[@]}" \
            --set train.global_batch=$B --set train.micro_batch=$B --steps 20 --warmup 3 > "$log" 2>&1 ||
            rc=$?
          if [[ $rc == 0 ]]; then
            verdict "A/B B=$B $side ($i)" PASS "$(grep '^train step' "$log" | cut -c1-90)"
          else
            verdict "A/B B=$B $side ($i)" FAIL "exit $rc: $(tail -1 "$log" | cut -c1-120)"
          fi
        done
      done
    fi
  done
fi

# 3b. Each switch of 2b, then all of them together, off and on, alternated twice, at 16 and 4
# sequences; at 16 one profiled step with it on (kernel groups beside step 3's; with step graphs
# the profiled step is one "graph replay" entry plus the update's calls: the graph was recorded
# before the timing began).
if want switches; then
  for sw in "${SWITCHES[@]}"; do
    read -ra on <<< "$(vars_of "$sw")"
    var=${sw//[=+]/}
    timeout 240 env "${on[@]}" ringmaster bench train configs/shakespeare.yaml "${gpt2[@]}" \
      --set train.global_batch=16 --set train.micro_batch=16 --steps 10 --warmup 3 --profile 1 \
      > "$OUT/profile-$var-b16.log" 2>&1
    for B in 16 4; do
      for i in 1 2; do
        for side in default "$sw"; do
          log="$OUT/ab-$var-b$B-$side-$i.log"
          envs=()
          [[ $side != default ]] && envs=("${on[@]}")
          rc=0
          timeout 240 env "${envs[@]}" ringmaster bench train configs/shakespeare.yaml \
            "${gpt2[@]}" --set train.global_batch=$B --set train.micro_batch=$B --steps 20 \
            --warmup 3 > "$log" 2>&1 || rc=$?
          ok=$([[ $rc == 0 ]] && echo PASS || echo FAIL)
          detail=$(grep '^train step' "$log" | cut -c1-90)
          [[ $rc != 0 ]] && detail="exit $rc: $(tail -1 "$log" | cut -c1-120)"
          # With graphs on (unless the side turned them off), every timed step must have been a
          # replay (bench train says how many).
          replayed=$(grep -o '[0-9]* of the [0-9]* timed steps replayed' "$log" || true)
          [[ -n $replayed ]] && detail+="; graphs: $replayed"
          if [[ " ${envs[*]} " != *" RM_CUDA_GRAPH=0 "* && $replayed != "20 of the 20 "* ]]; then
            ok=FAIL
          fi
          verdict "A/B B=$B $side ($i)" "$ok" "$detail"
        done
      done
    done
  done
fi

if [[ -n ${BASE_ENV:-} ]] && ! command -v ringmaster-base >/dev/null; then
  mkdir -p /tmp/gpu-speed-base
  printf '#!/bin/sh\nexec env %s ringmaster "$@"\n' "$BASE_ENV" > /tmp/gpu-speed-base/ringmaster-base
  chmod +x /tmp/gpu-speed-base/ringmaster-base
  export PATH=/tmp/gpu-speed-base:$PATH
fi

# 4. The peers, same sitting.
if [[ $STEPS != 0 ]] && want peers; then
  OUT=$OUT timeout 300 bash "$(command -v peers.sh)" "$STEPS" > "$OUT/peers.log" 2>&1
  tail -5 "$OUT/peers.log"
fi
echo; cat "$OUT/verdicts.txt"
tar -czf "$RESULT/logs.tgz" -C "$OUT" . 2>/dev/null
exit $FAILED

