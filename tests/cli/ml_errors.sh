#!/usr/bin/env bash
# Errors the ML commands (kmeans, knn, pca, linreg, logreg) share or that once passed
# silently: a communicator that cannot be made (bad HPML_ALGO_*) is one line and exit 1 on
# every rank, never an MPI_Abort; kmeans --predict with --out FILE.npy (which would write
# nothing) is a usage error; --init FILE reports one run in JSON as in text; a missing
# model file is named once; PCA of data whose squares overflow is an error, not zeros;
# --help states the -v default.
# Env (from tests/run.sh): HPML, MPIRUN.
# hpml-test: timeout=240
set -u
: "${HPML:?}" "${MPIRUN:?}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() { # np args...: stdout/stderr in $tmp/out, $tmp/err, status in $rc
    local np=$1
    shift
    timeout -k 5 120 $MPIRUN -np "$np" "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
}
one_line() { # what cmd pattern: exactly one "hpml cmd:" line on stderr, holding pattern
    [ "$(grep -c "^hpml $2:" "$tmp/err")" -eq 1 ] && grep -q -- "$3" "$tmp/err" ||
        bad "$1: expected one 'hpml $2: ...$3' line: $(head -4 "$tmp/err")"
    ! grep -qi "MPI_ABORT" "$tmp/err" || bad "$1: aborted the job"
}

$PY - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 3))
np.save(d + "/X.npy", X)
np.save(d + "/y.npy", (X[:, 0] > 0).astype(np.int64))
np.save(d + "/t.npy", X @ [1.0, 2.0, 3.0])
np.save(d + "/big.npy", np.array([[1e300, 1.0], [-1e300, 2.0], [1e300, 3.0], [5.0, 4.0]]))
EOF

# A bad HPML_ALGO_ALLREDUCE: every ML command, 2 ranks.
for args in "kmeans -k 2" "knn -k 2" "pca -k 1" "linreg --target $tmp/t.npy" \
    "logreg --target $tmp/y.npy"; do
    cmd=${args%% *}
    # shellcheck disable=SC2086
    HPML_ALGO_ALLREDUCE=nosuch run 2 $args --data "$tmp/X.npy"
    [ $rc -eq 1 ] || bad "$cmd with a bad HPML_ALGO_ALLREDUCE: exit $rc, expected 1"
    one_line "$cmd with a bad HPML_ALGO_ALLREDUCE" "$cmd" "cannot create the communicator"
done

# kmeans: --predict writes no centroids, so --out FILE.npy is refused (it wrote nothing).
run 1 kmeans --data "$tmp/X.npy" -k 2 --out "$tmp/km"
[ $rc -eq 0 ] || bad "kmeans fit: exit $rc: $(head -3 "$tmp/err")"
run 2 kmeans --data "$tmp/X.npy" --predict "$tmp/km.centroids.npy" --out "$tmp/kp.npy"
[ $rc -eq 2 ] || bad "kmeans --predict --out FILE.npy: exit $rc, expected 2"
one_line "kmeans --predict --out FILE.npy" kmeans "writes no centroids"
run 2 kmeans --data "$tmp/X.npy" --predict "$tmp/km.centroids.npy" --out "$tmp/kp"
[ $rc -eq 0 ] && [ -f "$tmp/kp.labels.npy" ] || bad "kmeans --predict --out PREFIX: exit $rc"
# Given centroids make one run: JSON says so as the text does.
run 1 kmeans --data "$tmp/X.npy" --init "$tmp/km.centroids.npy" --n-init 5 --json
$PY -c "import json,sys; sys.exit(json.load(open('$tmp/out'))['n_init'] != 1)" ||
    bad "kmeans --init FILE --n-init 5: JSON n_init is not 1: $(cat "$tmp/out")"

# A missing model: the file named once, not "model file X: X: cannot open".
run 2 linreg --predict "$tmp/nomodel" --data "$tmp/X.npy"
[ $rc -eq 1 ] || bad "linreg --predict missing: exit $rc, expected 1"
one_line "linreg --predict missing" linreg "cannot open"
[ "$(grep -o "nomodel.coef.npy" "$tmp/err" | wc -l)" -eq 1 ] ||
    bad "linreg --predict missing: path repeated: $(cat "$tmp/err")"

# PCA whose covariance overflows: an error on every solver, not explained variances of 0.
for solver in full randomized; do
    run 2 pca --data "$tmp/big.npy" -k 1 --solver $solver
    [ $rc -eq 1 ] || bad "pca $solver overflow: exit $rc, expected 1: $(head -3 "$tmp/out")"
    one_line "pca $solver overflow" pca "overflows"
done

# --help tells the -v default (progress is on whenever stderr is a terminal).
for cmd in kmeans knn pca linreg logreg; do
    "$HPML" $cmd --help | grep -q -- "-v, --verbose .*only when stderr is a terminal" ||
        bad "$cmd --help does not give the -v default"
done

if [ $fails -gt 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo ok
