#!/usr/bin/env bash
# The overhead of libhpml-prof.so (docs/prof.md), against the same commands without it,
# on 2 ranks, in alternating rounds (plain, statistics, trace, plain, ...):
#   - the 0-byte `hpml bench latency` median (its 50th percentile, -z50) without the
#     profiler and in statistics mode: the difference in µs;
#   - the wall time of `hpml train --synthetic` and of `hpml kmeans` (a uniform random
#     .npy made here with NumPy): the ratios statistics / plain and trace / plain.
# Each figure is the median of the rounds. The program's wall time is timed around the
# launcher; the report (`hpml prof merge`) is not part of it and is timed apart.
#
#   bench/prof_overhead.sh [openmpi|mpich] [--rounds N] [--quick]
#
# --quick: small sizes, to check the script (not a measurement). Run the measurement on a
# quiet machine under `chrt -f 1` (docs/performance.md, "How to measure").
set -eu
mpi=openmpi
rounds=5
quick=0
while [ $# -gt 0 ]; do
    case "$1" in
    openmpi | mpich) mpi=$1; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "prof_overhead.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
b=$repo/build/$mpi
hpml=$b/bin/hpml
lib=$b/lib/libhpml-prof.so
[ -x "$hpml" ] && [ -f "$lib" ] || { echo "prof_overhead.sh: build first: make MPI=$mpi" >&2; exit 2; }
case $mpi in
openmpi) run=(mpirun.openmpi --allow-run-as-root --bind-to core -np 2) ;;
mpich) run=(mpirun.mpich -bind-to core -np 2) ;;
esac
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ $quick -eq 1 ]; then
    lat_iters=2000 rows=20000 train=(--iters 5 --warmup-iters 2) kiter=5
else
    lat_iters=200000 rows=400000 train=(--iters 1000 --warmup-iters 10) kiter=300
fi
/usr/bin/python3 -c "
import numpy as np
np.save('$tmp/x.npy', np.random.default_rng(1).random(($rows, 32), dtype=np.float32))"

# mode_env MODE: the environment of one mode (plain, stats, trace).
mode_env() {
    case $1 in
    plain) echo ;;
    stats) echo "LD_PRELOAD=$lib HPML_PROF_DIR=$tmp/p HPML_PROF_PERIOD=5" ;;
    trace) echo "LD_PRELOAD=$lib HPML_PROF_DIR=$tmp/p HPML_PROF_PERIOD=5 HPML_PROF_TRACE=1" ;;
    esac
}
# wall MODE CMD...: seconds of CMD's run in MODE, its output in $tmp/out
wall() {
    local m=$1 t0 t1
    shift
    rm -rf "$tmp/p"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046 # the mode's assignments are words
    env $(mode_env "$m") "${run[@]}" "$@" >"$tmp/out" 2>"$tmp/err" || {
        echo "prof_overhead.sh: failed ($m): $*" >&2; tail -5 "$tmp/err" >&2; exit 1; }
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for m in plain stats trace; do : >"$tmp/lat.$m"; : >"$tmp/train.$m"; : >"$tmp/kmeans.$m"; done
: >"$tmp/merge"
for r in $(seq "$rounds"); do
    for m in plain stats; do
        wall $m "$hpml" bench latency -m 0:1 -i $lat_iters -x 1000 -z50 --csv >/dev/null
        # the CSV's 0-byte row, its P50 column
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "size") z = i; if ($i == "p50_us") c = i } }
                 NR > 1 && $z == 0 { print $c }' "$tmp/out" >>"$tmp/lat.$m"
    done
    for m in plain stats trace; do
        wall $m "$hpml" train --synthetic --model mlp "${train[@]}" --no-progress >>"$tmp/train.$m"
        wall $m "$hpml" kmeans --data "$tmp/x.npy" -k 16 --init random --n-init 1 --max-iter $kiter \
            --tol 0 >>"$tmp/kmeans.$m"
    done
    t0=$(date +%s.%N)
    "$hpml" prof merge -q "$tmp/p" >/dev/null 2>&1 || true
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.4f\n", b - a }' >>"$tmp/merge"
    echo "round $r/$rounds done" >&2
done

lp=$(median <"$tmp/lat.plain")
ls=$(median <"$tmp/lat.stats")
echo "# hpml prof overhead, $mpi, 2 ranks, $rounds rounds (medians), $(date -u '+%Y-%m-%d %H:%M UTC'), build $(git -C "$repo" rev-parse --short HEAD)"
echo "# load average at the start: $load0; at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-32s %12s %12s %12s %12s %12s\n' target plain stats trace stats-plain trace/plain
printf '%-32s %12s %12s %12s %12s %12s\n' "latency 0 B p50 (us)" "$lp" "$ls" - \
    "$(awk -v a="$lp" -v b="$ls" 'BEGIN { printf "%+.3f us", b - a }')" -
for w in train kmeans; do
    p=$(median <"$tmp/$w.plain")
    s=$(median <"$tmp/$w.stats")
    t=$(median <"$tmp/$w.trace")
    printf '%-32s %12s %12s %12s %12s %12s\n' "$w wall (s)" "$p" "$s" "$t" \
        "$(awk -v a="$p" -v b="$s" 'BEGIN { printf "x%.4f", b / a }')" \
        "$(awk -v a="$p" -v b="$t" 'BEGIN { printf "x%.4f", b / a }')"
done
echo "# hpml prof merge of the last trace run: $(median <"$tmp/merge") s (median)"
echo "# all rounds: latency plain $(tr '\n' ' ' <"$tmp/lat.plain")| stats $(tr '\n' ' ' <"$tmp/lat.stats")"
for w in train kmeans; do
    echo "# $w: plain $(tr '\n' ' ' <"$tmp/$w.plain")| stats $(tr '\n' ' ' <"$tmp/$w.stats")| trace $(tr '\n' ' ' <"$tmp/$w.trace")"
done
