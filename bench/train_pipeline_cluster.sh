#!/usr/bin/env bash
# The pipeline layout across 2 emulated nodes (scripts/cluster.sh), one rank on each:
# S = 2 stages against the data-parallel layout on the deep presets, with the links
# unshaped and shaped to RATE, so that what each layout sends between the nodes is what
# is measured. Per step data-parallel allreduces every gradient (deep-mlp 16.8 M
# parameters, 67 MB; vgg 0.9 M, 3.6 MB); the pipeline sends each micro-batch's
# activations at the cut forward and their gradients back (the global batch times the
# cut's width, 4 bytes each way).
#
#   bench/train_pipeline_cluster.sh [--mpi openmpi|mpich] [--rate 1gbit] [--rounds N]
#                                   [--iters N] [--limit SECONDS] [--quick]
#
# Each run: hpml train --synthetic --model MODEL --batch 64 (per rank; global 128)
# --iters ITERS (default 20) --warmup-iters 3, with --parallel data or with --pipeline 2
# --micro-batches 8 --schedule 1f1b (bench/train_pipeline.sh's one-node comparison), in
# pairs run one after the other, ROUNDS rounds (default 3); the median ratio. Prints one
# markdown table (docs/performance.md, "nn: pipeline layout"). --limit: seconds one run
# may take before it is stopped and reported as failed (default 120). --quick: 2 steps,
# one round (checks the script; not a measurement). Needs root (network namespaces). The
# cluster is named hpmlpipe on 10.213.253.0/24 and is taken down on every exit. The two
# "nodes" are namespaces of one machine: their ranks share its cores (and its memory
# bandwidth); only the link between them is a network.
set -euo pipefail
mpi=openmpi
rate=1gbit
rounds=3
iters=20
limit_s=120
quick=0
while [ $# -gt 0 ]; do
    case "$1" in
    --mpi) mpi=${2:?--mpi needs a value}; shift 2 ;;
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --iters) iters=${2:?--iters needs a value}; shift 2 ;;
    --limit) limit_s=${2:?--limit needs a value}; shift 2 ;;
    --quick) quick=1; shift ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "train_pipeline_cluster.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "train_pipeline_cluster.sh: $*" >&2; exit 2; }
case $mpi in openmpi | mpich) ;; *) die "--mpi must be openmpi or mpich (got '$mpi')" ;; esac
for v in rounds iters limit_s; do
    case ${!v} in '' | *[!0-9]* | 0) die "--${v%_s} must be a positive whole number (got '${!v}')" ;; esac
done
[[ $rate =~ ^[0-9]+(k|m|g)?bit$ ]] || die "--rate must be a rate like 1gbit or 100mbit (got '$rate')"
[ $quick -eq 1 ] && iters=2 rounds=1
repo=$(cd "$(dirname "$0")/.." && pwd)
cluster=$repo/scripts/cluster.sh
hpml=$repo/build/$mpi/bin/hpml
name=hpmlpipe
subnet=10.213.253
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
[ -x "$hpml" ] || die "$hpml: not built (make MPI=$mpi)"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap '"$cluster" down --name $name >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# links RATE|none: the 2 nodes, afresh, their links shaped to RATE or not.
links() {
    "$cluster" down --name $name >/dev/null 2>&1 || true
    if [ "$1" = none ]; then
        "$cluster" up 2 --name $name --subnet $subnet >/dev/null
    else
        "$cluster" up 2 --name $name --subnet $subnet --rate "$1" >/dev/null
    fi
}
# one MODEL ARGS...: one synthetic run on 2 nodes x 1 rank; its --json line appended to
# $tmp/runs (an empty line when it failed).
one() {
    local model=$1 out
    shift
    out=$(timeout -k 5 "$limit_s" "$cluster" run --name $name --mpi "$mpi" --nodes 2 --ppn 1 -- \
        "$hpml" train --synthetic --model "$model" --batch 64 --iters "$iters" --warmup-iters 3 \
        --json "$@" 2>>"$tmp/err") || true
    grep -m1 '^{' <<<"$out" >>"$tmp/runs" || echo >>"$tmp/runs"
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$repo" rev-parse --short HEAD)," \
    "$mpi, $(getconf _NPROCESSORS_ONLN) cores shared by both nodes, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //');" \
    "features: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f)$' | tr '\n' ' ')"
echo "# each run: scripts/cluster.sh run --mpi $mpi --nodes 2 --ppn 1 -- hpml train --synthetic" \
    "--model MODEL --batch 64 --iters $iters --warmup-iters 3 --parallel data | --pipeline 2" \
    "--micro-batches 8 --schedule 1f1b"
echo
echo "| model | links | data-parallel img/s | pipeline img/s | pipeline / data (median of $rounds) | data step ms | pipeline step ms |"
echo "|---|---|---:|---:|---:|---:|---:|"
for shape in none "$rate"; do
    links "$shape"
    for model in deep-mlp vgg; do
        : >"$tmp/runs"
        for ((i = 0; i < rounds; i++)); do
            one $model --parallel data
            one $model --pipeline 2 --micro-batches 8 --schedule 1f1b
        done
        /usr/bin/python3 - "$tmp/runs" "$model" "${shape/none/unshaped}" <<'PY'
import json, statistics, sys
path, model, links = sys.argv[1:]
def parse(line):
    try:
        return json.loads(line)
    except ValueError:
        return None
rs = [parse(l) for l in open(path)]
pairs = [(d, p) for d, p in zip(rs[0::2], rs[1::2]) if d and p]
if not pairs:
    print(f"| {model} | {links} | (no result: the runs failed or timed out) | | | | |")
    sys.exit(0)
med = lambda xs: statistics.median(xs)
ratio = med([p["images_per_second"] / d["images_per_second"] for d, p in pairs])
print(f"| {model} | {links} | {med([d['images_per_second'] for d, _ in pairs]):.0f} | "
      f"{med([p['images_per_second'] for _, p in pairs]):.0f} | {ratio:.2f}"
      f"{'' if len(pairs) == len(rs) // 2 else f' ({len(pairs)} pairs complete)'} | "
      f"{1e3 * med([d['step_seconds'] for d, _ in pairs]):.0f} | "
      f"{1e3 * med([p['step_seconds'] for _, p in pairs]):.0f} |")
PY
    done
done
if [ -s "$tmp/err" ] && grep -q . "$tmp/err"; then
    echo
    echo "# stderr of the runs (last lines):"
    tail -5 "$tmp/err" | sed 's/^/#   /'
fi
