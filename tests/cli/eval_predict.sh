#!/usr/bin/env bash
# Bad input to `hpml eval` and `hpml predict`: one clear line, the right exit status (2
# usage, 1 failure), no MPI_Abort banner and no hang, at 1 and 2 ranks; options that
# conflict (--images without --labels, --data with --images) and stray arguments refused.
# Env (from tests/run.sh): HPML, MPIRUN.
# hpml-test: timeout=240
set -u
: "${HPML:?}" "${MPIRUN:?}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run NP CMD ARGS...: hpml on NP ranks (1: no launcher), stdout/stderr in $tmp/out, $tmp/err.
run() {
    local np=$1
    shift
    if [ "$np" = 1 ]; then
        timeout -k 5 120 "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    else
        timeout -k 5 120 $MPIRUN -np "$np" "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    fi
    rc=$?
}
# expect NP STATUS PATTERN CMD ARGS...: exit STATUS, exactly one "hpml CMD:" line holding
# PATTERN, no MPI_Abort.
expect() {
    local np=$1 want=$2 pat=$3 cmd=$4
    run "$np" "${@:4}"
    [ $rc -eq "$want" ] || bad "np=$np ${*:4}: exit $rc, expected $want: $(head -3 "$tmp/err")"
    [ "$(grep -c "^hpml $cmd:" "$tmp/err")" -eq 1 ] ||
        bad "np=$np ${*:4}: expected one 'hpml $cmd:' line: $(head -5 "$tmp/err")"
    grep -q -- "$pat" "$tmp/err" || bad "np=$np ${*:4}: no '$pat' in: $(head -3 "$tmp/err")"
    ! grep -qi "MPI_ABORT" "$tmp/err" || bad "np=$np ${*:4}: aborted the job"
}

# A small model, and images / labels that fit it.
"$HPML" train --epochs 1 --train-limit 600 --test-limit 100 --save "$tmp/m.hpml" \
    --no-progress >/dev/null 2>"$tmp/train.err" || {
    echo "FAIL: train: $(cat "$tmp/train.err")"
    exit 1
}
$PY - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
np.save(d + "/im.npy", rng.random((30, 784)).astype(np.float32))
np.save(d + "/lab.npy", rng.integers(0, 10, 30))
bad = rng.integers(0, 10, 30); bad[-1] = 12  # on the last rank's rows only
np.save(d + "/lab12.npy", bad)
np.save(d + "/im0.npy", np.zeros((0, 784), np.float32))
np.save(d + "/lab0.npy", np.zeros(0, np.int64))
np.save(d + "/small.npy", np.zeros((5, 4), np.float32))
EOF
m=$tmp/m.hpml
for np in 1 2; do
    expect $np 1 "cannot open" eval -f "$tmp/nope.hpml"
    expect $np 1 "not an hpml model" eval -f "$tmp/im.npy" --images "$tmp/im.npy" \
        --labels "$tmp/lab.npy"
    expect $np 1 "model expects 784" eval -f "$m" --images "$tmp/small.npy" \
        --labels "$tmp/lab.npy"
    expect $np 1 "label 12 is out of range" eval -f "$m" --images "$tmp/im.npy" \
        --labels "$tmp/lab12.npy"
    expect $np 1 "no rows" eval -f "$m" --images "$tmp/im0.npy" --labels "$tmp/lab0.npy"
    expect $np 2 "unexpected argument 'extra'" eval -f "$m" extra
    expect $np 2 "go together" eval -f "$m" --images "$tmp/im.npy"
    expect $np 2 "not both" eval -f "$m" --data /usr/share/datasets/fashion-mnist \
        --images "$tmp/im.npy" --labels "$tmp/lab.npy"
    expect $np 2 "'--batch' needs a value" eval -f "$m" --batch
    expect $np 2 "--limit must be" eval -f "$m" --limit 0
    expect $np 1 "cannot open" predict -f "$tmp/nope.hpml" -i "$tmp/im.npy"
    expect $np 1 "model expects 784" predict -f "$m" -i "$tmp/small.npy"
    expect $np 2 "unexpected argument 'extra'" predict -f "$m" -i "$tmp/im.npy" extra
    expect $np 2 "'-o' needs a value" predict -f "$m" -i "$tmp/im.npy" -o
done
for cmd in eval predict; do
    "$HPML" $cmd --help | grep -q -- "-h, --help" || bad "$cmd --help does not list -h, --help"
done
# The good paths still work: eval over the images, predict of the same rows.
run 2 eval -f "$m" --images "$tmp/im.npy" --labels "$tmp/lab.npy" --json
[ $rc -eq 0 ] && grep -q '"rows": 30' "$tmp/out" || bad "eval: exit $rc: $(cat "$tmp/err")"
run 1 predict -f "$m" -i "$tmp/im.npy" --limit 7
[ $rc -eq 0 ] && [ "$(grep -cE '^[0-9]$' "$tmp/out")" = 7 ] || bad "predict: exit $rc"
# An output named .CSV is CSV, as the readers take it (it used to get .npy bytes).
run 1 predict -f "$m" -i "$tmp/im.npy" --limit 7 -o "$tmp/pred.CSV"
[ $rc -eq 0 ] && [ "$(grep -cE '^[0-9]$' "$tmp/pred.CSV")" = 7 ] ||
    bad "predict -o pred.CSV: exit $rc, not 7 CSV lines: $(head -c 60 "$tmp/pred.CSV" | od -c | head -2)"
# --top-k and --proba: probabilities that sum to 1 per row, the top-k classes in order of
# them, the first the plain prediction; the same rows as pixels 0..255 in floats warn on
# eval and predict (the model was trained on 0..1), the 0..1 rows do not.
run 1 predict -f "$m" -i "$tmp/im.npy" -o "$tmp/top.npy" --top-k 3 --proba "$tmp/p.npy"
[ $rc -eq 0 ] && ! grep -q warning "$tmp/err" || bad "predict --top-k: exit $rc: $(cat "$tmp/err")"
run 1 predict -f "$m" -i "$tmp/im.npy" -o "$tmp/top1.npy"
# The rows split across ranks: the same files as one rank, and on stdout the same lines in
# row order, also when a rank has no row.
run 2 predict -f "$m" -i "$tmp/im.npy" -o "$tmp/top.2.npy" --top-k 3 --proba "$tmp/p.2.npy"
# (The GEMMs of other batch sizes may round the last bit of a probability differently.)
[ $rc -eq 0 ] && $PY -c "import sys, numpy as np; d = sys.argv[1]; \
sys.exit(not ((np.load(d + '/top.npy') == np.load(d + '/top.2.npy')).all() and \
np.allclose(np.load(d + '/p.npy'), np.load(d + '/p.2.npy'), rtol=0, atol=1e-6)))" "$tmp" ||
    bad "predict on 2 ranks wrote other files than on 1: exit $rc: $(head -3 "$tmp/err")"
run 1 predict -f "$m" -i "$tmp/im.npy" --limit 2 --top-k 2
cp "$tmp/out" "$tmp/out.1"
run 3 predict -f "$m" -i "$tmp/im.npy" --limit 2 --top-k 2
[ $rc -eq 0 ] && [ "$(wc -l <"$tmp/out")" = 2 ] && cmp -s "$tmp/out" "$tmp/out.1" ||
    bad "predict --limit 2 on 3 ranks: exit $rc: $(cat "$tmp/out" "$tmp/err" | head -5)"
$PY - "$tmp" <<'EOF2' || bad "predict --top-k/--proba disagree with the labels"
import sys, numpy as np
d = sys.argv[1]
top, p, one = np.load(d + "/top.npy"), np.load(d + "/p.npy"), np.load(d + "/top1.npy")
assert top.shape == (30, 3) and p.shape == (30, 10) and one.shape == (30,), (top.shape, p.shape)
assert np.allclose(p.sum(1), 1, atol=1e-5) and (p >= 0).all()
assert (top[:, 0] == one).all() and (top == np.argsort(-p, axis=1, kind="stable")[:, :3]).all()
EOF2
$PY -c "import numpy as np, sys; np.save(sys.argv[1] + '/im255.npy', np.load(sys.argv[1] + '/im.npy') * 255)" "$tmp"
run 2 eval -f "$m" --images "$tmp/im255.npy" --labels "$tmp/lab.npy" --json
[ $rc -eq 0 ] && grep -q "warning: .*im255.npy does not look like the training data" "$tmp/err" &&
    grep -q '"input_range_warning": true' "$tmp/out" || bad "eval of 0..255 floats: no warning: $(cat "$tmp/err")"
run 1 predict -f "$m" -i "$tmp/im255.npy" -o "$tmp/p255.npy"
[ $rc -eq 0 ] && grep -q "warning: .*im255.npy does not look" "$tmp/err" || bad "predict of 0..255 floats: no warning"
run 2 eval -f "$m" --images "$tmp/im.npy" --labels "$tmp/lab.npy"
! grep -q warning "$tmp/err" || bad "eval of 0..1 images warns: $(cat "$tmp/err")"
expect 1 1 "--top-k 11: the model has only 10 classes" predict -f "$m" -i "$tmp/im.npy" --top-k 11
# A failed predict leaves an existing output as it was.
echo keep >"$tmp/keep.csv"
run 1 predict -f "$tmp/nope.hpml" -i "$tmp/im.npy" -o "$tmp/keep.csv"
[ "$(cat "$tmp/keep.csv")" = keep ] || bad "failed predict changed its output file"
if [ $fails -gt 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo ok
