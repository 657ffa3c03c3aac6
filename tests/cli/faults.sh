#!/usr/bin/env bash
# Faults and bad input found by trying hpml as a new user: each is a clear one-line error
# naming what is wrong, a non-zero exit, on every rank, with no crash, no hang and no
# input or old output lost. One section per defect; each failed on the code before its fix.
# Env (from tests/run.sh): HPML, MPIRUN, MPI, BUILD.
# hpml-test: timeout=300
set -u
: "${HPML:?}" "${MPIRUN:?}"
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
export OPENBLAS_NUM_THREADS=1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
/usr/bin/python3 -c "
import numpy as np; r = np.random.default_rng(0)
np.save('ti.npy', r.integers(0, 255, (200, 28, 28), dtype=np.uint8))
np.save('tl.npy', r.integers(0, 10, 200).astype(np.int64))
np.save('te1.npy', r.integers(0, 255, (200, 1), dtype=np.uint8))
np.save('te40.npy', r.integers(0, 255, (200, 40, 40), dtype=np.uint8))
np.save('ti2.npy', r.integers(0, 255, (2, 28, 28), dtype=np.uint8))
np.save('tl2.npy', np.arange(2))
np.save('X.npy', r.normal(size=(60, 4)).astype(np.float32))
np.save('y.npy', r.normal(size=60))" || exit 1

# expect STATUS 'LINE' NP ARGS...: `hpml ARGS` on NP ranks (1: no launcher) exits STATUS
# within 60 s with exactly one stderr line starting "hpml " and holding LINE (fixed
# string) and no MPI_Abort.
expect() {
    local want=$1 line=$2 np=$3 rc
    shift 3
    if [ "$np" = 1 ]; then
        timeout -k 5 60 "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    else
        # shellcheck disable=SC2086
        timeout -k 5 60 $MPIRUN -np "$np" "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    fi
    rc=$?
    local what="np=$np hpml $*"
    if [ $rc -ne "$want" ]; then
        fail "$what: exit $rc, want $want: $(head -c 600 "$tmp/err")"
    elif [ "$(grep -c '^hpml ' "$tmp/err")" -ne 1 ] || ! grep -qF -- "$line" "$tmp/err"; then
        fail "$what: want one line holding '$line', got: $(head -c 600 "$tmp/err")"
    elif grep -qi "MPI_ABORT" "$tmp/err"; then
        fail "$what: aborted the job: $(head -c 300 "$tmp/err")"
    else
        echo "ok: $(grep -m1 '^hpml ' "$tmp/err")"
    fi
}

## Test images of another per-sample size than the training images (and the model): the
## smaller crashed in sgemm, the larger ran with garbage accuracy.
T=(train --model 'dense 10' --epochs 1 --no-progress --train-images ti.npy --train-labels tl.npy)
expect 1 "test images te1.npy: samples are 1x1x1, the model takes 1x28x28" 1 \
    "${T[@]}" --test-images te1.npy --test-labels tl.npy
expect 1 "test images te40.npy: samples are 1x40x40, the model takes 1x28x28" 2 \
    "${T[@]}" --test-images te40.npy --test-labels tl.npy

## --shard-data with fewer samples than ranks: one agreed line at once, not one rank's
## MPI_Abort after seconds.
expect 1 "ti2.npy holds 2 samples for 3 ranks: sharded data needs at least one sample per rank" 3 \
    train --model 'dense 10' --epochs 1 --no-progress --train-images ti2.npy \
    --train-labels tl2.npy --shard-data

## Training that diverges to NaN: exit 1 naming the step, no model saved, the last good
## checkpoint kept (it resumes at a sane learning rate); it used to exit 0 and save NaNs.
D=(train --model 'dense 64 relu | dense 10' --epochs 2 --train-limit 2000 --test-limit 100
   --no-progress --checkpoint ck --checkpoint-every 1)
expect 1 "training diverged at step 12 (epoch 1): the loss and the parameters are not finite; nothing was saved" \
    2 "${D[@]}" --lr 50 --save m.hpml
[ -e m.hpml ] && fail "a diverged run saved m.hpml"
[ -f ck/checkpoint.hpml ] || fail "the last good checkpoint is gone"
# The checkpoint left is the last finite one (read by the format of docs/nn.md).
/usr/bin/python3 - ck/checkpoint.hpml <<'PY' || fail "the checkpoint kept is not the last good one"
import struct, sys, zlib
import numpy as np
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'HPMLCKPT' and struct.unpack_from('<I', b, 8)[0] == 2
assert zlib.crc32(b[:-4]) == struct.unpack_from('<I', b, len(b) - 4)[0]
o = 12; sl = struct.unpack_from('<I', b, o)[0]; o += 4 + sl + 12
P = struct.unpack_from('<Q', b, o)[0]; o += 8 + 24 + 8 + 24 + 32 + 8
R = struct.unpack_from('<I', b, o)[0]; o += 4 + 24 * R
M = struct.unpack_from('<I', b, o)[0]; o += 4 + 8
assert len(b) - 4 - o == 4 * P * (1 + M)
step = struct.unpack_from('<Q', b, 12 + 4 + sl + 12 + 8 + 24 + 8 + 16)[0]
w = np.frombuffer(b, '<f4', P, o)
assert np.isfinite(w).all() and step == 11, step
PY

## An output that names an input destroyed the input; now refused before any work,
## however the path is spelled. Outputs the writers cannot make are refused too: a name
## that is neither .npy nor .csv got .npy bytes, and "--out DIR/" wrote hidden files.
$HPML train --model 'dense 10' --epochs 1 --no-progress --train-images ti.npy \
    --train-labels tl.npy --save m.hpml >/dev/null 2>&1 || fail "cannot train a model"
cp X.npy in.npy
md5sum X.npy y.npy in.npy ti.npy >sums
CL="writing there would destroy it; choose another name"
expect 1 "hpml kmeans: in.npy is the input --data in.npy: $CL" 1 kmeans --data in.npy -k 2 --out in.npy
expect 1 "hpml kmeans: in.npy is the input --data in.npy: $CL" 2 kmeans --data in.npy -k 2 --labels in.npy
expect 1 "hpml kmeans: $tmp/in.npy is the same file as the input --data ./in.npy" 1 \
    kmeans --data ./in.npy -k 2 --labels "$tmp/in.npy"
ln -s in.npy link.npy
expect 1 "hpml pca: link.npy is the same file as the input --data in.npy" 1 \
    pca --data in.npy -k 2 --transform-out link.npy
expect 1 "hpml predict: ti.npy is the input --images ti.npy: $CL" 1 \
    predict --model-file m.hpml --images ti.npy -o ti.npy
expect 1 "hpml linreg: y.npy is the input --target y.npy: $CL" 2 \
    linreg --data X.npy --target y.npy --out y.npy
expect 1 "hpml train: ti.npy is the input --train-images ti.npy: $CL" 1 \
    train --model 'dense 10' --epochs 1 --train-images ti.npy --train-labels tl.npy --save ti.npy
expect 1 "hpml train: --save ck/checkpoint.hpml is the checkpoint --checkpoint ck writes" 2 \
    train --model 'dense 10' --epochs 1 --train-images ti.npy --train-labels tl.npy \
    --checkpoint ck --save ck/checkpoint.hpml
md5sum -c --quiet sums || fail "an input was changed"
expect 1 "hpml kmeans: x.txt: an output is written as .npy or .csv" 1 \
    kmeans --data X.npy -k 2 --labels x.txt
expect 1 "hpml predict: p.txt: an output is written as .npy or .csv" 1 \
    predict --model-file m.hpml --images ti.npy -o p.txt
mkdir -p OUT
expect 2 "hpml kmeans: --out OUT/ names a folder: give a file name, or a prefix in the folder (OUT/run)" \
    1 kmeans --data X.npy -k 2 --out OUT/
expect 2 "hpml pca: --out OUT names a folder" 1 pca --data X.npy -k 2 --out OUT
[ -z "$(ls -A OUT)" ] && [ ! -e x.txt ] && [ ! -e p.txt ] || fail "wrote $(ls -A OUT) x.txt p.txt"

## Temporaries of a run killed before its rename are removed by the next write of the
## same path (their process gone, over a minute older than the run); a live writer's, and
## one a few seconds old (file times have one-second steps), are left alone.
(exit 0) &
gone=$!
wait
mkdir -p "k.centroids.npy.tmp.$gone.AbCdEf"
touch "k.centroids.npy.tmp.$gone.AbCdEf/out.npy" "k.labels.npy.tmp.$gone.XyZ123" \
    "k.labels.npy.tmp.$$.LiVe12" "k.labels.npy.tmp.$gone.FrEsH1"
touch -d '1 hour ago' "k.centroids.npy.tmp.$gone.AbCdEf" "k.labels.npy.tmp.$gone.XyZ123" \
    "k.labels.npy.tmp.$$.LiVe12"
touch -d '5 seconds ago' "k.labels.npy.tmp.$gone.FrEsH1"
"$HPML" kmeans --data X.npy -k 2 --out k >/dev/null 2>&1 || fail "kmeans --out k failed"
[ -e "k.centroids.npy.tmp.$gone.AbCdEf" ] && fail "a stale temporary folder was kept"
[ -e "k.labels.npy.tmp.$gone.XyZ123" ] && fail "a stale temporary file was kept"
[ -e "k.labels.npy.tmp.$$.LiVe12" ] || fail "a live process's temporary was removed"
[ -e "k.labels.npy.tmp.$gone.FrEsH1" ] || fail "a temporary newer than the run was removed"
rm -f k.*

## Inputs that are not regular files: /dev/zero was read until the OOM killer came, and a
## folder got "read error: Success", "out of memory" or an empty message.
mkdir -p DIR
expect 1 "hpml kmeans: /dev/zero: not a regular file (a device, pipe or socket)" 1 \
    kmeans --data /dev/zero -k 2
expect 1 "hpml kmeans: DIR: is a directory" 2 kmeans --data DIR -k 2
expect 1 "hpml predict: DIR/: is a directory" 1 predict --model-file DIR/ --images X.npy
expect 1 "hpml eval: DIR/: is a directory" 1 eval --model-file DIR/
expect 1 "hpml train: DIR: is a directory" 1 train --train-images DIR --train-labels tl.npy
## An allocation that fails is said as such: a CSV line longer than memory allows was
## taken for the end of the table ("k=2 is larger than the 0 rows").
head -c 100000000 /dev/zero | tr '\0' '1' >ones.csv
before=$fails
(ulimit -v 300000 && expect 1 "hpml kmeans: ones.csv" 1 kmeans --data ones.csv -k 2 &&
    exit $((fails - before))) || fails=$((before + 1))
grep -q "memory" "$tmp/err" || fail "an allocation failure said otherwise: $(cat "$tmp/err")"
rm -f ones.csv

exit $((fails > 0))
