#!/usr/bin/env bash
# hpml export / import / train --init-from against NumPy (docs/models.md): a NumPy forward
# pass over the exported arrays (tests/cli/export_model.py) matches hpml predict to 1e-5
# for an MLP and a convolutional preset; export then import gives the model file back byte
# for byte; an .npz NumPy wrote (stored, deflate with ZIP64 extra fields, a bare
# state_dict) with a changed weight is picked up by import, predict and train --init-from;
# broken or mismatched files give one clear line and exit 1.
# Env (from tests/run.sh): HPML, MPIRUN.
# hpml-test: timeout=240
set -u
: "${HPML:?}" "${MPIRUN:?}"
export OPENBLAS_NUM_THREADS=1
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { "$@" >"$tmp/out" 2>"$tmp/err" </dev/null || bad "$*: $(head -3 "$tmp/err")"; }
# fails_with PATTERN CMD ARGS...: exit 1 and one "hpml CMD:" line holding PATTERN.
fails_with() {
    local pat=$1 cmd=$2
    shift
    "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$?
    [ $rc -eq 1 ] || bad "$*: exit $rc, expected 1: $(head -3 "$tmp/err")"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^hpml $cmd: .*$pat" "$tmp/err" ||
        bad "$*: expected one 'hpml $cmd: ...$pat' line, got: $(head -3 "$tmp/err")"
}
same() { cmp -s "$1" "$2" || bad "$1 and $2 differ"; }

$PY -c "import numpy as np; np.save('$tmp/im.npy', \
np.random.default_rng(1).random((64, 784)).astype(np.float32))"
ok "$HPML" train --epochs 1 --train-limit 300 --test-limit 50 --save "$tmp/mlp.hpml" \
    --no-progress
ok "$HPML" train --model small-cnn --epochs 1 --train-limit 200 --test-limit 50 \
    --save "$tmp/cnn.hpml" --no-progress
for m in mlp cnn; do
    ok "$HPML" export --model-file "$tmp/$m.hpml" --out "$tmp/$m.npz"
    ok "$HPML" predict -f "$tmp/$m.hpml" --images "$tmp/im.npy" --proba "$tmp/$m.p.npy" \
        -o "$tmp/x.npy"
    # predict reads the .npz itself, with the same parameters: the same bytes.
    ok "$HPML" predict -f "$tmp/$m.npz" --images "$tmp/im.npy" --proba "$tmp/$m.pz.npy" \
        -o "$tmp/x.npy"
    same "$tmp/$m.p.npy" "$tmp/$m.pz.npy"
    # export, import: the model file back, byte for byte.
    ok "$HPML" import --npz "$tmp/$m.npz" --model-file "$tmp/$m.back.hpml"
    same "$tmp/$m.hpml" "$tmp/$m.back.hpml"
done
# NumPy's forward passes, and NumPy's own archives with 0.bias + 0.5 (stored; deflate,
# whose members carry ZIP64 extra fields; a bare state_dict), and broken ones.
mkdir "$tmp/bad"
b=$tmp/bad
ok $PY "$HERE/export_model.py" forward "$tmp/mlp.npz" "$tmp/im.npy" "$tmp/mlp.np.npy" \
    + forward "$tmp/cnn.npz" "$tmp/im.npy" "$tmp/cnn.np.npy" \
    + perturb "$tmp/cnn.npz" "$tmp/stored.npz" stored \
    + perturb "$tmp/cnn.npz" "$tmp/deflate.npz" deflate \
    + perturb "$tmp/cnn.npz" "$tmp/statedict.npz" statedict + bad "$tmp/mlp.npz" "$b"
fails_with "has no hpml_spec" import --npz "$tmp/statedict.npz" --model-file "$tmp/o.hpml"
mean=$($PY -c "import numpy as np; z = np.load('$tmp/cnn.npz'); \
print(repr(float(z['hpml_mean'])), repr(float(z['hpml_std'])))")
ok "$HPML" import --npz "$tmp/statedict.npz" --model-file "$tmp/statedict.hpml" \
    --model small-cnn --input-shape 1x28x28 --mean "${mean% *}" --std "${mean#* }"
checks=(close "$tmp/mlp.p.npy" "$tmp/mlp.np.npy" + close "$tmp/cnn.p.npy" "$tmp/cnn.np.npy")
for kind in stored deflate statedict; do
    [ $kind = statedict ] || ok "$HPML" import --npz "$tmp/$kind.npz" --model-file "$tmp/$kind.hpml"
    ok "$HPML" predict -f "$tmp/$kind.hpml" --images "$tmp/im.npy" --proba "$tmp/$kind.p.npy" \
        -o "$tmp/x.npy"
    checks+=(+ forward "$tmp/deflate.npz" "$tmp/im.npy" "$tmp/$kind.np.npy"
        + close "$tmp/$kind.p.npy" "$tmp/$kind.np.npy" + differ "$tmp/$kind.p.npy" "$tmp/cnn.p.npy")
done
$PY "$HERE/export_model.py" "${checks[@]}" || bad "NumPy's forward passes disagree"

# train --init-from on 2 ranks with --lr 0: the saved model is the initial one, whatever
# the run's own normalisation (the file's is kept); from a bare state_dict with --model.
ok $MPIRUN -np 2 "$HPML" train --model small-cnn --epochs 1 --train-limit 200 --test-limit 50 \
    --lr 0 --momentum 0 --init-from "$tmp/deflate.npz" --save "$tmp/init.hpml" --no-progress
same "$tmp/deflate.hpml" "$tmp/init.hpml"
ok "$HPML" train --epochs 1 --train-limit 300 --test-limit 50 --lr 0 --momentum 0 \
    --init-from "$tmp/mlp.npz" --save "$tmp/init2.hpml" --no-progress
same "$tmp/mlp.hpml" "$tmp/init2.hpml"
fails_with "holds the model" train --epochs 1 --train-limit 100 --init-from "$tmp/cnn.npz"
fails_with "array '3.weight' is not a parameter of the model 'dense 512" train --epochs 1 \
    --train-limit 100 --init-from "$tmp/statedict.npz"

# Broken and mismatched files: one line each.
fails_with "no end-of-central-directory" import --npz "$b/trunc.npz" --model-file "$tmp/o.hpml"
fails_with "'0.weight' has shape (512, 783), the model" import --npz "$b/shape.npz" -f "$tmp/o.hpml"
fails_with "no array '0.bias' (512,)" import --npz "$b/missing.npz" -f "$tmp/o.hpml"
fails_with "array 'extra' is not a parameter" import --npz "$b/extra.npz" -f "$tmp/o.hpml"
fails_with "'0.weight': row 1 column 2 is NaN" import --npz "$b/nan.npz" -f "$tmp/o.hpml"
fails_with "zip method 12" import --npz "$b/bzip.npz" -f "$tmp/o.hpml"
fails_with "does not start with a zip header" import --npz "$tmp/im.npy" -f "$tmp/o.hpml"
fails_with "not a parameter of the model 'dense 10'" predict -f "$b/spec.npz" --images "$tmp/im.npy"
[ ! -e "$tmp/o.hpml" ] && [ ! -e "$tmp/o.npz" ] || bad "a failed run left an output file"
ls "$tmp" "$b" | grep -q '\.tmp\.' && bad "a temporary file was left behind"

[ $fails -eq 0 ] && echo "export: all checks passed"
exit $((fails > 0))
