#!/usr/bin/env bash
# Run an mpirun command line and stop it, with the ranks it started, after LIMIT seconds:
#   scripts/run-limited.sh LIMIT mpirun ... (or chrt -f 1 mpirun ...)
# Exit status: the command's, or 124 when it was stopped (as timeout(1)). Unlike
# timeout(1), this reaches the ranks: Open MPI puts each rank in a process group of its
# own, so a signal to mpirun's group misses them, and a rank spinning under SCHED_FIFO
# starves mpirun, which then never forwards a SIGTERM. The ranks are found as mpirun's
# children and killed (SIGKILL) with it. Run this script at a real-time priority above the
# command's (chrt -f 2 ... chrt -f 1 mpirun ...), so that it gets a core when the ranks
# spin on all of them.
set -u
if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "run-limited: usage: run-limited.sh SECONDS COMMAND [ARG...]" >&2
    exit 2
fi
limit=$1
shift
"$@" &
pid=$!
sleep "$limit" &
timer=$!
wait -n -p ended "$pid" "$timer"
st=$?
if [ "$ended" = "$pid" ]; then
    kill "$timer" 2>/dev/null
    exit "$st"
fi
# The ranks first (mpirun may otherwise be reaped before they are found).
# shellcheck disable=SC2046
kill -KILL $(pgrep -P "$pid") "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
echo "run-limited: stopped after ${limit}s: $*" >&2
exit 124
