#!/usr/bin/env bash
# The factors that could separate hpml bench --impl mpi from osu_allreduce, measured one at
# a time with bench/omb_factors.c (OMB's loop on MPI_COMM_WORLD or a duplicate, on
# page-aligned buffers or buffers 64 bytes past a page, on MPI_CHAR or MPI_SIGNED_CHAR, at
# MPI_THREAD_SINGLE or _MULTIPLE). A round runs the program once at each thread level
# (single first in odd rounds); each comparison is the median of the rounds' ratios with
# its 95% interval (bench/omb_compare_stats.py), against the tolerance:
#   dup / world       the communicator              (same process; otherwise OMB's set-up)
#   off64 / world     the buffers' page offset      (same process)
#   schar / world     MPI_SIGNED_CHAR for MPI_CHAR  (same process)
#   before / world    all three, hpml bench's set-up before it matched OMB's
#   zeros / world     a send buffer of zeros (hpml bench's until 4b93140) for bytes of 1
#   tmp48 / tmp0      the MPI's temporary buffer 48 bytes into a cache line, not on one
#                     (Open MPI's recursive doubling mallocs one per call; see the .c)
#   hloop / world     hpml bench's loop for its own implementations (a call through a
#                     pointer, times kept); --impl mpi's has been OMB's since 2221ace
#   multiple / single the thread level              (separate processes, OMB's set-up)
#
#   bench/omb_factors.sh [--mpi openmpi|mpich] [--rounds N] [--np N] [-m MIN:MAX]
#                        [--tolerance PCT] [--markdown]
# (defaults: openmpi, 10 rounds, 2 ranks, 4:1048576 bytes, 5%). Ranks are bound to cores
# (BIND=none to unbind). Run on an idle machine, best under `chrt -f 1`.
set -eu
mpi=openmpi rounds=10 np=2 sizes=4:1048576 tol=5 md=0
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/omb_common.sh
. "$repo/bench/omb_common.sh"
omb_parse omb_factors '2,22p' "$@"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"mpicc.$mpi" -O2 -std=c11 -D_GNU_SOURCE -o "$tmp/omb_factors" "$repo/bench/omb_factors.c"
one() { # one THREAD_LEVEL ROUND: the program's rows, one file per set-up (named by the
    # header line "# size NAME..."); at single, world's also as "single", else "multiple"
    "${run[@]}" "$tmp/omb_factors" -m "$sizes" -t "$1" >"$tmp/out" 2>"$tmp/err" ||
        { echo "omb_factors: the run failed: $(head -3 "$tmp/err")" >&2; exit 1; }
    awk -v d="$tmp" -v r="$2" -v t="$1" '
        /^# size / { for (i = 3; i <= NF; i++) name[i - 1] = $i; n = NF - 1; next }
        /^#/ { next }
        NF == n {
            if (t == "single") for (i = 2; i <= n; i++) print $1, $i > (d "/" name[i] "." r)
            print $1, $2 > (d "/" t "." r)
        }' "$tmp/out"
}
echo "# $mpi, $np ranks, bind-to $bind, $rounds rounds, -m $sizes; $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then one single "$r"; one multiple "$r"; else one multiple "$r"; one single "$r"; fi
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
mdopt=()
[ "$md" = 1 ] && mdopt=(--markdown)
status=0
for pair in world,dup world,off64 world,schar world,before world,zeros tmp0,tmp48 world,hloop single,multiple; do
    echo "## ${pair#*,} against ${pair%,*}"
    /usr/bin/python3 "$repo/bench/omb_compare_stats.py" "$tmp" "$rounds" "$tol" --names "$pair" \
        "${mdopt[@]}" || status=1
done
exit $status
