#!/usr/bin/env bash
# The pipeline layout on 2 ranks: its measured bubble against (S-1)/(M+S-1), and its
# throughput against the data-parallel layout on the deep presets.
#
#   bench/train_pipeline.sh [openmpi|mpich] [--quick]        (default: openmpi)
#
# Bubble: hpml train --model deep-mlp --pipeline 2 --partition 8,9 (stages of 8.1 M and
# 8.4 M parameters: balanced within 4%), GPipe, M = 1, 2, 4, 8 micro-batches of a global
# batch of 256, STEPS steps (default 30) on Fashion-MNIST; each stage's idle share of its
# schedule as the run's --json record reports it (docs/nn.md, "Pipeline layout").
# --partition auto: the cut it picks for deep-mlp and vgg and the busy time of each stage.
# Throughput: hpml train --synthetic (BATCH per rank, default 64; ITERS timed steps after
# 5, default 40) of deep-mlp and vgg, --parallel data against --pipeline 2 --micro-batches 8
# --schedule 1f1b, in pairs run one after the other (ROUNDS, default 3; the median ratio).
# One BLAS thread per rank, ranks bound one per core; run it on an otherwise idle machine
# (under `chrt -f 1` if you can). --quick: a few steps only (checks the script).
# Across 2 emulated nodes, one rank each: bench/train_pipeline_cluster.sh.
set -eu
mpi=${1:-openmpi}
quick=0
[ "${2:-}" = --quick ] && quick=1
repo=$(cd "$(dirname "$0")/.." && pwd)
hpml=${HPML:-$repo/build/$mpi/bin/hpml}
steps=${STEPS:-30}
iters=${ITERS:-40}
batch=${BATCH:-64}
rounds=${ROUNDS:-3}
[ $quick -eq 1 ] && steps=3 iters=2 rounds=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
case $mpi in
openmpi) run=(mpirun.openmpi --allow-run-as-root --bind-to core -np 2) ;;
mpich) run=(mpirun.mpich -bind-to core -np 2) ;;
*) echo "usage: $0 [openmpi|mpich] [--quick]" >&2; exit 2 ;;
esac
[ -x "$hpml" ] || { echo "$0: $hpml: not built (make MPI=$mpi)" >&2; exit 2; }
py=/usr/bin/python3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

echo "# machine: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC'), commit $(git -C "$repo" rev-parse --short HEAD)"
echo "# CPU features: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|fma)$' | tr '\n' ' ')"
echo
echo "## bubble: deep-mlp, --pipeline 2 --partition 8,9, GPipe, global batch 256, $steps steps"
echo "# ${run[*]} $hpml train --model deep-mlp --pipeline 2 --partition 8,9 --micro-batches M --batch 256 --lr 0.005 --max-steps $steps --train-limit $((256 * steps)) --test-limit 100 --json"
echo
echo "| M | theory (S-1)/(M+S-1) | stage 0 measured | stage 1 measured | mean | mean - theory (points) | step ms |"
echo "|---|---|---|---|---|---|---|"
for M in 1 2 4 8; do
    "${run[@]}" "$hpml" train --model deep-mlp --pipeline 2 --partition 8,9 --micro-batches $M \
        --batch 256 --lr 0.005 --epochs 1 --max-steps "$steps" --train-limit $((256 * steps)) \
        --test-limit 100 --no-progress --json >"$d/b$M.json"
    $py - "$d/b$M.json" $M <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["pipeline"]
M = int(sys.argv[2])
b = [s["bubble"] for s in r["per_stage"]]
mean = sum(b) / len(b)
ms = max(s["step_seconds"] for s in r["per_stage"]) * 1e3
print(f"| {M} | {100 * r['bubble_theory']:.1f}% | {100 * b[0]:.1f}% | {100 * b[1]:.1f}% | "
      f"{100 * mean:.1f}% | {100 * (mean - r['bubble_theory']):+.1f} | {ms:.0f} |")
PY
done
echo
echo "## --partition auto: the cut it chooses and each stage's compute per step (GPipe, M = 4, $steps steps)"
echo
echo "| model | cut (layers per stage) | stage 0 busy ms | stage 1 busy ms | slowest / mean |"
echo "|---|---|---|---|---|"
for model in deep-mlp vgg; do
    "${run[@]}" "$hpml" train --model $model --pipeline 2 --partition auto --micro-batches 4 \
        --batch 256 --lr 0.005 --epochs 1 --max-steps "$steps" --train-limit $((256 * steps)) \
        --test-limit 100 --no-progress --json >"$d/a.$model.json"
    $py - "$d/a.$model.json" $model <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))["pipeline"]["per_stage"]
busy = [s["busy_seconds"] * 1e3 for s in st]
cut = ",".join(str(s["last_layer"] - s["first_layer"] + 1) for s in st)
print(f"| {sys.argv[2]} | {cut} | {busy[0]:.0f} | {busy[1]:.0f} | {max(busy) / (sum(busy) / 2):.3f} |")
PY
done
echo
echo "## throughput: 2 ranks, --synthetic --batch $batch per rank (global $((2 * batch))), $iters steps after 5, $rounds rounds"
echo "# data:     ${run[*]} $hpml train --synthetic --model MODEL --batch $batch --iters $iters --warmup-iters 5 --parallel data"
echo "# pipeline: the same with --pipeline 2 --micro-batches 8 --schedule 1f1b"
echo
echo "| model | data-parallel img/s | pipeline img/s | pipeline / data (median of $rounds) |"
echo "|---|---|---|---|"
for model in deep-mlp vgg; do
    : >"$d/t.$model"
    for ((i = 0; i < rounds; i++)); do
        a=$("${run[@]}" "$hpml" train --synthetic --model $model --batch "$batch" --iters "$iters" \
            --warmup-iters 5 --parallel data --json)
        b=$("${run[@]}" "$hpml" train --synthetic --model $model --batch "$batch" --iters "$iters" \
            --warmup-iters 5 --pipeline 2 --micro-batches 8 --schedule 1f1b --json)
        echo "$a" >>"$d/t.$model"
        echo "$b" >>"$d/t.$model"
    done
    $py - "$d/t.$model" $model <<'PY'
import json, statistics, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
data = [r["images_per_second"] for r in rs[0::2]]
pipe = [r["images_per_second"] for r in rs[1::2]]
ratio = statistics.median(p / d for p, d in zip(pipe, data))
print(f"| {sys.argv[2]} | {statistics.median(data):.0f} | {statistics.median(pipe):.0f} | {ratio:.2f} |")
PY
done
