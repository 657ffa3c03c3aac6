#!/usr/bin/env bash
# Ranks started with different commands or options (an MPMD launch, a wrapper script that
# differs per rank) end at once, on every rank, with one line naming the first difference
# and two ranks' values, exit 2: no hang, no mixed result. Options are compared as parsed
# ("-k 3" and "--clusters=3" agree). Not dependent on HPML_CHECK.
# Env (from tests/run.sh): HPML, MPIRUN.
# hpml-test: timeout=300
set -u
: "${HPML:?}" "${MPIRUN:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0
/usr/bin/python3 -c "
import numpy as np; r = np.random.default_rng(0)
np.save('X.npy', r.normal(size=(60, 4)).astype(np.float32))
np.save('Y.npy', r.normal(size=(60, 4)).astype(np.float32))" || exit 1

# differ 'EXPECTED LINE' 'ARGS OF RANK 0' 'ARGS OF RANK 1': exit 2 within 30 s, that line
# exactly once, nothing on stdout, no output file.
differ() {
    local want=$1 a=$2 b=$3 rc out
    # shellcheck disable=SC2086 # word splitting of the argument lists is intended
    timeout -k 5 30 $MPIRUN -np 1 "$HPML" $a : -np 1 "$HPML" $b >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    if [ $rc -ne 2 ] || [ "$(grep -cxF -- "$want" "$tmp/err")" -ne 1 ] || [ -s "$tmp/out" ] ||
        [ -e "$tmp/o.npy" ]; then
        echo "FAIL: [$a] vs [$b]: exit $rc (want 2), want the line: $want"
        head -5 "$tmp/err" "$tmp/out"
        fails=$((fails + 1))
    else
        echo "ok: $want"
    fi
    rm -f "$tmp/o.npy"
}
# agree 'ARGS OF RANK 0' 'ARGS OF RANK 1': the same options spelled differently run.
agree() {
    # shellcheck disable=SC2086
    if ! timeout -k 5 60 $MPIRUN -np 1 "$HPML" $1 : -np 1 "$HPML" $2 >"$tmp/out" 2>"$tmp/err" \
        </dev/null; then
        echo "FAIL: [$1] vs [$2] should run:"; head -5 "$tmp/err"; fails=$((fails + 1))
    else
        echo "ok: [$1] and [$2] agree"
    fi
}

K="kmeans --data X.npy --out o.npy"
differ "hpml kmeans: the ranks were started with different options: rank 0 has '--clusters 3', rank 1 has '--clusters 4'" \
    "$K -k 3" "$K -k 4"
differ "hpml: the ranks were started with different commands: rank 0 has the command 'kmeans', rank 1 has the command 'pca'" \
    "$K -k 3" "pca --data X.npy -k 3 --out o.npy"
differ "hpml kmeans: the ranks were started with different options: rank 1 has '--help', rank 0 does not" \
    "$K -k 3" "$K -k 3 --help"
differ "hpml: the ranks were started with different commands: rank 0 has the command 'kmeans', rank 1 has '--version'" \
    "$K -k 3" "--version"
differ "hpml kmeans: the ranks were started with different options: rank 0 has '--data X.npy', rank 1 has '--data Y.npy'" \
    "$K -k 3" "kmeans --data Y.npy --out o.npy -k 3"
# Options whose collectives still line up: without the check these ran and mixed results.
differ "hpml kmeans: the ranks were started with different options: rank 0 has '--dtype f64', rank 1 has '--dtype f32'" \
    "$K -k 3 --dtype f64" "$K -k 3 --dtype f32"
T="train --synthetic --iters 4 --no-progress --model mlp"
differ "hpml train: the ranks were started with different options: rank 0 has '--epochs 1', rank 1 has '--epochs 2'" \
    "$T --epochs 1" "$T --epochs 2"
differ "hpml train: the ranks were started with different options: rank 0 has '--lr 0.1', rank 1 has '--lr 0.01'" \
    "$T --lr 0.1" "$T --lr 0.01"
differ "hpml train: the ranks were started with different options: rank 1 has '--bogus', rank 0 does not" \
    "$T" "$T --bogus"
differ "hpml bench: the ranks were started with different options: rank 0 has the argument 'allreduce', rank 1 has the argument 'bcast'" \
    "bench -m 64 -i 2 -x 1 allreduce" "bench -m 64 -i 2 -x 1 bcast"
HPML_CHECK=1 differ "hpml kmeans: the ranks were started with different options: rank 0 has '--clusters 3', rank 1 has '--clusters 4'" \
    "$K -k 3" "$K -k 4"

# The same options, spelled otherwise or in another order, are one command line.
agree "$K -k 3" "kmeans --clusters=3 --out=o.npy --dat X.npy"
agree "bench -m 64 -i 2 -x 1 allreduce" "bench allreduce --iterations 2 -x1 --message-size=64"
exit $((fails > 0))
