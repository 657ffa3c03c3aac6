#!/usr/bin/env bash
# `hpml pca` matches scikit-learn: PCA(svd_solver='full') components with their signs
# (svd_flip), explained variance and ratio, singular values and transform; TruncatedSVD
# with --no-center; the randomized solver on wide low-rank data; at 1, 2 and 3 ranks with
# uneven row blocks, identical across rank counts; bad input gives a one-line error.
# Env (from tests/run.sh): HPML, MPIRUN, MPI, HPML_TEST_REPO.
set -u
repo=${HPML_TEST_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
ref=$repo/tests/ref/pca_ref.py
py=/usr/bin/python3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
$py "$ref" gen "$d" || exit 1

run() { # name args...
    local name=$1
    shift
    $MPIRUN -np $n "$HPML" pca "$@" --out "$d/np$n.$name" --transform-out "$d/np$n.$name.t.npy" \
        || { echo "FAIL: pca $name at $n ranks exited $?"; fail=1; }
}
for n in 1 2 3; do
    run full --data "$d/X.npy" -k 4
    run tsvd --data "$d/X.npy" -k 4 --no-center
    run rand --data "$d/W.npy" -k 3 --solver randomized
done
n=3
run csv --data "$d/X.csv" -k 4 --json # the CSV reader path, once
$py "$ref" check "$d" 1 2 3 || fail=1

expect_error() { # pattern args...
    local pat=$1 err rc
    shift
    err=$(timeout 60 $MPIRUN -np 2 "$HPML" pca "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q -- "$pat" <<<"$err"; then
        echo "FAIL: pca $* (exit $rc) should fail with '$pat'; got:"; echo "$err"; fail=1
    fi
}
printf '1,2\n3,x\n' >"$d/bad.csv"
$py -c 'import numpy as np; a=np.ones((9,3)); a[7,1]=np.nan; np.save("'"$d"'/nan.npy", a)'
head -c 100 "$d/X.npy" >"$d/trunc.npy"
expect_error "no-such.npy" --data "$d/no-such.npy"
expect_error "bad.csv" --data "$d/bad.csv" -k 1
expect_error "NaN" --data "$d/nan.npy" -k 1
expect_error "trunc.npy" --data "$d/trunc.npy"
expect_error "too large" --data "$d/X.npy" -k 9
expect_error "--solver must be" --data "$d/X.npy" --solver svd
expect_error "unknown option" --data "$d/X.npy" --bogus
[ $fail -eq 0 ] && echo "pca: all checks passed"
exit $fail
