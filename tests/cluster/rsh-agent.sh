#!/usr/bin/env bash
# Open MPI's rsh agent for the test hosts (cluster.sh): `rsh-agent.sh HOST CMD...` runs CMD on
# HOST the way ssh would: in HOST's namespaces, through a shell, with a fresh environment
# (only PATH and HOME), so that a launcher that forgets to forward a variable fails here as it
# would on a real cluster. Open MPI passes the command as words for a remote shell to join.
set -euo pipefail
name=${RM_CLUSTER_NAME:-rmc}
host=$1
shift
[[ $host == "$name-"* ]] || { echo "rsh-agent: '$host' is not a host of cluster '$name'" >&2; exit 255; }
pidfile=/run/ringmaster-cluster/$name/${host#"$name-"}.pid
[[ -f $pidfile ]] || { echo "rsh-agent: host '$host' is not up ($pidfile missing)" >&2; exit 255; }
exec nsenter --target "$(cat "$pidfile")" --net --uts --mount --ipc -- \
  env -i PATH="$PATH" HOME="${HOME:-/root}" sh -c "$*"
