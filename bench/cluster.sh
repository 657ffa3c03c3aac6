#!/usr/bin/env bash
# hpml across emulated nodes (scripts/cluster.sh) against the MPI in the same run:
#   - allreduce, f32, 4 KiB to 16 MiB: the MPI's MPI_Allreduce, hpml's default selection
#     (`hpml`) and the hierarchical algorithm (`hpml:hier`), average µs, on
#     2 nodes x 1 rank and 2 nodes x 2 ranks, links unshaped and shaped to RATE;
#   - data-parallel MLP training (Fashion-MNIST, `dense 512 relu | dense 512 relu |
#     dense 10`) on 2 nodes x 1 rank with shaped links: f32 gradients against bf16
#     gradients, images/s and test accuracy.
# Prints markdown tables (the ones of docs/performance.md, "comm: allreduce across nodes").
#
#   bench/cluster.sh [--mpi openmpi,mpich] [--rate 1gbit] [--limit SECONDS] [--quick]
#
# --limit: seconds one run (one launcher call) may take before it is stopped and reported
# as failed (default 150; MPICH can hang in MPI_Finalize, docs/cluster.md).
# Needs root (network namespaces). --quick: few sizes and iterations, to check the script
# (not a measurement). 2 x 2 is 4 ranks: on a machine with fewer than 4 cores it measures
# the shaped network only where the link, not the CPU, is the bottleneck (large sizes).
# The cluster is named hpmlb on 10.213.252.0/24 and is taken down on every exit.
set -euo pipefail
mpis=openmpi,mpich
rate=1gbit
quick=0
limit_s=
while [ $# -gt 0 ]; do
    case "$1" in
    --mpi) mpis=${2:?--mpi needs a value}; shift 2 ;;
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --quick) quick=1; shift ;;
    --limit) limit_s=${2:?--limit needs a value}; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "cluster.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
cluster=$repo/scripts/cluster.sh
name=hpmlb
subnet=10.213.252
data=/usr/share/datasets/fashion-mnist
[ "$(id -u)" -eq 0 ] || { echo "cluster.sh: needs root (network namespaces)" >&2; exit 2; }
for m in ${mpis//,/ }; do
    case $m in openmpi | mpich) ;; *) echo "cluster.sh: --mpi: unknown MPI '$m'" >&2; exit 2 ;; esac
    [ -x "$repo/build/$m/bin/hpml" ] || { echo "cluster.sh: build first: make MPI=$m" >&2; exit 2; }
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap '"$cluster" down --name $name >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
if [ $quick -eq 1 ]; then
    sizes=64K:1M iters=(-i 20 -x 2) epochs=1 limit=(--train-limit 4000 --test-limit 1000)
    limit_s=${limit_s:-60}
else
    sizes=4K:16M iters=(-i 100 -x 20) epochs=2 limit=(--train-limit 20000 --test-limit 10000)
    limit_s=${limit_s:-150}
fi
case $limit_s in '' | *[!0-9]* | 0) echo "cluster.sh: --limit must be a positive number of seconds (got '$limit_s')" >&2; exit 2 ;; esac

up() { # RATE|none
    "$cluster" down --name $name >/dev/null 2>&1 || true
    if [ "$1" = none ]; then
        "$cluster" up 2 --name $name --subnet $subnet >/dev/null
    else
        "$cluster" up 2 --name $name --subnet $subnet --rate "$1" >/dev/null
    fi
}
crun() { # MPI PPN program args... (MPICH can hang in MPI_Finalize: docs/cluster.md)
    local m=$1 p=$2
    shift 2
    timeout -k 5 "$limit_s" "$cluster" run --name $name --mpi "$m" --nodes 2 --ppn "$p" -- "$@"
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$repo" rev-parse --short HEAD)," \
    "$(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo
echo "| MPI | layout | links | size | mpi µs | hpml µs (algorithm) | hier µs | mpi / hpml | mpi / hier |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
# Shaped first, 2 x 2 first: the targets' runs come before the others.
for shape in "$rate" none; do
    up "$shape"
    for m in ${mpis//,/ }; do
        for p in 2 1; do
            out=$tmp/$m-$p-$shape.csv
            crun "$m" "$p" "$repo/build/$m/bin/hpml" bench allreduce -T f32 \
                --impl mpi,hpml,hpml:hier -m "$sizes" "${iters[@]}" --csv >"$out" || true
            crun "$m" "$p" "$repo/build/$m/bin/hpml" info >"$tmp/info" 2>/dev/null || true
            /usr/bin/python3 - "$out" "$m" "2 x $p" "${shape/none/unshaped}" "$tmp/info" <<'PY'
import csv, re, sys
path, mpi, layout, links, info = sys.argv[1:]
rows = {}
try:
    for r in csv.DictReader(open(path)):
        rows.setdefault(int(r["size"]), {})[r["impl"]] = float(r["avg_us"])
except (OSError, ValueError, KeyError, TypeError):
    pass
# the default selection's allreduce ranges from `hpml info` ("allreduce  0..512K-1 mpi, ...")
ranges = []
for line in open(info, errors="replace"):
    m = re.match(r"\s+allreduce\s+(.*)", line)
    if m:
        for part in m.group(1).split(", "):
            lo, _, algo = part.partition(" ")
            a, _, b = lo.partition("..")
            ranges.append((a, b, algo))
def unit(s):
    if not s: return float("inf")
    k = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * k[s[-1]] if s[-1] in k else int(s)
def algo(n):
    for a, b, name in ranges:
        if unit(a) <= n <= unit(b): return name
    return "?"
if not rows:
    print("| %s | %s | %s | (no result: the run failed or timed out) | | | | | |" % (mpi, layout, links))
for n in sorted(rows):
    r = rows[n]
    if not {"mpi", "hpml", "hpml:hier"} <= r.keys(): continue
    size = "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)
    print("| %s | %s | %s | %s | %.0f | %.0f (%s) | %.0f | %.2f | %.2f |" % (
        mpi, layout, links, size, r["mpi"], r["hpml"], algo(n), r["hpml:hier"],
        r["mpi"] / r["hpml"], r["mpi"] / r["hpml:hier"]))
PY
        done
    done
done

# The cost model (bench/scaling_model.py, docs/scaling.md) against the shaped 2 x 2 rows,
# with its parameters measured here: the network's latency (half the round trip of 8
# bytes, `hpml bench latency`, 2 x 1 shaped) and the node's shared-memory rate (the shm
# allreduce of 16 MiB on 2 ranks of one node, taken as 3 passes over the data).
up "$rate"
m0=${mpis%%,*}
alpha=$(crun "$m0" 1 "$repo/build/$m0/bin/hpml" bench latency -m 8:8 -i 2000 -x 200 --csv |
    awk -F, 'NR > 1 && $5 == 8 { print $7; exit }' || true)
case $m0 in
openmpi) one=(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2) ;;
mpich) one=(mpirun.mpich -np 2) ;;
esac
shm_us=$("${one[@]}" "$repo/build/$m0/bin/hpml" bench allreduce -T f32 --impl hpml:shm \
    -m 16M:16M -i 100 -x 10 --csv | awk -F, 'NR > 1 && $2 == "hpml:shm" { print $7; exit }' || true)
shm_gbs=
[ -z "$shm_us" ] || shm_gbs=$(/usr/bin/python3 -c "print('%.1f' % (3 * 16 * 2**20 / ($shm_us * 1e-6) / 1e9))")
/usr/bin/python3 - "$tmp/$m0-2-$rate.csv" >"$tmp/measured" <<'PY'
import csv, sys
rows = {}
try:
    for r in csv.DictReader(open(sys.argv[1])):
        rows.setdefault(int(r["size"]), {})[r["impl"]] = float(r["avg_us"])
except (OSError, ValueError, KeyError, TypeError):
    pass
for n in sorted(rows):
    if n >= 256 << 10 and {"mpi", "hpml:hier"} <= rows[n].keys():
        print(2, 2, n, rows[n]["mpi"], rows[n]["hpml:hier"])
PY
rate_mbit=$(/usr/bin/python3 -c "
import re; m = re.fullmatch(r'(\d+(?:\.\d+)?)([kmg]?)bit', '$rate')
print(float(m.group(1)) * {'k': 1e-3, 'm': 1, 'g': 1e3, '': 1e-6}[m.group(2)])")
echo
if [ -n "$alpha" ] && [ -n "$shm_gbs" ]; then
    echo "# model ($m0): alpha_n ${alpha} µs, link ${rate_mbit} Mbit/s, shared memory ${shm_gbs} GB/s"
    "$repo/bench/scaling_model.py" --alpha-us "$alpha" --link-mbit "$rate_mbit" \
        --shm-gbs "$shm_gbs" --ppn 2 --bytes 1M,16M --measured "$tmp/measured"
else
    echo "# model: its parameters could not be measured (a run failed)"
fi

# Training across 2 shaped nodes, 1 rank each: f32 against bf16 gradients.
echo
echo "| MPI | gradients | images/s | test accuracy | rate / f32 rate |"
echo "|---|---|---:|---:|---:|"
for m in ${mpis//,/ }; do
    for g in f32 bf16; do
        crun "$m" 1 "$repo/build/$m/bin/hpml" train --data "$data" --parallel data \
            --model "dense 512 relu | dense 512 relu | dense 10" --epochs "$epochs" --batch 128 \
            "${limit[@]}" --lr 0.01 --grad-dtype "$g" --json --no-progress \
            >"$tmp/train-$m-$g.json" 2>"$tmp/train.err" || true
    done
    /usr/bin/python3 - "$m" "$tmp/train-$m-f32.json" "$tmp/train-$m-bf16.json" <<'PY'
import json, sys
mpi, files = sys.argv[1], sys.argv[2:]
res = []
for f in files:
    try:
        lines = [l for l in open(f) if l.startswith("{")]
        res.append(json.loads(lines[-1]))
    except (OSError, ValueError, IndexError):
        res.append(None)
base = res[0]["images_per_second"] if res[0] else None
for g, r in zip(("f32", "bf16"), res):
    if r is None:
        print("| %s | %s | (no result) | | |" % (mpi, g)); continue
    ratio = "%.2f" % (r["images_per_second"] / base) if base else ""
    print("| %s | %s | %.0f | %.4f | %s |" % (mpi, g, r["images_per_second"], r["test_accuracy"], ratio))
PY
done
