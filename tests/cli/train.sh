#!/usr/bin/env bash
# hpml train on a small Fashion-MNIST subset across 2 ranks reaches a fixed accuracy
# within a loose time budget; the saved model is loadable by hpml eval / hpml predict and
# gives the same accuracy (so the model gathered from the hybrid layout's ranks is the
# one evaluated); --json prints a parsable summary; the header gives the batch per rank;
# the split layers' exchanges through shared memory and through messages train one model.
# A global batch smaller than the ranks trains the same model as one rank (no hang).
# hpml-test: timeout=240
set -eu
: "${HPML:?}" "${MPIRUN:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
t0=$(date +%s)
$MPIRUN -np 2 "$HPML" train --model "dense 128 relu | dense 10" --epochs 4 --batch 64 \
    --train-limit 10000 --test-limit 2000 --lr 0.05 --save "$tmp/m.hpml" --json --no-progress \
    >"$tmp/out.json"
t1=$(date +%s)
cat "$tmp/out.json"
acc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$tmp/out.json")
echo "test accuracy $acc in $((t1 - t0)) s"
python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.78 else 1)" || { echo "accuracy $acc < 0.78"; exit 1; }
# 32 samples per rank, a first dense layer of 784 inputs: auto picks the hybrid layout,
# with both layers split (2*32*10 floats of the output layer's partial sums and their
# gradients exchanged per rank and step, against 32*128 of activations plus its 1290
# parameters with one layer split)
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); p=(j["parallel"], j["split_layers"]); sys.exit(0 if p == ("hybrid", 2) else f"layout {p}")' "$tmp/out.json"
[ $((t1 - t0)) -le 180 ] || { echo "took $((t1 - t0)) s (budget 180 s)"; exit 1; }

# eval over the same 2000 test rows gives the same accuracy
$MPIRUN -np 2 "$HPML" eval --model-file "$tmp/m.hpml" --limit 2000 --json >"$tmp/eval.json"
cat "$tmp/eval.json"
python3 - "$tmp/out.json" "$tmp/eval.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["test_accuracy"]; b = json.load(open(sys.argv[2]))["accuracy"]
sys.exit(0 if abs(a - b) < 1e-9 else f"train reported {a}, eval {b}")
PY
# predict: 20 labels, one per line, all in 0..9
"$HPML" predict --model-file "$tmp/m.hpml" \
    --images /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz --limit 20 >"$tmp/pred.txt"
[ "$(wc -l <"$tmp/pred.txt")" -eq 20 ]
grep -qvE '^[0-9]$' "$tmp/pred.txt" && { echo "bad prediction line"; exit 1; }
# --shard-data: each rank loads only its block of the training rows
$MPIRUN -np 2 "$HPML" train --model "dense 128 relu | dense 10" --epochs 2 --batch 64 \
    --train-limit 6000 --test-limit 1000 --shard-data --json --no-progress >"$tmp/shard.json"
cat "$tmp/shard.json"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["test_accuracy"] >= 0.7 and j["parallel"] == "data" else f"sharded: {j}")' "$tmp/shard.json"
# Two layers split on one node exchange through shared memory (the info log says so);
# with every rank its own node (HPML_RANKS_PER_NODE=1) through messages: the same model
for rpn in 0 1; do
    HPML_LOG_LEVEL=info HPML_RANKS_PER_NODE=$rpn $MPIRUN -np 2 "$HPML" train \
        --model "dense 64 relu | dense 32 relu | dense 10" --split-layers 2 --epochs 1 \
        --batch 64 --train-limit 2000 --test-limit 100 --no-progress --save "$tmp/rpn$rpn.hpml" \
        >/dev/null 2>"$tmp/rpn$rpn.log"
done
want=("through shared memory" "through messages")
for rpn in 0 1; do
    [ "$(grep -c "two layers split, exchanges.*${want[rpn]}" "$tmp/rpn$rpn.log")" -eq 2 ] ||
        { echo "HPML_RANKS_PER_NODE=$rpn: not ${want[rpn]}:"; cat "$tmp/rpn$rpn.log"; exit 1; }
done
cmp "$tmp/rpn0.hpml" "$tmp/rpn1.hpml" || { echo "shared memory and messages trained different models"; exit 1; }
# The header gives each rank's share of a batch that does not divide: 3 ranks of 64
$MPIRUN -np 3 "$HPML" train --model "dense 16 relu | dense 10" --epochs 1 --batch 64 \
    --train-limit 300 --test-limit 100 --no-progress >"$tmp/three.txt"
grep -q "global batch 64 (21-22 per rank)" "$tmp/three.txt" ||
    { echo "header: $(grep 'global batch' "$tmp/three.txt")"; exit 1; }
# A global batch smaller than the ranks: one rank has no sample in every step, and its
# gradient buckets must still meet the others' (they hung before). The model equals one
# rank's on the same global batches; overlapped and not, f32 and bf16 gradients.
for extra in "" "--no-overlap" "--grad-dtype bf16"; do
    for np in 1 4; do
        # shellcheck disable=SC2086 # extra is a list of options
        timeout -k 5 60 $MPIRUN -np $np "$HPML" train --parallel data --model "dense 16 relu | dense 10" \
            --batch 3 --epochs 1 --train-limit 30 --test-limit 10 --no-progress $extra \
            --save "$tmp/small$np.hpml" >"$tmp/small$np.txt" 2>&1 ||
            { echo "batch 3 on $np ranks $extra: exit $?"; tail -3 "$tmp/small$np.txt"; exit 1; }
    done
    "$HPML" export --model-file "$tmp/small1.hpml" --out "$tmp/small1.npz" >/dev/null
    "$HPML" export --model-file "$tmp/small4.hpml" --out "$tmp/small4.npz" >/dev/null
    /usr/bin/python3 - "$tmp/small1.npz" "$tmp/small4.npz" "$extra" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
tol = 1e-2 if "bf16" in sys.argv[3] else 1e-5
for k in a.files:
    if k.endswith(("weight", "bias")) and not np.allclose(a[k], b[k], rtol=tol, atol=tol):
        sys.exit(f"batch 3 {sys.argv[3]}: {k} differs between 1 and 4 ranks")
PY
done
echo ok
