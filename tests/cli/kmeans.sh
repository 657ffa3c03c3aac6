#!/usr/bin/env bash
# hpml kmeans against scikit-learn (same data, same initial centroids) at 1, 2 and 3
# ranks; k-means++ / k-means|| / random properties; predict; clear errors on bad input.
# Env: HPML (binary), MPIRUN (launcher with flags; -np N is appended), HPML_TEST_REPO.
# hpml-test: timeout=400
set -u
repo=${HPML_TEST_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=/usr/bin/python3
REF=$repo/tests/ref/kmeans_ref.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() { # np args... (output in $tmp/out, $tmp/err, status in $rc)
    local np=$1
    shift
    timeout -k 5 120 $MPIRUN -np "$np" "$HPML" kmeans "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

$PY "$REF" gen "$tmp" || { echo "FAIL: reference generation"; exit 1; }

# The comparisons with scikit-learn are queued in $jobs and run by one Python process at
# the end (importing scikit-learn costs about a second each time).
jobs=$tmp/jobs
: >"$jobs"
queue() { # name check|props case prefix json
    printf '%s\t%s %s %s %s %s\n' "$1" "$2" "$tmp" "$3" "$4" "$5" >>"$jobs"
}

# fit case CASE (kmeans_ref.py) on NP ranks from its initial centroids into PREFIX and
# queue its comparison with scikit-learn; WHAT names the run in failures.
fit_check() { # np case prefix what
    local dt=f64
    case $2 in f32 | far | wide) dt=f32 ;; esac
    run "$1" --data "$tmp/$2.X.npy" --init "$tmp/$2.C0.npy" --dtype $dt --out "$3" --json
    if [ $rc -ne 0 ]; then
        bad "$4 $2: exit $rc: $(head -3 "$tmp/err")"
        return
    fi
    cp "$tmp/out" "$3.json"
    queue "$4 $2 against scikit-learn" check "$2" "$3" "$3.json"
}

for np in 1 2 3; do
    for c in f64 f32 empty far; do
        fit_check "$np" $c "$tmp/o_${c}_$np" "np=$np"
    done
    # the result does not depend on the number of ranks (f64: identical labels)
    if [ "$np" -gt 1 ]; then
        $PY - "$tmp/o_f64_1" "$tmp/o_f64_$np" <<'EOF' || bad "np=$np f64 result differs from np=1"
import sys, numpy as np
a, b = sys.argv[1:]
assert (np.load(a + ".labels.npy") == np.load(b + ".labels.npy")).all()
assert np.allclose(np.load(a + ".centroids.npy"), np.load(b + ".centroids.npy"), rtol=0, atol=1e-10)
EOF
    fi
    # initialisations: valid clusterings; predict reproduces the labels
    i=0
    for init in k-means++ 'k-means||' random; do
        i=$((i + 1))
        run "$np" --data "$tmp/blobs.X.npy" -k 10 --init "$init" --seed 3 --dtype f64 \
            --out "$tmp/b${i}_$np" --json
        if [ $rc -ne 0 ]; then
            bad "np=$np init $init: exit $rc: $(head -3 "$tmp/err")"
            continue
        fi
        cp "$tmp/out" "$tmp/b${i}_$np.json"
        queue "np=$np init $init" props blobs "$tmp/b${i}_$np" "$tmp/b${i}_$np.json"
    done
    run "$np" --data "$tmp/blobs.X.npy" --predict "$tmp/b3_$np.centroids.npy" --dtype f64 \
        --labels "$tmp/p_$np.npy" --json
    [ $rc -eq 0 ] || bad "np=$np predict: exit $rc: $(head -3 "$tmp/err")"
    $PY -c "import numpy as np,sys; sys.exit(0 if (np.load('$tmp/p_$np.npy')==np.load('$tmp/b3_$np.labels.npy')).all() else 1)" ||
        bad "np=$np predict labels differ from the fit's"
done

# Every assign kernel matches scikit-learn (k > 16 and f64 included), and hpml info names
# the one HPML_SIMD selects: AVX-512 only under auto, the fused AVX2 one under avx2 (also
# on an AVX-512 CPU), the BLAS GEMM path under portable.
has() { grep -qw "$1" /proc/cpuinfo; }
for simd in auto avx2 portable; do
    want=GEMM
    if [ $simd != portable ] && has avx2 && has fma; then want=AVX2; fi
    if [ $simd = auto ] && has avx512f; then want=AVX-512; fi
    kern=$(HPML_SIMD=$simd "$HPML" info | sed -n 's/^  kmeans kernel: *//p')
    case "$kern" in
    *"$want"*) ;;
    *) bad "HPML_SIMD=$simd: hpml info says kmeans kernel '$kern', want $want" ;;
    esac
    for c in wide wide64; do
        HPML_SIMD=$simd fit_check 2 $c "$tmp/s_$c" "HPML_SIMD=$simd ($kern)"
    done
done

# k-means++ on clustered data: 10 tight blobs, k=10 finds them (inertia near the
# optimum) far more often than random init does.
$PY - "$tmp" <<'EOF' >"$tmp/blobs_opt"
import sys, numpy as np
from sklearn.cluster import KMeans
X = np.load(sys.argv[1] + "/blobs.X.npy")
print(min(KMeans(10, n_init=1, random_state=s).fit(X).inertia_ for s in range(5)))
EOF
opt=$(cat "$tmp/blobs_opt")
pp=0 rr=0
for s in 1 2 3 4; do
    for init in k-means++ random; do
        run 2 --data "$tmp/blobs.X.npy" -k 10 --init $init --n-init 1 --seed $s --max-iter 1 --json
        v=$($PY -c "import json,sys; print(json.load(open('$tmp/out'))['inertia'])")
        good=$($PY -c "print(1 if $v <= 1.5 * $opt else 0)")
        [ $init = k-means++ ] && pp=$((pp + good)) || rr=$((rr + good))
    done
done
echo "near-optimal after 1 iteration: k-means++ $pp/4, random $rr/4"
[ $pp -ge $rr ] && [ $pp -ge 3 ] || bad "k-means++ not better than random on clustered data"

# errors: one clear line, non-zero exit, no hang
expect_fail() { # want-status pattern args...
    local want=$1 pat=$2
    shift 2
    run 2 "$@"
    if [ $rc -eq 0 ] || { [ "$want" != any ] && [ $rc -ne "$want" ]; }; then
        bad "expected exit $want for: $* (got $rc)"
    elif ! grep -q -- "$pat" "$tmp/err"; then
        bad "expected '$pat' for: $*; stderr: $(head -3 "$tmp/err")"
    fi
}
$PY -c "
import numpy as np
X = np.random.RandomState(0).rand(50, 3); X[37, 1] = np.nan; np.save('$tmp/nan.npy', X)
open('$tmp/junk.npy', 'wb').write(b'not a numpy file at all')
np.save('$tmp/c2x2.npy', np.zeros((2, 2)))"
expect_fail any "no-such.npy" --data "$tmp/no-such.npy" -k 3
expect_fail any "k=2000 is larger than" --data "$tmp/f64.X.npy" -k 2000
expect_fail 2 "-k must be" --data "$tmp/f64.X.npy" -k 0
expect_fail 2 "-k must be" --data "$tmp/f64.X.npy" -k abc
expect_fail any "NaN" --data "$tmp/nan.npy" -k 3
expect_fail any "junk.npy" --data "$tmp/junk.npy" -k 3
expect_fail 2 "unknown option" --data "$tmp/f64.X.npy" -k 3 --bogus
expect_fail 2 "--init must be" --data "$tmp/f64.X.npy" -k 3 --init sideways
expect_fail 2 "--dtype must be" --data "$tmp/f64.X.npy" -k 3 --dtype i8
expect_fail 2 "--max-iter must be" --data "$tmp/f64.X.npy" -k 3 --max-iter -1
expect_fail 2 "--tol must be" --data "$tmp/f64.X.npy" -k 3 --tol nan
expect_fail 2 "--data FILE is required" -k 3
expect_fail any "columns" --data "$tmp/f64.X.npy" --init "$tmp/c2x2.npy"
expect_fail any "-k is 3" --data "$tmp/f64.X.npy" -k 3 --init "$tmp/c2x2.npy"

$PY "$REF" batch "$jobs" || bad "the comparisons above (kmeans_ref.py batch)"

echo "kmeans cli: $fails failure(s)"
[ $fails -eq 0 ]
