#!/usr/bin/env bash
# hpml bench allreduce --impl mpi against OMB 7.4's osu_allreduce, run in turns on the
# same ranks: the Avg latency of each size, the median over the rounds, and their ratio.
# hpml's mpi rows must read within +-5% of OMB's at every size.
#
#   bench/omb_compare.sh --omb-dir DIR [--mpi openmpi|mpich] [--rounds N] [--np N]
#                        [-m MIN:MAX] [-i N] [-x N] [--tolerance PCT] [--markdown]
# (-m in bytes, as OMB takes it; default 4:1048576)
#
# DIR is an OMB 7.4 tree built with this MPI, outside the repository (the repository never
# holds OMB), e.g. from a public copy of its sources:
#     ./configure CC=mpicc.openmpi CXX=mpicxx.openmpi && make -C c/mpi/collective/blocking osu_allreduce
# (the binary is looked for at DIR/c/mpi/collective/blocking/osu_allreduce, then
# DIR/osu_allreduce). Both programs get OMB's options (-m, -i, -x; default datatype
# mpi_char) and the same launcher. Exit 1 when a size is outside the tolerance.
# Run on an otherwise idle machine (check `uptime`), best under `chrt -f 1`: the two
# programs alternate so that a load change hits both, but a busy machine still spreads
# small-size latencies. Ranks are bound to cores (BIND=none to unbind).
set -eu
mpi=openmpi omb= rounds=5 np=2 sizes=4:1048576 iters= warm= tol=5 md=0
while [ $# -gt 0 ]; do
    case $1 in
    --omb-dir) omb=$2; shift 2 ;;
    --mpi) mpi=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    -m) sizes=$2; shift 2 ;;
    -i) iters=$2; shift 2 ;;
    -x) warm=$2; shift 2 ;;
    --tolerance) tol=$2; shift 2 ;;
    --markdown) md=1; shift ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "omb_compare: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
hpml=${HPML:-$repo/build/$mpi/bin/hpml}
[ -n "$omb" ] || { echo "omb_compare: --omb-dir DIR is required (see --help)" >&2; exit 2; }
osu=$omb/c/mpi/collective/blocking/osu_allreduce
[ -x "$osu" ] || osu=$omb/osu_allreduce
[ -x "$osu" ] || { echo "omb_compare: no osu_allreduce in $omb (build it: see --help)" >&2; exit 2; }
[ -x "$hpml" ] || { echo "omb_compare: no $hpml (make MPI=$mpi)" >&2; exit 2; }
# One rank per core, pinned (docs/performance.md, "How to measure"); BIND=none unbinds.
bind=${BIND:-core}
case $mpi in
openmpi) run=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to "$bind" -np "$np") ;;
mpich) run=(mpirun.mpich -bind-to "$bind" -np "$np") ;;
*) echo "omb_compare: --mpi openmpi or mpich" >&2; exit 2 ;;
esac
# The OMB binary must be linked against the same MPI as hpml.
if ! ldd "$osu" | grep -q "lib$( [ "$mpi" = openmpi ] && echo mpi.so || echo mpich)"; then
    echo "omb_compare: $osu is not linked against $mpi" >&2
    exit 2
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
opts=(-m "$sizes")
[ -n "$iters" ] && opts+=(-i "$iters")
[ -n "$warm" ] && opts+=(-x "$warm")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
    "${run[@]}" "$osu" "${opts[@]}" >"$tmp/omb.$r" 2>"$tmp/err" ||
        { echo "omb_compare: osu_allreduce failed: $(head -3 "$tmp/err")" >&2; exit 1; }
    "${run[@]}" "$hpml" bench allreduce --impl mpi "${opts[@]}" >"$tmp/hpml.$r" 2>"$tmp/err" ||
        { echo "omb_compare: hpml bench failed: $(head -3 "$tmp/err")" >&2; exit 1; }
done
/usr/bin/python3 - "$tmp" "$rounds" "$tol" "$md" "$mpi" "$np" <<'PYEOF'
import statistics, sys
tmp, rounds, tol, md, mpi, np_ = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1", sys.argv[5], sys.argv[6]
def avg(path):  # size -> Avg latency (the second column of OMB-shaped rows)
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 2 and not line.startswith("#") and f[0].isdigit() and int(f[0]) > 0:
            out[int(f[0])] = float(f[1])
    return out
runs = {k: [avg(f"{tmp}/{k}.{r}") for r in range(1, rounds + 1)] for k in ("omb", "hpml")}
sizes = sorted(set(runs["omb"][0]) & set(runs["hpml"][0]))
bad = 0
if md:
    print(f"| size (B) | osu_allreduce (µs) | hpml --impl mpi (µs) | hpml / OMB |")
    print("|---:|---:|---:|---:|")
else:
    print(f"# {mpi}, {np_} ranks, median of {rounds} alternating rounds; tolerance ±{tol:g}%")
    print(f"{'size':>8} {'OMB us':>10} {'hpml us':>10} {'ratio':>7}")
for s in sizes:
    o = statistics.median(r[s] for r in runs["omb"])
    h = statistics.median(r[s] for r in runs["hpml"])
    ratio = h / o if o > 0 else float("inf")
    out = abs(ratio - 1) * 100 > tol
    bad |= out
    if md:
        print(f"| {s} | {o:.2f} | {h:.2f} | {ratio:.3f}{' **outside**' if out else ''} |")
    else:
        print(f"{s:>8} {o:>10.2f} {h:>10.2f} {ratio:>7.3f}{'  OUTSIDE' if out else ''}")
print(f"# {'all sizes within' if not bad else 'NOT all sizes within'} ±{tol:g}% of OMB")
sys.exit(bad)
PYEOF
