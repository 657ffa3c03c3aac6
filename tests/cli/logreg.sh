#!/usr/bin/env bash
# `hpml logreg` matches scikit-learn's LogisticRegression(solver='lbfgs') (multinomial,
# binary, binary softmax; coefficients, objective, predictions, accuracy, log-loss,
# probabilities) at 1, 2 and 3 ranks with uneven row blocks, and with 70 features (several
# row tiles per evaluation) at 1 and 2; CSV with --target-col;
# bad input gives a one-line error on every rank.
# Env (from tests/run.sh): HPML, MPIRUN, MPI, HPML_TEST_REPO.
set -u
repo=${HPML_TEST_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
ref=$repo/tests/ref/logreg_ref.py
py=/usr/bin/python3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
$py "$ref" gen "$d" || exit 1

for n in 1 2 3; do
    for m in "multi y" "bin yb" "binsoft yb --multinomial"; do
        set -- $m
        name=$1 y=$2
        shift 2
        $MPIRUN -np $n "$HPML" logreg --data "$d/X.npy" --target "$d/$y.npy" --C 0.5 \
            --tol 1e-10 --ftol 0 --max-iter 1000 "$@" --out "$d/np$n.$name" \
            --pred-out "$d/np$n.$name.pred.npy" --proba-out "$d/np$n.$name.proba.npy" --json \
            >"$d/np$n.$name.json" || { echo "FAIL: logreg $name at $n ranks"; fail=1; }
    done
done
# 70 features: several row tiles per evaluation on each rank
for n in 1 2; do
    $MPIRUN -np $n "$HPML" logreg --data "$d/Xw.npy" --target "$d/yw.npy" --C 0.5 --tol 1e-10 \
        --ftol 0 --max-iter 1000 --out "$d/np$n.wide" --pred-out "$d/np$n.wide.pred.npy" \
        --proba-out "$d/np$n.wide.proba.npy" --json >"$d/np$n.wide.json" ||
        { echo "FAIL: logreg wide at $n ranks"; fail=1; }
done
cat "$d/np3.multi.json"
$MPIRUN -np 3 "$HPML" logreg --data "$d/Xy.csv" --target-col -1 --C 0.5 --tol 1e-10 --ftol 0 \
    --max-iter 1000 --json >"$d/np3.csv.json" || { echo "FAIL: csv run"; fail=1; }
$MPIRUN -np 2 "$HPML" logreg --data "$d/X.npy" --target "$d/y.npy" --C 0.5 --verbose \
    >/dev/null 2>"$d/progress" || fail=1
grep -qE '^\[logreg\] iter +1 +objective' "$d/progress" || { echo "FAIL: no progress lines"; fail=1; }
$py "$ref" check "$d" 1 2 3 || fail=1

# --predict PREFIX reuses the model --out PREFIX saved (binary, binary softmax, multinomial):
# the predictions, probabilities, accuracy and log-loss of the fit's run (which the check
# above compares with scikit-learn), bit for bit.
for n in 1 3; do
    for name in multi bin binsoft; do
        p=$d/np$n.$name y=y
        [ $name = multi ] || y=yb
        $MPIRUN -np $n "$HPML" logreg --predict "$p" --data "$d/X.npy" --target "$d/$y.npy" \
            --pred-out "$p.saved.pred.npy" --proba-out "$p.saved.proba.npy" --json \
            >"$p.saved.json" || { echo "FAIL: --predict $name at $n ranks"; fail=1; }
        cmp -s "$p.pred.npy" "$p.saved.pred.npy" && cmp -s "$p.proba.npy" "$p.saved.proba.npy" ||
            { echo "FAIL: --predict $name at $n ranks: output differs from the fit's"; fail=1; }
        $py -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(
            (a["accuracy"],a["log_loss"]) != (b["accuracy"],b["log_loss"]))' \
            "$p.json" "$p.saved.json" || { echo "FAIL: --predict $name at $n ranks: score"; fail=1; }
    done
done

expect_error() { # pattern args...
    local pat=$1 err rc
    shift
    err=$(timeout 60 $MPIRUN -np 3 "$HPML" logreg "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q -- "$pat" <<<"$err"; then
        echo "FAIL: logreg $* (exit $rc) should fail with '$pat'; got:"; echo "$err"; fail=1
    elif [ "$(grep -c "hpml logreg:" <<<"$err")" -ne 1 ]; then
        echo "FAIL: logreg $*: expected exactly one error line, got:"; echo "$err"; fail=1
    fi
}
$py -c 'import numpy as np,sys; np.save(sys.argv[1], np.full((241,1), 2.0)); np.save(sys.argv[2], np.load(sys.argv[3]) + 0.5)' \
    "$d/one.npy" "$d/frac.npy" "$d/y.npy"
expect_error "only one class" --data "$d/X.npy" --target "$d/one.npy"
expect_error "is not an integer" --data "$d/X.npy" --target "$d/frac.npy"
expect_error "--C must be" --data "$d/X.npy" --target "$d/y.npy" --C 0
expect_error "no-such.npy" --data "$d/no-such.npy" --target "$d/y.npy"
expect_error "class labels must be one column" --data "$d/X.npy" --target "$d/X.npy"
expect_error "y.npy has 1 feature columns but the model has 5 features" \
    --predict "$d/np1.multi" --data "$d/y.npy"
expect_error "model file .*no-such.coef.npy" --predict "$d/no-such" --data "$d/X.npy"
expect_error "--C goes with a fit, not with --predict" --predict "$d/np1.multi" --data "$d/X.npy" --C 2
[ $fail -eq 0 ] && echo "logreg: all checks passed"
exit $fail
