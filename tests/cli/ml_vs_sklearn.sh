#!/usr/bin/env bash
# bench/ml_vs_sklearn.py --quick runs end to end on small data for the five ML commands
# (kmeans, knn, logreg, pca, linreg) at 2 ranks, with the K-Means kernels of
# HPML_SIMD=auto and avx2, and its agreement checks with scikit-learn pass. A smoke test of
# the benchmark: its timings here mean nothing.
# Env (from tests/run.sh): HPML, MPIRUN, HPML_TEST_REPO.
set -u
repo=${HPML_TEST_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
out=$(/usr/bin/python3 "$repo/bench/ml_vs_sklearn.py" --quick --no-machine --hpml "$HPML" \
    --mpirun "$MPIRUN" --simd auto,avx2 2>&1)
rc=$?
echo "$out"
fail=0
[ $rc -eq 0 ] || { echo "FAIL: ml_vs_sklearn.py --quick exited $rc"; fail=1; }
for c in kmeans knn logreg pca linreg; do
    n=$(grep -c "^#   check ok: .*" <<<"$(sed -n "/^# $c:/,/^# [a-z]*:/p" <<<"$out")")
    [ "$n" -eq 2 ] || { echo "FAIL: $c: $n checks ok of 2"; fail=1; }
done
grep -q "^# checks: all agree" <<<"$out" || { echo "FAIL: not all checks agree"; fail=1; }
[ $fail -eq 0 ] && echo "ml_vs_sklearn: all checks passed"
exit $fail
