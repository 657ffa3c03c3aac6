#!/usr/bin/env bash
# Malformed model specs and options: exit status 2 and a message naming the column and
# what was expected, on every rank count (no hang). Bad options name the option; an
# unwritable --save or --checkpoint fails before training (one line, exit 1). A
# --parallel hybrid or --split-layers the model or data cannot take is a usage error
# naming the reason.
# hpml-test: timeout=120
set -u
: "${HPML:?}" "${MPIRUN:?}"
fail=0
expect() { # spec expected-substring
    local out rc
    out=$($MPIRUN -np 2 "$HPML" train --model "$1" --epochs 1 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 0 ] || ! grep -qF -- "$2" <<<"$out"; then
        echo "FAIL: spec '$1' (exit $rc): expected '$2' in:"; echo "$out" | head -5; fail=1
    else
        echo "ok: '$1' -> $(grep -m1 column <<<"$out")"
    fi
}
expect "conv 32 5y5 relu | dense 10" "column 9: expected a kernel size"
expect "dense 128 relu | dnse 10" "column 18: expected a layer"
expect "dense 128 relu |" "expected a layer after '|'"
expect "conv 8 5x5 relu | pool 2 | pool 2 | pool 2 | pool 2 | pool 2 | dense 10" "window"
expect "dense 10 sigmoid" "expected 'relu'"
expect "dropout 2 | dense 10" "probability"
out=$($MPIRUN -np 2 "$HPML" train --grad-dtype f64 2>&1 >/dev/null) && fail=1
grep -q "grad-dtype" <<<"$out" || { echo "FAIL: --grad-dtype f64 accepted"; fail=1; }
out=$($MPIRUN -np 1 "$HPML" train --model "dense 3" --epochs 1 --train-limit 100 --no-progress 2>&1 >/dev/null) && fail=1
grep -q "last layer should be 'dense 10'" <<<"$out" || { echo "FAIL: 3 outputs for 10 classes: $out"; fail=1; }
opt_error() { # expected-status expected-substring args...
    local want=$1 msg=$2 out rc
    shift 2
    out=$($MPIRUN -np 2 "$HPML" train --no-progress "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne "$want" ] || ! grep -qF -- "$msg" <<<"$out" || grep -qi "MPI_ABORT" <<<"$out"; then
        echo "FAIL: train $* (exit $rc, want $want): expected '$msg' in:"; echo "$out" | head -4; fail=1
    else
        echo "ok: $* -> $(grep -m1 'hpml train:' <<<"$out")"
    fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
opt_error 2 "option '--epochs' needs a value" --epochs
opt_error 2 "--lr must be a number >= 0 (got 'x')" --lr x
opt_error 2 "--max-steps must be an integer from 0 to" --max-steps -3
opt_error 2 "--momentum must be a number >= 0 and < 1 (got '5')" --momentum 5
opt_error 2 "--input must be CxHxW like 1x28x28 (got '1x28x28junk')" --synthetic --input 1x28x28junk
opt_error 2 "--checkpoint-every needs --checkpoint DIR" --checkpoint-every 3
opt_error 2 "--train-images and --train-labels go together" --train-images "$tmp/x.npy"
opt_error 2 "not both" --data "$tmp" --test-images a --test-labels b
opt_error 1 "--save $tmp: is a directory" --save "$tmp" --epochs 1
opt_error 1 "cannot create a file there" --save "$tmp/no/m.hpml" --epochs 1
opt_error 1 "cannot create the folder" --checkpoint "$tmp/no/ck" --epochs 1
opt_error 1 "--resume: checkpoint folder" --checkpoint "$tmp/none" --resume
opt_error 1 "cannot open" --data "$tmp/none" --epochs 1
opt_error 2 "--parallel must be auto, data or hybrid (got 'model')" --parallel model
opt_error 2 "--parallel hybrid: the hybrid layout splits a first 'dense' layer; this model starts with 'conv'" --parallel hybrid --model lenet
opt_error 2 "--parallel hybrid: the hybrid layout needs the whole training set on every rank" --parallel hybrid --shard-data
opt_error 2 "--parallel hybrid: the hybrid layout needs an output of the first layer per rank (it has 1, for 2 ranks)" --parallel hybrid --model "dense 1 relu | dense 10" --synthetic
opt_error 2 "--split-layers must be 1 or 2 (got '3')" --split-layers 3
opt_error 2 "--split-layers 2: splitting 2 layers needs a second 'dense' layer; this model's second layer is 'dropout'" --split-layers 2 --model "dense 64 relu | dropout 0.1 | dense 10" --synthetic
opt_error 2 "--split-layers 1: splitting layers is the hybrid layout, not the data-parallel one" --split-layers 1 --parallel data
opt_error 2 "--split-layers 1: the hybrid layout splits a first 'dense' layer; this model starts with 'conv'" --split-layers 1 --model lenet --synthetic
exit $fail
