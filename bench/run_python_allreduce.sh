#!/usr/bin/env bash
# hpml's allreduce from Python against the same calls from C: f32 sum at 2 ranks bound to
# the cores (Open MPI: Debian's mpi4py is built for it), sizes 8 bytes to --max. Each
# round runs `hpml bench allreduce --impl mpi,hpml` (C) and `python3 -m hpml.bench
# allreduce --impl mpi4py,hpml` with plain calls and with --bind, one after the other;
# per size the median of the rounds' averages is printed as a Markdown table with the
# differences and ratios of docs/performance.md.
#   bench/run_python_allreduce.sh [--rounds N] [--min BYTES] [--max BYTES] [--iterations N]
#                                 [--py-iterations N]
# Above 8 KiB `hpml bench` runs N/10 iterations and hpml.bench (OMB-Py's rule) N/100+1:
# --py-iterations 10N with --min above 8 KiB gives both the same count.
# Env: BUILD (default build/openmpi). Run it under `chrt -f 1` on a quiet machine.
set -eu
rounds=5 min=8 max=4194304 iters=10000 pyiters=
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --min) min=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --py-iterations) pyiters=$2; shift 2 ;;
    --iterations) iters=$2; shift 2 ;;
    *) echo "run_python_allreduce: unknown option '$1'" >&2; exit 2 ;;
    esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$repo/build/openmpi}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$repo/python
export HPML_LIB=$build/lib/libhpml.so.0
skip=$((iters / 10))
pyiters=${pyiters:-$iters}
pyskip=$((pyiters / 10))
run=(mpirun.openmpi --allow-run-as-root --bind-to core -np 2)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
    "${run[@]}" "$build/bin/hpml" bench allreduce -T f32 -m "$min:$max" -i "$iters" -x "$skip" \
        --impl mpi,hpml --csv >"$out/c.$r.csv"
    "${run[@]}" /usr/bin/python3 -m hpml.bench allreduce --buffer numpy --min "$min" --max "$max" \
        --iterations "$pyiters" --skip "$pyskip" --impl mpi4py,hpml --csv >"$out/py.$r.csv"
    "${run[@]}" /usr/bin/python3 -m hpml.bench allreduce --buffer numpy --min "$min" --max "$max" \
        --iterations "$pyiters" --skip "$pyskip" --impl hpml --bind --csv |
        sed 's/,hpml,/,hpml bound,/' >"$out/bound.$r.csv"
done
/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import csv, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
t = {}
for r in range(1, rounds + 1):
    for name, prefix in (("c", "C "), ("py", "Py "), ("bound", "Py ")):
        with open("%s/%s.%d.csv" % (d, name, r)) as f:
            for row in csv.DictReader(f):
                t.setdefault((prefix + row["impl"], int(row["size"])), []).append(
                    float(row["avg_us"]))
med = {k: statistics.median(v) for k, v in t.items()}
sizes = sorted({s for _, s in med})
print("| bytes | C: MPI | C: hpml | Py: mpi4py | Py: hpml | Py: hpml bound | "
      "Py hpml − C hpml | Py bound − C hpml | Py hpml / C hpml | mpi4py / Py hpml |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in sizes:
    g = lambda k: med[(k, s)]
    c, p, b = g("C hpml"), g("Py hpml"), g("Py hpml bound")
    print("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %+.2f | %+.2f | %.3f | %.2f |" % (
        s, g("C mpi"), c, g("Py mpi4py"), p, b, p - c, b - c, p / c, g("Py mpi4py") / p))
print()
print("µs, median of %d rounds (each the average over the iterations and ranks)" % rounds)
EOF
