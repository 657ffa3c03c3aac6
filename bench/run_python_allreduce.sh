#!/usr/bin/env bash
# hpml's allreduce from Python against the same calls from C: f32 sum at 2 ranks bound to
# the cores (Open MPI: Debian's mpi4py is built for it), sizes --min to --max bytes. Each
# round runs `hpml bench allreduce --impl mpi,hpml` (C), then `python3 -m hpml.bench
# allreduce --impl mpi4py,hpml` with plain calls and with --bind, one after the other,
# with the C run's iteration and warm-up counts at every size (like with like), and the
# plain calls twice more above 8 KiB: with OMB-Py's own counts (N/100+1 iterations there,
# against C's N/10), and on 64-byte aligned buffers (--align 64; `hpml bench`'s start on a
# page, NumPy puts large arrays 16 bytes past one). Per size the median of the rounds'
# averages is printed as a Markdown table with the differences and ratios of
# docs/performance.md.
#   bench/run_python_allreduce.sh [--rounds N] [--min BYTES] [--max BYTES] [--iterations N]
# --iterations N (default 10000, a multiple of 100): N up to 8 KiB, N/10 above (warm-up a
# tenth of that), as `hpml bench -i N -x N/10` runs.
# Env: BUILD (default build/openmpi); HPML_* settings reach every run. Run it under
# `chrt -f 1` on a quiet machine. Its runs are separate processes, which differ from each
# other by more than 3% at 64 KiB and above: bench/run_python_vs_c.sh compares Python
# and C within the same processes, round by round, for that target.
set -eu
rounds=5 min=8 max=4194304 iters=10000
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --min) min=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --iterations) iters=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "run_python_allreduce: unknown option '$1'" >&2; exit 2 ;;
    esac
done
if [ $((iters % 100)) -ne 0 ] || [ "$iters" -le 0 ]; then
    echo "run_python_allreduce: --iterations must be a positive multiple of 100" >&2
    exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$repo/build/openmpi}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$repo/python
export HPML_LIB=$build/lib/libhpml.so.0
skip=$((iters / 10))
large=8192 # OMB's and OMB-Py's threshold: above it, fewer iterations
run=(mpirun.openmpi --allow-run-as-root --bind-to core -np 2)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# pyrun FILE LO HI ITERS SKIP ARGS...: hpml.bench over [LO, HI] (nothing if empty), CSV.
pyrun() {
    local f=$1 lo=$2 hi=$3 i=$4 x=$5
    shift 5
    [ "$lo" -le "$hi" ] || return 0
    "${run[@]}" /usr/bin/python3 -m hpml.bench allreduce --buffer numpy --min "$lo" --max "$hi" \
        --iterations "$i" --skip "$x" --csv "$@" >>"$f"
}
small_hi=$((max < large ? max : large))
big_lo=$((min > 2 * large ? min : 2 * large))
# hpml.bench above 8 KiB runs I/100+1 iterations (and warm-up X/100+1): C's counts there
# (N/10 and N/100) come from I = 10N - 100 and X = 10(N/10) - 100.
for r in $(seq "$rounds"); do
    "${run[@]}" "$build/bin/hpml" bench allreduce -T f32 -m "$min:$max" -i "$iters" -x "$skip" \
        --impl mpi,hpml --csv >"$out/c.$r.csv"
    pyrun "$out/py.$r.csv" "$min" "$small_hi" "$iters" "$skip" --impl mpi4py,hpml
    pyrun "$out/py.$r.csv" "$big_lo" "$max" $((10 * iters - 100)) $((10 * skip - 100)) \
        --impl mpi4py,hpml
    pyrun "$out/bound.$r.csv" "$min" "$small_hi" "$iters" "$skip" --impl hpml --bind
    pyrun "$out/bound.$r.csv" "$big_lo" "$max" $((10 * iters - 100)) $((10 * skip - 100)) \
        --impl hpml --bind
    pyrun "$out/omb.$r.csv" "$big_lo" "$max" "$iters" "$skip" --impl hpml
    pyrun "$out/aligned.$r.csv" "$big_lo" "$max" $((10 * iters - 100)) $((10 * skip - 100)) \
        --impl hpml --align 64
    for f in bound omb aligned; do
        [ -f "$out/$f.$r.csv" ] && sed -i "s/,hpml,/,hpml $f,/" "$out/$f.$r.csv"
    done
done
/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import csv, os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
t = {}
for r in range(1, rounds + 1):
    for name, prefix in (("c", "C "), ("py", "Py "), ("bound", "Py "), ("omb", "Py "),
                         ("aligned", "Py ")):
        path = "%s/%s.%d.csv" % (d, name, r)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["size"] == "size":  # the header of an appended run
                    continue
                t.setdefault((prefix + row["impl"], int(row["size"])), []).append(
                    float(row["avg_us"]))
med = {k: statistics.median(v) for k, v in t.items()}
sizes = sorted({s for _, s in med})
print("| bytes | C: MPI | C: hpml | Py: mpi4py | Py: hpml | Py: hpml bound | "
      "Py hpml − C hpml | Py bound − C hpml | Py hpml / C hpml | Py bound / C hpml | "
      "mpi4py / Py hpml | Py hpml, OMB-Py counts / C hpml | Py hpml, aligned / C hpml |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in sizes:
    g = lambda k: med[(k, s)]
    c, p, b = g("C hpml"), g("Py hpml"), g("Py hpml bound")
    omb, al = med.get(("Py hpml omb", s)), med.get(("Py hpml aligned", s))
    print("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %+.2f | %+.2f | %.3f | %.3f | %.2f | %s | %s |"
          % (s, g("C mpi"), c, g("Py mpi4py"), p, b, p - c, b - c, p / c, b / c,
             g("Py mpi4py") / p, "%.3f" % (omb / c) if omb else "",
             "%.3f" % (al / c) if al else ""))
print()
print("µs, median of %d rounds (each the average over the iterations and ranks)" % rounds)
EOF
