#!/usr/bin/env bash
# Malformed model specs and options: exit status 2 and a message naming the column and
# what was expected, on every rank count (no hang).
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
exit $fail
