#!/usr/bin/env bash
# The array outputs as NumPy and scikit-learn take them: labels, predictions and other
# vectors have shape (n,) (adjusted_rand_score and accuracy_score accept them as they are),
# a fit's --pred-out and a --predict of the saved model write the same file, and every CSV
# output starts with one header line naming its columns, its values those of the .npy.
# Env (from tests/run.sh): HPML, MPIRUN, MPI.
set -u
py=/usr/bin/python3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
run() { # what args... (2 ranks)
    local what=$1
    shift
    $MPIRUN -np 2 "$HPML" "$@" >"$d/$what.out" 2>"$d/$what.err" ||
        bad "$what: hpml $*: $(head -3 "$d/$what.err")"
}

$py - "$d" <<'EOF' || exit 1
import sys
import numpy as np
from sklearn.datasets import make_blobs
d = sys.argv[1]
X, y = make_blobs(n_samples=61, centers=3, n_features=4, random_state=3)
np.save(f"{d}/X.npy", X)
np.save(f"{d}/y.npy", y.astype(np.int64))                    # 1-D, as scikit-learn's
np.save(f"{d}/t.npy", X @ [1.0, -2.0, 0.5, 3.0] + 0.25)      # one target, 1-D
np.save(f"{d}/T.npy", np.c_[X[:, 0] - X[:, 1], X[:, 2] + 1])  # two targets
np.save(f"{d}/im.npy", np.random.default_rng(0).random((9, 784)).astype(np.float32))
EOF

for ext in npy csv; do
    run km.$ext kmeans --data "$d/X.npy" -k 3 --dtype f64 --out "$d/km" --labels "$d/km.labels.$ext"
    run knn.$ext knn --data "$d/X.npy" --labels "$d/y.npy" -k 3 --pred-out "$d/knn.pred.$ext"
    run lr1.$ext linreg --data "$d/X.npy" --target "$d/t.npy" --out "$d/lr1" \
        --pred-out "$d/lr1.pred.$ext"
    run lr2.$ext linreg --data "$d/X.npy" --target "$d/T.npy" --pred-out "$d/lr2.pred.$ext"
    run log.$ext logreg --data "$d/X.npy" --target "$d/y.npy" --out "$d/log" \
        --pred-out "$d/log.pred.$ext" --proba-out "$d/log.proba.$ext"
    run pca.$ext pca --data "$d/X.npy" -k 2 --out "$d/pca" --transform-out "$d/pca.t.$ext"
done
# --predict of a saved model writes what the fit wrote, byte for byte.
run lr1.predict linreg --predict "$d/lr1" --data "$d/X.npy" --pred-out "$d/lr1.again.npy"
cmp -s "$d/lr1.pred.npy" "$d/lr1.again.npy" || bad "linreg --predict differs from the fit's"
run log.predict logreg --predict "$d/log" --data "$d/X.npy" --pred-out "$d/log.again.npy"
cmp -s "$d/log.pred.npy" "$d/log.again.npy" || bad "logreg --predict differs from the fit's"
run km.predict kmeans --data "$d/X.npy" --predict "$d/km.centroids.npy" --labels "$d/km.again.npy"
cmp -s "$d/km.labels.npy" "$d/km.again.npy" || bad "kmeans --predict differs from the fit's"
# hpml predict (the nn model), with a tiny model trained here.
"$HPML" train --epochs 1 --train-limit 300 --test-limit 50 --save "$d/m.hpml" --no-progress \
    >/dev/null 2>"$d/train.err" || bad "train: $(head -3 "$d/train.err")"
for ext in npy csv; do
    run nn.$ext predict -f "$d/m.hpml" -i "$d/im.npy" -o "$d/nn.pred.$ext"
done
# A CSV output is an input hpml reads back (its header is skipped).
run readback kmeans --data "$d/pca.t.csv" -k 2 --json

$py - "$d" <<'EOF' || fail=1
import csv, sys
import numpy as np
from sklearn.metrics import accuracy_score, adjusted_rand_score
d = sys.argv[1]
bad = 0
def check(name, shape, header):
    global bad
    a = np.load(f"{d}/{name}.npy")
    if a.shape != shape:
        print(f"{name}.npy: shape {a.shape}, expected {shape}"); bad = 1
    with open(f"{d}/{name}.csv") as f:
        rows = list(csv.reader(f))
    if rows[0] != header:
        print(f"{name}.csv: header {rows[0][:6]}, expected {header[:6]}"); bad = 1
    c = np.array(rows[1:], dtype=float)
    if c.shape[0] != shape[0] or not np.array_equal(c.reshape(a.shape), a):
        print(f"{name}.csv: values differ from {name}.npy"); bad = 1
    return a
X, y = np.load(f"{d}/X.npy"), np.load(f"{d}/y.npy")
n = len(y)
L = check("km.labels", (n,), ["label"])
if adjusted_rand_score(y, L) != 1.0:
    print(f"kmeans labels: adjusted_rand_score {adjusted_rand_score(y, L)}"); bad = 1
if accuracy_score(y, check("knn.pred", (n,), ["prediction"])) < 0.99:
    print("knn predictions: accuracy below 0.99"); bad = 1
check("lr1.pred", (n,), ["prediction"])
check("lr2.pred", (n, 2), ["prediction0", "prediction1"])
if accuracy_score(y, check("log.pred", (n,), ["prediction"])) < 0.99:
    print("logreg predictions: accuracy below 0.99"); bad = 1
check("log.proba", (n, 3), ["p0", "p1", "p2"])
check("pca.t", (n, 2), ["pc0", "pc1"])
check("nn.pred", (9,), ["label"])
for name, shape in [("km.centroids", (3, 4)), ("lr1.coef", (4,)), ("lr1.intercept", (1,)),
                    ("log.coef", (3, 4)), ("log.intercept", (3,)), ("log.classes", (3,)),
                    ("pca.components", (2, 4)), ("pca.explained_variance", (2,)),
                    ("pca.explained_variance_ratio", (2,)), ("pca.singular_values", (2,)),
                    ("pca.mean", (4,))]:
    s = np.load(f"{d}/{name}.npy").shape
    if s != shape:
        print(f"{name}.npy: shape {s}, expected {shape}"); bad = 1
sys.exit(bad)
EOF
# train --metrics step lines: the loss of the step over all ranks' samples, so 2 ranks
# report the loss of 1 rank running the same global batches (rank 0's share alone differs).
"$HPML" train --epochs 1 --train-limit 256 --test-limit 10 --batch 64 --metrics "$d/m1.jsonl" \
    --metrics-every 1 --no-progress >/dev/null 2>"$d/m1.err" || bad "train: $(head -3 "$d/m1.err")"
run metrics2 train --epochs 1 --train-limit 256 --test-limit 10 --batch 64 \
    --metrics "$d/m2.jsonl" --metrics-every 1 --no-progress
$py - "$d" <<'EOF' || bad "--metrics step losses on 2 ranks differ from 1 rank's"
import json, sys
d = sys.argv[1]
steps = [[json.loads(l)["loss"] for l in open(f"{d}/m{n}.jsonl") if '"step"' in l] for n in (1, 2)]
print(steps)
sys.exit(len(steps[0]) != 3 or any(abs(a - b) > 1e-4 * (1 + abs(a)) for a, b in zip(*steps)))
EOF
[ $fail -eq 0 ] && echo "outputs: vectors 1-D, --predict equals the fit, CSV headers, --metrics losses of all ranks: all checks passed"
exit $fail
