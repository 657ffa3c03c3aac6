#!/usr/bin/env bash
# `hpml knn` matches scikit-learn's brute-force NearestNeighbors / KNeighborsClassifier
# (indices, distances, predictions, accuracy) at 1, 2 and 3 ranks with row counts that do
# not divide evenly, and with every SIMD scan and GEMM precision; exact ties go to the lower index; bad input gives a one-line error
# and a non-zero exit on every rank.
# Env (from tests/run.sh): HPML, MPIRUN, MPI, HPML_TEST_REPO.
set -u
repo=${HPML_TEST_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
ref=$repo/tests/ref/knn_ref.py
py=/usr/bin/python3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
$py "$ref" gen "$d" || exit 1

# At 1, 2 and 3 ranks, then at 2 ranks with the AVX2 and the portable scan and with the
# DGEMM path (run tag: ranks, then the setting's value).
runs="1 2 3 2:HPML_SIMD=avx2 2:HPML_SIMD=portable 2:HPML_KNN_DGEMM=1"
tags=
for run in $runs; do
    n=${run%%:*} envs=
    [ "$run" != "$n" ] && envs=${run#*:}
    tag=$n${envs##*=}
    tags="$tags $tag"
    out=$(env $envs $MPIRUN -np $n "$HPML" knn --data "$d/R.npy" --query "$d/Q.npy" -k 5 \
        --labels "$d/l.npy" --query-labels "$d/ql.npy" --out "$d/np$tag" --json) ||
        { echo "FAIL: knn run $run exited $?"; fail=1; continue; }
    echo "$out"
    $py -c 'import json,sys; print(json.loads(sys.argv[1])["accuracy"])' "$out" >"$d/np$tag.acc"
    env $envs $MPIRUN -np $n "$HPML" knn --data "$d/Rt.npy" --query "$d/Qt.npy" -k 9 \
        --out "$d/np$tag.t" >/dev/null || { echo "FAIL: ties run $run"; fail=1; }
    mv "$d/np$tag.t.indices.npy" "$d/np$tag.ties.npy" 2>/dev/null
    mv "$d/np$tag.t.distances.npy" "$d/np$tag.tiesd.npy" 2>/dev/null
done
$py "$ref" check "$d" $tags || fail=1

# Self-query (no --query): each row is its own nearest neighbour at distance 0.
$MPIRUN -np 2 "$HPML" knn --data "$d/R.npy" -k 1 --out "$d/self.npy" >/dev/null || fail=1
$py -c 'import numpy as np,sys; i=np.load(sys.argv[1]); sys.exit(0 if (i.ravel()==np.arange(611)).all() else 1)' \
    "$d/self.npy" || { echo "FAIL: self-query"; fail=1; }

# Errors: one clear line, non-zero exit, no hang.
expect_error() { # pattern args...
    local pat=$1 err rc
    shift
    err=$(timeout 60 $MPIRUN -np 2 "$HPML" knn "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q -- "$pat" <<<"$err"; then
        echo "FAIL: knn $* (exit $rc) should fail with '$pat'; got:"; echo "$err"; fail=1
    fi
}
expect_error "no-such.npy" --data "$d/no-such.npy"
expect_error "has 2 columns but" --data "$d/R.npy" --query "$d/Qt.npy"
expect_error "larger than the 61 reference rows" --data "$d/Rt.npy" -k 62
expect_error "needs --labels" --data "$d/R.npy" --query-labels "$d/ql.npy"
expect_error "has 67 rows but" --data "$d/R.npy" --labels "$d/ql.npy"
expect_error "-k must be" --data "$d/R.npy" -k zero
[ $fail -eq 0 ] && echo "knn: all checks passed"
exit $fail
