#!/usr/bin/env bash
# Open MPI's launch agent for hosts that are network namespaces of this
# machine (bench/compare.sh --transport tcp): mpirun calls it as it would
# call ssh, `netns_rsh.sh HOST COMMAND...`, to start its daemon (orted) on
# HOST; here HOST names a namespace made by `ip netns add`, and the command
# runs inside it. Every rank the daemon starts is then in that namespace.
#
#   NETNS_RSH_TMPDIR=DIR mpirun --mca plm_rsh_agent bench/netns_rsh.sh \
#       --hostfile FILE ...
#
# The namespace is entered per host rather than per rank: a rank talks to
# its host's daemon over TCP on the loopback address (PMIx), so a rank moved
# into another namespace than its daemon's cannot even start.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: netns_rsh.sh NAMESPACE COMMAND..." >&2; exit 2; }
host="$1"
shift
# Some Open MPI versions pass ssh options before the host; none are used here.
while [[ "$host" == -* ]]; do host="$1"; shift; done
# The hosts share this machine's /tmp and hostname, so their daemons would
# make the same session directories (/tmp/ompi.<host>.<uid>/...) at the same
# time and trip over each other; NETNS_RSH_TMPDIR gives each host a
# temporary directory of its own below it.
tmp=()
if [[ -n "${NETNS_RSH_TMPDIR:-}" ]]; then
  mkdir -p "$NETNS_RSH_TMPDIR/$host"
  tmp=(env TMPDIR="$NETNS_RSH_TMPDIR/$host")
fi
# Like ssh, the remote side gets one command line for a shell.
exec ip netns exec "$host" "${tmp[@]}" /bin/sh -c "$*"
