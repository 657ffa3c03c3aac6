#!/usr/bin/env bash
# A model file whose parameters or normalisation hold NaN or Inf (bytes changed and the
# CRC32 made valid again, so only the values are wrong) is refused by `hpml eval` and
# `hpml predict`: exit 1, one line naming the file and the non-finite value, at 1 and 2
# ranks; the file it came from still works.
# Env (from tests/run.sh): HPML, MPIRUN.
# hpml-test: timeout=180
set -u
: "${HPML:?}" "${MPIRUN:?}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$HPML" train --model 'pool 4 | dense 10' --epochs 1 --train-limit 300 --test-limit 50 \
    --save "$tmp/m.hpml" --no-progress >/dev/null 2>"$tmp/train.err" || {
    echo "FAIL: train: $(cat "$tmp/train.err")"
    exit 1
}
# Model file (src/nn/modelfile.c): "HPMLMODL" u32 version, i32 c h w, f32 mean std, u32
# spec length, spec, u64 nparams, nparams f32, u32 CRC32 of everything before it.
$PY - "$tmp" <<'PYEOF' || bad "python failed"
import struct, sys, zlib
import numpy as np
d = sys.argv[1]
b = bytearray(open(d + "/m.hpml", "rb").read())
sl = struct.unpack_from("<I", b, 32)[0]
params = 36 + sl + 8
np.save(d + "/im.npy", np.random.default_rng(0).random((6, 784)).astype(np.float32))
np.save(d + "/lab.npy", np.arange(6) % 10)
def variant(name, off, value):
    v = bytearray(b)
    struct.pack_into("<f", v, off, value)
    struct.pack_into("<I", v, len(v) - 4, zlib.crc32(bytes(v[:-4])))
    open(f"{d}/{name}.hpml", "wb").write(v)
variant("nan_param", params + 4 * 7, float("nan"))
variant("inf_param", params + 4 * 300, float("-inf"))
variant("nan_mean", 24, float("nan"))
variant("inf_std", 28, float("inf"))
PYEOF
# expect NP CMD NAME PATTERN: exit 1, one "hpml CMD:" line naming the file, with PATTERN.
expect() {
    local np=$1 cmd=$2 f=$tmp/$3.hpml pat=$4 args rc
    if [ "$cmd" = eval ]; then
        args=(eval -f "$f" --images "$tmp/im.npy" --labels "$tmp/lab.npy")
    else
        args=(predict -f "$f" -i "$tmp/im.npy")
    fi
    if [ "$np" = 1 ]; then
        timeout -k 5 120 "$HPML" "${args[@]}" >"$tmp/out" 2>"$tmp/err" </dev/null
    else
        timeout -k 5 120 $MPIRUN -np "$np" "$HPML" "${args[@]}" >"$tmp/out" 2>"$tmp/err" \
            </dev/null
    fi
    rc=$?
    [ $rc -eq 1 ] || bad "np=$np $cmd $3: exit $rc, expected 1: $(head -3 "$tmp/err")"
    [ "$(grep -c "^hpml $cmd:" "$tmp/err")" -eq 1 ] ||
        bad "np=$np $cmd $3: expected one 'hpml $cmd:' line: $(head -5 "$tmp/err")"
    grep -q -- "$3.hpml: non-finite parameter: $pat" "$tmp/err" ||
        bad "np=$np $cmd $3: no '$3.hpml: non-finite parameter: $pat' in: $(head -3 "$tmp/err")"
    ! grep -qi "MPI_ABORT" "$tmp/err" || bad "np=$np $cmd $3: aborted the job"
}
for np in 1 2; do
    for cmd in eval predict; do
        expect $np $cmd nan_param "parameter 7 of 500 is nan"
        expect $np $cmd inf_param "parameter 300 of 500 is -inf"
        expect $np $cmd nan_mean "the normalisation is mean nan"
        expect $np $cmd inf_std "the normalisation is mean .*, std inf"
    done
done
"$HPML" eval -f "$tmp/m.hpml" --images "$tmp/im.npy" --labels "$tmp/lab.npy" >/dev/null 2>&1 ||
    bad "eval of the original model failed"
"$HPML" predict -f "$tmp/m.hpml" -i "$tmp/im.npy" >/dev/null 2>&1 ||
    bad "predict of the original model failed"
if [ $fails -gt 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo ok
