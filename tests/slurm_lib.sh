# Shared by the Slurm tests (sourced): skip when no cluster answers, and wait for job states.
# CI starts a real 2-node cluster with ../shared/slurm/start-local-slurm and sets
# RM_REQUIRE=slurm, so that there a missing client or cluster fails the test instead.
source "$(dirname "${BASH_SOURCE[0]}")/required_parts.sh"

# Exits 77 (ctest's skip), or 1 where RM_REQUIRE names slurm, unless a Slurm controller answers.
# A controller busy under ctest -j2 can miss one query (seen in CI: sinfo gave up after 9 s), so
# it asks three times.
require_slurm() {
  if ! command -v srun >/dev/null; then
    skip_or_fail slurm "no Slurm client installed (start a cluster with ../shared/slurm/start-local-slurm)"
  fi
  local attempt why
  for attempt in 1 2 3; do
    if why=$(timeout 20 sinfo -h -o %D 2>&1); then return 0; fi
    if [[ $attempt == 3 ]]; then
      skip_or_fail slurm "no Slurm cluster answers: $why (start one with ../shared/slurm/start-local-slurm)"
    fi
    sleep 2
  done
}

fail() { echo "FAIL: $*"; exit 1; }

# The job's state and requeue count, from scontrol (kept 10 minutes after the end here).
job_state() { scontrol show job "$1" 2>/dev/null | grep -oP 'JobState=\K\w+' || true; }
job_restarts() { scontrol show job "$1" 2>/dev/null | grep -oP 'Restarts=\K\d+' || true; }

# wait_job_end JOB SECONDS: waits until the job has ended for good (not requeued); prints the
# final state, or TIMEOUT_<state>.
wait_job_end() {
  local s i
  for ((i = 0; i < $2 * 2; i++)); do
    s=$(job_state "$1")
    case $s in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
      echo "$s"; return 0 ;;
    esac
    sleep 0.5
  done
  echo "TIMEOUT_$s"
}

# wait_file_lines FILE N SECONDS: until FILE has at least N lines.
wait_file_lines() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    [[ -f $1 && $(wc -l <"$1") -ge $2 ]] && return 0
    sleep 0.1
  done
  return 1
}

# wait_file_match FILE TEXT SECONDS: until FILE holds TEXT (a fixed string).
wait_file_match() {
  local deadline=$((SECONDS + $3))
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# The steps of metrics.jsonl, space-separated, in file order.
logged_steps() {
  python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" "$1"
}
