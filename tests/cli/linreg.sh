#!/usr/bin/env bash
# `hpml linreg` matches scikit-learn's LinearRegression / Ridge (coefficients, intercepts,
# R^2, predictions; two targets; --target-col; no intercept) at 1, 2 and 3 ranks with
# uneven row blocks; singular X'X and bad input give a one-line error on every rank.
# Env (from tests/run.sh): HPML, MPIRUN, MPI, HPML_TEST_REPO.
set -u
repo=${HPML_TEST_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
ref=$repo/tests/ref/linreg_ref.py
py=/usr/bin/python3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
$py "$ref" gen "$d" || exit 1

for n in 1 2 3; do
    p=$d/np$n
    $MPIRUN -np $n "$HPML" linreg --data "$d/X.npy" --target "$d/Y.npy" --out "$p.ols" \
        --test "$d/Xt.npy" --test-target "$d/Yt.npy" --pred-out "$p.ols.pred.npy" --json \
        >"$p.ols.json" || { echo "FAIL: ols at $n ranks"; fail=1; }
    $MPIRUN -np $n "$HPML" linreg --data "$d/X.npy" --target "$d/y0.npy" --out "$p.ridge.npy" \
        --alpha 7.5 --json >"$p.ridge.json" || { echo "FAIL: ridge at $n ranks"; fail=1; }
    $MPIRUN -np $n "$HPML" linreg --data "$d/XY.npy" --target-col 2 --alpha 7.5 \
        --test "$d/XYt.npy" --json >"$p.col.json" || { echo "FAIL: target-col at $n ranks"; fail=1; }
    $MPIRUN -np $n "$HPML" linreg --data "$d/X.npy" --target "$d/y1.npy" --no-intercept \
        --json >"$p.noint.json" || { echo "FAIL: no-intercept at $n ranks"; fail=1; }
done
cat "$d/np3.ols.json"
$MPIRUN -np 3 "$HPML" linreg --data "$d/X.npy" --target "$d/Y.npy" || fail=1
$py "$ref" check "$d" 1 2 3 || fail=1

# --predict PREFIX reuses the model --out PREFIX saved: the same predictions and R^2 as the
# in-run --test path, bit for bit, and so as scikit-learn (checked again here).
for n in 1 3; do
    p=$d/np$n
    $MPIRUN -np $n "$HPML" linreg --predict "$p.ols" --data "$d/Xt.npy" --target "$d/Yt.npy" \
        --pred-out "$p.saved.pred.npy" --json >"$p.saved.json" ||
        { echo "FAIL: --predict at $n ranks"; fail=1; }
    cmp -s "$p.ols.pred.npy" "$p.saved.pred.npy" ||
        { echo "FAIL: --predict at $n ranks: predictions differ from --test's"; fail=1; }
done
$MPIRUN -np 2 "$HPML" linreg --predict "$d/np1.ols" --data "$d/Xt.npy" >/dev/null ||
    { echo "FAIL: --predict without a target"; fail=1; }
$py - "$d" <<'PYEOF' || fail=1
import json, sys
import numpy as np
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score
d = sys.argv[1]
X, Y, Xt, Yt = (np.load(f"{d}/{f}.npy") for f in ("X", "Y", "Xt", "Yt"))
sk = LinearRegression().fit(X, Y)
bad = 0
for n in (1, 3):
    s, t = json.load(open(f"{d}/np{n}.saved.json")), json.load(open(f"{d}/np{n}.ols.json"))
    pred = np.load(f"{d}/np{n}.saved.pred.npy")
    if s["r2"] != t["r2_test"]:
        print(f"np{n} --predict r2 {s['r2']!r} != --test r2 {t['r2_test']!r}"); bad = 1
    if abs(s["r2"] - r2_score(Yt, sk.predict(Xt))) > 1e-12:
        print(f"np{n} --predict r2 differs from sklearn"); bad = 1
    if abs(pred - sk.predict(Xt)).max() > 1e-10:
        print(f"np{n} --predict predictions differ from sklearn"); bad = 1
sys.exit(bad)
PYEOF

expect_error() { # pattern args...
    local pat=$1 err rc
    shift
    err=$(timeout 60 $MPIRUN -np 3 "$HPML" linreg "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q -- "$pat" <<<"$err"; then
        echo "FAIL: linreg $* (exit $rc) should fail with '$pat'; got:"; echo "$err"; fail=1
    elif [ "$(grep -c "hpml linreg:" <<<"$err")" -ne 1 ]; then
        echo "FAIL: linreg $*: expected exactly one error line, got:"; echo "$err"; fail=1
    fi
}
expect_error "X'X is singular: feature column 4 is constant; use --alpha" \
    --data "$d/Xconst.npy" --target "$d/y0.npy"
expect_error "X'X is singular: feature column 3 is collinear" --data "$d/Xcol.npy" --target "$d/y0.npy"
expect_error "has 41 rows but" --data "$d/X.npy" --target "$d/Yt.npy"
expect_error "exactly one of --target FILE and --target-col" --data "$d/X.npy"
expect_error "out of range" --data "$d/X.npy" --target-col 6
expect_error "--alpha must be" --data "$d/X.npy" --target "$d/y0.npy" --alpha -1
expect_error "no-such.npy" --data "$d/X.npy" --target "$d/no-such.npy"
expect_error "feature columns but the model" --data "$d/X.npy" --target "$d/y0.npy" --test "$d/Y.npy"
expect_error "Y.npy has 2 feature columns but the model has 6 features" \
    --predict "$d/np1.ols" --data "$d/Y.npy"
expect_error "model file .*no-such.coef.npy" --predict "$d/no-such" --data "$d/Xt.npy"
expect_error "--alpha goes with a fit, not with --predict" \
    --predict "$d/np1.ols" --data "$d/Xt.npy" --alpha 1
timeout 60 $MPIRUN -np 3 "$HPML" linreg --predict "$d/np1.ols" --data "$d/Xt.npy" \
    --test "$d/Xt.npy" >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --predict with --test should be a usage error (exit 2)"; fail=1; }
$MPIRUN -np 2 "$HPML" linreg --data "$d/Xconst.npy" --target "$d/y0.npy" --alpha 0.5 >/dev/null ||
    { echo "FAIL: ridge should solve the singular system"; fail=1; }
[ $fail -eq 0 ] && echo "linreg: all checks passed"
exit $fail
