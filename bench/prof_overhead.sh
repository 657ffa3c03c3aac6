#!/usr/bin/env bash
# The overhead of libhpml-prof.so (docs/prof.md), against the same commands without it,
# on 2 ranks bound one per core, in paired rounds: each round runs every workload plain,
# in statistics mode and in trace mode back to back, in an order that rotates through all
# six permutations from round to round (so drift and the order within a round cancel):
#   - latency: the 0-byte `hpml bench latency` median (its 50th percentile, -z50), plain
#     and in statistics mode: the paired difference in µs;
#   - train, kmeans: the wall time of `hpml train --synthetic` and of `hpml kmeans` (a
#     uniform random .npy made here with NumPy), timed around the launcher: the paired
#     ratio mode / plain - 1 in percent (the report, `hpml prof merge`, is timed apart);
#     the profiled runs set HPML_PROF_SELF=1, so that the profiler also times its own work
#     (its wrappers' bookkeeping, its start, its snapshots: docs/prof.md, "Overhead"): the
#     largest rank's, as a percentage of the same round's plain wall time, is an estimate
#     of the rise that does not depend on the machine's state (it costs one clock read
#     per call more, which the wall times then include); and the programs' own timing of
#     their loops (train's mean step, kmeans' Lloyd iterations), paired the same way as
#     the wall times: what the profiler adds inside the program, without the launcher's
#     start-up and the profiler's start and end.
# Then prof_overhead_stats.py prints, per target, the median of the rounds' paired
# differences with a distribution-free 95% confidence interval, and whether the target
# holds (the interval's upper end within it), fails, or is not resolved; and the
# profiler's own time (median and largest over the rounds; before that, its parts:
# calls timed, their bookkeeping, the start, the snapshots).
#
#   bench/prof_overhead.sh [openmpi|mpich] [--rounds N] [--budget SECONDS]
#                          [--only latency|wall] [--quick] [--no-self]
#
# --rounds N: at most N rounds (default 30); --budget S: start no round that would end
# after S seconds (the last round's length is the estimate); --only: the latency or the
# wall-time workloads alone; --quick: small sizes, to check the script (not a
# measurement); --no-self: profiled runs without HPML_PROF_SELF=1. Measure on a quiet
# machine under `chrt -f 1` (docs/performance.md, "How to measure"); the header says the
# scheduling policy the script ran with.
set -eu
mpi=openmpi
rounds=30
budget=0
only=all
quick=0
self=" HPML_PROF_SELF=1"
while [ $# -gt 0 ]; do
    case "$1" in
    openmpi | mpich) mpi=$1; shift ;;
    --rounds | --budget | --only)
        [ $# -ge 2 ] || { echo "prof_overhead.sh: $1 needs a value" >&2; exit 2; }
        case "$1" in --rounds) rounds=$2 ;; --budget) budget=$2 ;; --only) only=$2 ;; esac
        shift 2 ;;
    --quick) quick=1; shift ;;
    --no-self) self=; shift ;;
    -h | --help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "prof_overhead.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
case "$rounds$budget" in *[!0-9]*) echo "prof_overhead.sh: --rounds and --budget take whole numbers" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] || { echo "prof_overhead.sh: --rounds must be >= 1" >&2; exit 2; }
case $only in all | latency | wall) ;; *) echo "prof_overhead.sh: --only takes latency or wall (got '$only')" >&2; exit 2 ;; esac
repo=$(cd "$(dirname "$0")/.." && pwd)
b=$repo/build/$mpi
hpml=$b/bin/hpml
lib=$b/lib/libhpml-prof.so
[ -x "$hpml" ] && [ -f "$lib" ] || { echo "prof_overhead.sh: build first: make MPI=$mpi" >&2; exit 2; }
case $mpi in
openmpi) run=(mpirun.openmpi --allow-run-as-root --bind-to core -np 2) pre=(-x "LD_PRELOAD=$lib") ;;
mpich) run=(mpirun.mpich -bind-to core -np 2) pre=(-genv LD_PRELOAD "$lib") ;;
esac
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ $quick -eq 1 ]; then
    lat_iters=2000 rows=20000 train=(--iters 5 --warmup-iters 2) kiter=5
else
    lat_iters=200000 rows=400000 train=(--iters 400 --warmup-iters 10) kiter=300
fi
if [ $only != latency ]; then
    /usr/bin/python3 -c "
import numpy as np
np.save('$tmp/x.npy', np.random.default_rng(1).random(($rows, 32), dtype=np.float32))"
fi

# mode_env MODE: the environment of one mode (plain, stats, trace); the library goes to the
# ranks by the launcher's option ($pre), as `hpml prof` gives it.
mode_env() {
    case $1 in
    plain) echo ;;
    stats) echo "HPML_PROF_DIR=$tmp/p HPML_PROF_PERIOD=5$self" ;;
    trace) echo "HPML_PROF_DIR=$tmp/p HPML_PROF_PERIOD=5 HPML_PROF_TRACE=1$self" ;;
    esac
}
# self_s: the profiler's own time in the last run (HPML_PROF_SELF=1: the last 'p' line of
# each rank file, its wrappers' bookkeeping + its start + its snapshots), the largest over
# the ranks, in seconds; nothing when a rank file has none.
self_s() {
    local f v max=0
    for f in "$tmp"/p/rank-*.prof; do
        v=$(awk '$1 == "p" { s = $3 + $4 + $5 } END { if (s != "") printf "%.9f", s / 1e9 }' "$f")
        [ -n "$v" ] || return 0
        max=$(awk -v a="$max" -v b="$v" 'BEGIN { print (b > a ? b : a) }')
    done
    echo "$max"
}
# wall MODE CMD...: seconds of CMD's run in MODE, its output in $tmp/out; a run that fails
# says so on stderr, prints nothing and returns 1 (its round's pair is left out).
wall() {
    local m=$1 t0 t1 l
    shift
    rm -rf "$tmp/p"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046 # the mode's assignments are words
    if [ "$m" = plain ]; then l=("${run[@]}"); else l=("${run[0]}" "${pre[@]}" "${run[@]:1}"); fi
    env $(mode_env "$m") "${l[@]}" "$@" >"$tmp/out" 2>"$tmp/err" || {
        echo "prof_overhead.sh: failed ($m): $*" >&2; tail -5 "$tmp/err" >&2; return 1; }
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}
# self_row ROUND WORKLOAD MODE: the row of the profiler's own time in the run just made.
self_row() {
    local v
    [ "$3" != plain ] && [ -n "$self" ] || return 0
    v=$(self_s)
    [ -z "$v" ] || echo "$1 $2-self $3 $v" >>"$tmp/rows"
    # its parts on every rank: calls timed, bookkeeping, start, snapshots (ns)
    for f in "$tmp"/p/rank-*.prof; do
        awk -v w="$2" -v m="$3" '$1 == "p" { p = $2 " " $3 " " $4 " " $5 } END { if (p != "") print w, m, p }' \
            "$f" >>"$tmp/parts"
    done
}
# loop_row ROUND WORKLOAD MODE VALUE: the program's own time of its loop (train: the mean
# step in ms; kmeans: the Lloyd iterations in s, slowest rank), when it printed one.
loop_row() {
    [ -z "$4" ] || echo "$1 $2-loop $3 $4" >>"$tmp/rows"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

# The six orders of the three modes; round r uses order r mod 6 (the latency, with two
# modes, the order's plain/stats part).
orders=("plain stats trace" "stats trace plain" "trace plain stats"
    "plain trace stats" "trace stats plain" "stats plain trace")
load0=$(cut -d' ' -f1-3 /proc/loadavg)
sched=$(chrt -p $$ 2>/dev/null | sed -n 's/.*scheduling policy: //p;s/.*scheduling priority: /priority /p' | tr '\n' ' ')
: >"$tmp/rows"
: >"$tmp/parts"
: >"$tmp/merge"
t_start=$(now)
last=0
done_rounds=0
for r in $(seq "$rounds"); do
    if [ "$budget" -gt 0 ] && [ $done_rounds -gt 0 ] &&
        awk -v e="$(elapsed "$t_start")" -v l="$last" -v b="$budget" 'BEGIN { exit !(e + l > b) }'; then
        break
    fi
    t_round=$(now)
    order=${orders[$(((r - 1) % 6))]}
    if [ $only != wall ]; then
        for m in $order; do
            [ $m = trace ] && continue
            # without HPML_PROF_SELF: its clock read per call is not part of statistics mode
            keep=$self
            self=
            wall $m "$hpml" bench latency -m 0:1 -i $lat_iters -x 1000 -z50 --csv >/dev/null || {
                self=$keep
                continue
            }
            self=$keep
            # the CSV's 0-byte row, its P50 column
            awk -F, -v r="$r" -v m="$m" '
                NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "size") z = i; if ($i == "p50_us") c = i } }
                NR > 1 && $z == 0 { print r, "latency", m, $c }' "$tmp/out" >>"$tmp/rows"
        done
    fi
    if [ $only != latency ]; then
        for m in $order; do
            t=$(wall $m "$hpml" train --synthetic --model mlp "${train[@]}" --no-progress) &&
                echo "$r train $m $t" >>"$tmp/rows" && self_row "$r" train $m &&
                loop_row "$r" train $m "$(awk 'NF && $1 !~ /^#/ { v = $2 } END { print v }' "$tmp/out")"
        done
        for m in $order; do
            t=$(wall $m "$hpml" kmeans --data "$tmp/x.npy" -k 16 --init random --n-init 1 \
                --max-iter $kiter --tol 0) && echo "$r kmeans $m $t" >>"$tmp/rows" &&
                self_row "$r" kmeans $m &&
                loop_row "$r" kmeans $m "$(sed -n 's/.* lloyd \([0-9.]*\) s.*/\1/p' "$tmp/out")"
        done
        t0=$(now)
        "$hpml" prof merge -q "$tmp/p" >/dev/null 2>&1 || true # the last run's: kmeans
        elapsed "$t0" >>"$tmp/merge"
        echo >>"$tmp/merge"
    fi
    last=$(elapsed "$t_round")
    done_rounds=$r
    echo "round $r/$rounds done ($last s)" >&2
done

echo "# hpml prof overhead, $mpi, 2 ranks bound one per core, $done_rounds paired rounds, $(date -u '+%Y-%m-%d %H:%M UTC'), build $(git -C "$repo" rev-parse --short HEAD)"
echo "# scheduling: ${sched:-unknown}; load average at the start: $load0; at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(elapsed "$t_start") s"
if [ -s "$tmp/merge" ]; then
    echo "# hpml prof merge of a kmeans trace run: $(sort -g "$tmp/merge" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }') s (median)"
fi
if [ -s "$tmp/parts" ]; then
    echo "# the profiler's own time in parts, per rank and run (medians): calls timed, their bookkeeping, start, snapshots"
    /usr/bin/python3 - "$tmp/parts" <<'PY'
import statistics, sys
parts = {}
for line in open(sys.argv[1]):
    w, m, *v = line.split()
    parts.setdefault((w, m), []).append([int(x) for x in v])
for (w, m), rows in sorted(parts.items()):
    c, b, s, f = (statistics.median(col) for col in zip(*rows))
    print(f"#   {w} {m}: {len(rows)} rank runs: {c:.0f} calls, {b / 1e6:.3f} ms, "
          f"start {s / 1e6:.3f} ms, snapshots {f / 1e6:.3f} ms")
PY
fi
/usr/bin/python3 "$repo/bench/prof_overhead_stats.py" "$tmp/rows"
