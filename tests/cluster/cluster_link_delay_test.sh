#!/usr/bin/env bash
# Shaped links really delay: `cluster.sh shape unlimited 20ms` (netem, or on a kernel without it
# the userspace delay line link_delay.c) makes a small all-reduce between two test hosts take at
# least two one-way delays (its exchange, then its all-gather; checked with some slack, against
# 1.5), where unshaped it takes far less;
# `unshape` brings the plain link back. Skips (77) saying why when namespaces cannot be created.
#   cluster_link_delay_test.sh RINGMASTER_BIN
set -euo pipefail
bin=$1
source "$(dirname "$0")/test_lib.sh"
cluster_test_begin rmdelay 10.233.14
"$here/cluster.sh" up 2 1
hostfile=/run/ringmaster-cluster/$RM_CLUSTER_NAME/hostfile
fail() { echo "FAIL: $*"; exit 1; }

small_allreduce_us() {  # the median time of a 4 KiB all-reduce across the two hosts
  local out
  out=$(timeout 120 "$here/cluster.sh" on h0 "$bin" bench allreduce --hosts "$hostfile" \
          --max-mb 1 --seconds 0.2 2>&1) || { echo "$out" >&2; fail "bench allreduce failed"; }
  echo "$out" >&2
  awk '$1 == 4096 && $3 == "float" { print int($5) }' <<<"$out"
}

plain=$(small_allreduce_us)
"$here/cluster.sh" shape unlimited 20ms
delayed=$(small_allreduce_us)
"$here/cluster.sh" unshape
again=$(small_allreduce_us)
echo "4 KiB all-reduce: unshaped ${plain} us, 20 ms links ${delayed} us, unshaped again ${again} us"
[[ -n $plain && -n $delayed && -n $again ]] || fail "no 4096-byte row in the bench output"
((delayed >= 30000)) || fail "with 20 ms links the all-reduce took ${delayed} us (< 1.5 x 20 ms)"
((plain < 20000)) || fail "unshaped it took ${plain} us: the delay test cannot tell"
((again < 20000)) || fail "after unshape it still took ${again} us"
echo PASS
