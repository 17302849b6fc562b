#!/usr/bin/env bash
# Test hosts on one machine: K network namespaces that Open MPI and Ringmaster see as K hosts.
#
#   cluster.sh up K [SLOTS]    create hosts <name>-h0 .. h<K-1>, SLOTS ranks each (default 2)
#   cluster.sh down            tear everything down (also what a failed run left behind)
#   cluster.sh on HOST CMD...  run CMD on HOST (as the rsh agent does, with the cluster's env)
#   cluster.sh env             print the environment for mpirun (source it: eval "$(... env)")
#   cluster.sh cut HOST | heal HOST     take HOST's link down / up again
#   cluster.sh kill HOST       kill every process running on HOST
#   cluster.sh shape RATE [DELAY]       shape every host's outgoing link (e.g. 1gbit 0.2ms; RATE
#                                       unlimited: delay only); again to change, unshape to undo
#   cluster.sh unshape
#   cluster.sh check           exit 0 if this machine can create the hosts, else say why (77)
#
# Each host is a real network host as far as MPI can tell: its own network namespace (a veth
# link to a bridge in a separate "switch" namespace, so the root namespace has no route to the
# cluster's addresses), its own hostname (UTS namespace), its own /dev/shm and /etc/hosts (mount
# namespace) and its own System V IPC: neither Open MPI nor Ringmaster can find a shared-memory
# path between two hosts. A holder process (sleep) keeps each host's namespaces alive; commands
# enter them with nsenter. Only addresses inside the cluster's subnet and loopback are used.
# Links are shaped with netem; a kernel without netem gets the rate from a token bucket (tbf) and
# the delay from link_delay.c, a userspace switch that holds every frame for DELAY (see shape).
#
# RM_CLUSTER_NAME (default rmc) names the hosts and the state directory
# (/run/ringmaster-cluster/<name>); RM_CLUSTER_NET (default 10.233.7) is the /24 they live on.
# Two clusters may coexist if both differ. Needs root, iproute2 and util-linux.
set -euo pipefail

name=${RM_CLUSTER_NAME:-rmc}
net=${RM_CLUSTER_NET:-10.233.7}
state=/run/ringmaster-cluster/$name
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
switch=$name-sw

die() { echo "cluster.sh: $*" >&2; exit 1; }
host_ns() { echo "$name-$1"; }  # net namespace of host HOST (HOST is h0, h1, ...)
holder_pid() {
  local f=$state/$1.pid
  [[ -f $f ]] || die "no host '$1' in cluster '$name' (hosts: $(hosts_list))"
  cat "$f"
}
hosts_list() { [[ -f $state/hosts ]] && tr '\n' ' ' <"$state/hosts" || echo none; }
host_short() {  # accepts "h1" or the full hostname "rmc-h1"
  local h=$1
  [[ $h == "$name-"* ]] && h=${h#"$name-"}
  echo "$h"
}

check() {
  [[ $(id -u) == 0 ]] || { echo "cluster.sh: test hosts need root (network namespaces)"; return 77; }
  for tool in ip nsenter unshare mpirun; do
    command -v $tool >/dev/null || { echo "cluster.sh: $tool is not installed"; return 77; }
  done
  local probe=$name-probe$$ err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "cluster.sh: cannot create network namespaces here: $err"; return 77
  fi
  if ! err=$(ip netns exec "$probe" unshare --uts --mount --ipc true 2>&1); then
    ip netns del "$probe"
    echo "cluster.sh: cannot create UTS/mount namespaces here: $err"; return 77
  fi
  if ! err=$(ip link add "${probe:0:10}a" type veth peer name "${probe:0:10}b" 2>&1); then
    ip netns del "$probe"
    echo "cluster.sh: cannot create veth links here: $err"; return 77
  fi
  ip link del "${probe:0:10}a"
  ip netns del "$probe"
}

up() {
  local k=${1:?usage: cluster.sh up K [SLOTS]} slots=${2:-2}
  [[ $k =~ ^[1-9][0-9]?$ ]] || die "K must be 1..99, not '$k'"
  [[ $slots =~ ^[1-9][0-9]*$ ]] || die "SLOTS must be a positive number, not '$slots'"
  [[ -d $state ]] && down
  mkdir -p "$state"
  ip netns add "$switch"
  ip -n "$switch" link set lo up
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  : >"$state/hosts"
  : >"$state/hostfile"
  printf '127.0.0.1 localhost\n' >"$state/etc-hosts"
  for ((i = 0; i < k; i++)); do
    printf '%s.%d %s\n' "$net" $((10 + i)) "$name-h$i" >>"$state/etc-hosts"
  done
  for ((i = 0; i < k; i++)); do
    local h=h$i ns
    ns=$(host_ns $h)
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # The pair is created in the host and its far end moved to the switch.
    ip -n "$ns" link add eth0 type veth peer name "p$h"
    ip -n "$ns" link set "p$h" netns "$switch"
    ip -n "$switch" link set "p$h" master br0 up
    ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    # The holder: own hostname, /dev/shm, /etc/hosts and IPC, kept alive by sleep.
    ip netns exec "$ns" unshare --uts --mount --ipc --propagation private \
      sh -c 'hostname "$1"; mount -t tmpfs -o size=4g,mode=1777 tmpfs /dev/shm
             mount --bind "$2" /etc/hosts; echo $$ >"$3"; exec sleep infinity' \
      holder "$name-$h" "$state/etc-hosts" "$state/$h.pid" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 600); do [[ -s $state/$h.pid ]] && break; sleep 0.05; done
    [[ -s $state/$h.pid ]] || die "host $h did not start"
    echo "$h" >>"$state/hosts"
    echo "$name-$h slots=$slots" >>"$state/hostfile"
  done
  wait_links_up
  echo "cluster '$name': $k hosts ($(hosts_list)), hostfile $state/hostfile"
}

# veth links come up asynchronously: wait until every host's link reports up (30 s at most, a
# loaded machine's worst; then the cluster did not start, said so, rather than a test failing
# later on a link that is down).
wait_links_up() {
  local deadline=$((SECONDS + 30))
  while read -r h; do wait_link_up "$h" eth0 "$deadline"; done <"$state/hosts"
}

# wait_link_up HOST DEV DEADLINE: until HOST's DEV has its carrier (LOWER_UP: a veth whose peer
# is up, or link_delay's TAP while it is held open, which reports no "state UP"), else dies at
# DEADLINE (in $SECONDS).
wait_link_up() {
  until ip -n "$(host_ns "$1")" link show "$2" | grep -q 'LOWER_UP'; do
    ((SECONDS < $3)) || die "host $1: $2 not up after 30 s"
    sleep 0.05
  done
}

down() {
  stop_link_delay || true
  if [[ -f $state/hosts ]]; then
    while read -r h; do
      kill_host "$h" 2>/dev/null || true
      [[ -f $state/$h.pid ]] && kill "$(cat "$state/$h.pid")" 2>/dev/null || true
      ip netns del "$(host_ns "$h")" 2>/dev/null || true
    done <"$state/hosts"
  fi
  # Anything named like ours that a crashed run left behind.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$name-" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$state"
}

env_lines() {
  # TCP between hosts, and only on the cluster's subnet; ob1 so that no other transport
  # (UCX) is tried. The rsh agent enters a host instead of ssh-ing to it.
  # The hosts share this machine's cores, which Open MPI cannot know (each host's slots fit its
  # ranks): a rank waiting inside MPI would spin for its whole time slice while the rank it
  # waits for has no core. Yielding when idle, as Open MPI does by itself when it sees a host
  # oversubscribed, took a barrier of 4 ranks on 2 hosts from 7.9 ms to 0.05 ms and an
  # MPI_Comm_dup from 24-40 ms to 0.3-2 ms (2 cores). OpenMP's idle threads sleep, for the same
  # reason (the Makefile's `test` says what it measured).
  cat <<ENV
export OMPI_MCA_plm_rsh_agent=$here/rsh-agent.sh
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_tcp_if_include=$net.0/24
export OMPI_MCA_oob_tcp_if_include=$net.0/24
export OMPI_MCA_mpi_yield_when_idle=1
export OMP_WAIT_POLICY=passive
export RM_CLUSTER_NAME=$name
export RM_CLUSTER_NET=$net
export RM_CLUSTER_HOSTFILE=$state/hostfile
ENV
}

on() {
  local h
  h=$(host_short "${1:?usage: cluster.sh on HOST CMD...}")
  shift
  local pid
  pid=$(holder_pid "$h")
  eval "$(env_lines)"
  exec nsenter --target "$pid" --net --uts --mount --ipc --wd="$PWD" -- "$@"
}

kill_host() {
  local h ns
  h=$(host_short "$1")
  ns=$(host_ns "$h")
  local holder
  holder=$(cat "$state/$h.pid" 2>/dev/null || echo none)
  for pid in $(ip netns pids "$ns" 2>/dev/null); do
    [[ $pid == "$holder" ]] || kill -9 "$pid" 2>/dev/null || true
  done
}

shape() {
  local rate=${1:?usage: cluster.sh shape RATE [DELAY]} delay=${2:-}
  local rate_args=(rate "$rate")
  [[ $rate == unlimited ]] && rate_args=()
  unshape
  if tc -n "$switch" qdisc add dev lo root netem 2>/dev/null; then
    tc -n "$switch" qdisc del dev lo root
    while read -r h; do
      local ns
      ns=$(host_ns "$h")
      ip -n "$ns" link set eth0 txqueuelen 1000
      tc -n "$ns" qdisc add dev eth0 root netem "${rate_args[@]}" ${delay:+delay $delay}
    done <"$state/hosts"
    return
  fi
  # This kernel has no netem (CONFIG_NET_SCH_NETEM): the delay line adds the delay and a token
  # bucket on each host's link shapes the rate.
  local dev=eth0 us
  if [[ -n $delay ]]; then
    us=$(delay_us "$delay")
    start_link_delay "$us"
    dev=eth1
  fi
  [[ $rate == unlimited ]] && return
  while read -r h; do
    tc -n "$(host_ns "$h")" qdisc add dev $dev root tbf rate "$rate" burst 256kb latency 50ms
  done <"$state/hosts"
}

delay_us() {  # a tc-style time (0.2ms, 200us, 1s) in whole microseconds
  [[ $1 =~ ^([0-9]+(\.[0-9]*)?)(s|ms|us)$ ]] || die "DELAY must look like 0.2ms, 200us or 1s, not '$1'"
  awk -v t="${BASH_REMATCH[1]}" -v unit="${BASH_REMATCH[3]}" \
    'BEGIN { printf "%d\n", t * (unit == "s" ? 1e6 : unit == "ms" ? 1e3 : 1) + 0.5 }'
}

# The delay line: link_delay (link_delay.c, compiled here on first use) is a learning switch in the
# switch namespace that holds every frame for DELAY. It opens a TAP per host there; each TAP is
# then moved into its host (it keeps working for link_delay) as eth1, with the TAP's largest MTU
# (the fewer frames, the less work for a userspace switch), and takes over the host's address from
# eth0, which goes down: every frame between hosts passes through link_delay. The TAPs vanish
# when it exits (stop_link_delay).
start_link_delay() {
  local us=$1 bin=$state/link_delay taps=()
  if [[ ! -x $bin || $here/link_delay.c -nt $bin ]]; then
    cc -O2 -Wall -Wextra -Werror -o "$bin" "$here/link_delay.c" || die "cannot compile $here/link_delay.c"
  fi
  while read -r h; do taps+=("t$h"); done <"$state/hosts"
  # Its own session, so that a Ctrl-C meant for the caller does not take the links down. It writes
  # its pid file once every TAP is open.
  ip netns exec "$switch" setsid "$bin" --delay-us "$us" --ready "$state/link_delay.pid" "${taps[@]}" \
    </dev/null >/dev/null 2>>"$state/link_delay.log" &
  for _ in $(seq 100); do [[ -s $state/link_delay.pid ]] && break; sleep 0.05; done
  [[ -s $state/link_delay.pid ]] || die "link_delay did not start: $(tail -3 "$state/link_delay.log")"
  while read -r h; do
    local ns addr=$net.$((10 + ${h#h}))/24
    ns=$(host_ns "$h")
    ip -n "$switch" link set "t$h" netns "$ns"
    ip -n "$ns" link set "t$h" name eth1 mtu 65521 up
    ip -n "$ns" link set eth0 down
    ip -n "$ns" addr del "$addr" dev eth0
    ip -n "$ns" addr add "$addr" dev eth1
  done <"$state/hosts"
}

stop_link_delay() {  # stops the delay line and waits until its TAPs are gone; 1 if none ran
  local f=$state/link_delay.pid pid
  [[ -f $f ]] || return 1
  pid=$(cat "$f")
  if link_delay_running "$pid"; then
    kill "$pid"
    for _ in $(seq 100); do link_delay_running "$pid" || break; sleep 0.02; done
    ! link_delay_running "$pid" || die "link_delay (pid $pid) did not stop"
  fi
  rm -f "$f"
}

# PID is link_delay and running: neither gone nor a zombie (whose files, so TAPs, are closed).
link_delay_running() { [[ $(cut -d' ' -f2,3 "/proc/$1/stat" 2>/dev/null) =~ ^\(link_delay\)\ [^Z] ]]; }

unshape() {
  if stop_link_delay; then
    while read -r h; do  # give each host's address back to eth0
      local ns
      ns=$(host_ns "$h")
      ip -n "$ns" addr replace "$net.$((10 + ${h#h}))/24" dev eth0
      ip -n "$ns" link set eth0 up
    done <"$state/hosts"
    wait_links_up
  fi
  while read -r h; do tc -n "$(host_ns "$h")" qdisc del dev eth0 root 2>/dev/null || true; done <"$state/hosts"
}

# A host's link: its veth's switch end, or while the delay line runs, its TAP. A TAP's switch end
# is link_delay's file descriptor, so its host end goes down: the host sees its link down (sends
# fail at once) rather than lose carrier.
# set_link HOST up|down. Up returns once the host's side reports the link up again: a carrier
# comes back asynchronously, and a run started at once could find the host unreachable (seen
# under CI's load: mpirun's daemon on the healed host did not answer within 15 s).
set_link() {
  local h dev=eth0
  h=$(host_short "${1:?host}")
  if [[ -f $state/link_delay.pid ]]; then
    dev=eth1
    ip -n "$(host_ns "$h")" link set eth1 "$2"
  else
    ip -n "$switch" link set "p$h" "$2"
  fi
  [[ $2 != up ]] || wait_link_up "$h" "$dev" $((SECONDS + 30))
}

cmd=${1:-}
shift || true
case $cmd in
  up) check >&2 || exit $?; up "$@" ;;
  down) down ;;
  on) on "$@" ;;
  env) env_lines ;;
  cut) set_link "${1:-}" down ;;
  heal) set_link "${1:-}" up ;;
  kill) kill_host "${1:?host}" ;;
  shape) shape "$@" ;;
  unshape) unshape ;;
  check) check ;;
  *) sed -n '2,13p' "$0" >&2; exit 2 ;;
esac
