#!/usr/bin/env bash
# hpml train --pipeline: a pipeline that cannot be made is a usage error (exit 2, one line
# naming the reason) before any data is read; a 2-stage 1F1B run on 2 ranks reads the
# training files once (the profiler's I/O counts per file), reports its stages and the data each
# holds, and --save writes one ordinary model file, which hpml eval reads and scores as
# the run's own last evaluation did (tests/cli/json_schema.sh checks the --json record);
# --trace writes the schedule as a Chrome trace whose actions follow it.
# hpml-test: timeout=120
set -u
: "${HPML:?}" "${MPIRUN:?}"
fail=0
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
opt_error() { # expected-substring args...
    local msg=$1 out rc
    shift
    out=$($MPIRUN -np 2 "$HPML" train --no-progress --epochs 1 "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 2 ] || ! grep -qF -- "$msg" <<<"$out" || [ "$(grep -c 'hpml train:' <<<"$out")" -ne 1 ]; then
        echo "FAIL: train $* (exit $rc, want 2): expected one line with '$msg' in:"
        echo "$out" | head -4
        fail=1
    else
        echo "ok: $* -> $(grep -m1 'hpml train:' <<<"$out")"
    fi
}
opt_error "2 ranks are not a multiple of the 3 pipeline stages" --pipeline 3
opt_error "lists 2 stages of 2 layers in all; the pipeline has 2 stages and the model 3" \
    --pipeline 2 --partition 1,1
opt_error "need --pipeline S with S > 1" --micro-batches 4

run=(train --epochs 1 --train-limit 600 --test-limit 200 --batch 50 --no-progress --pipeline 2
    --micro-batches 3 --schedule 1f1b)
# Under the profiler, which counts the I/O calls on each file and their bytes: the
# pipeline's two ranks open and read the training images and labels once (stage 0 the
# images, stage 1 the labels), the same calls as one data-parallel rank makes, where every
# rank used to read both (twice the opens). (The gzip stream itself is read through a
# dup'ed descriptor, which the profiler does not attribute to the file: the opens and the
# header reads are what is compared.)
# shellcheck disable=SC2086 # MPIRUN is a command with its options
out=$("$HPML" prof -q -o "$d/prof2" -- $MPIRUN -np 2 "$HPML" "${run[@]}" --save "$d/m.hpml" \
    --trace "$d/trace.json" 2>&1)
# shellcheck disable=SC2086
"$HPML" prof -q -o "$d/prof1" -- $MPIRUN -np 1 "$HPML" train --epochs 1 --train-limit 600 \
    --test-limit 200 --batch 50 --no-progress --max-steps 1 >/dev/null 2>&1 ||
    { echo "FAIL: the profiled data-parallel run"; fail=1; }
/usr/bin/python3 - "$d/prof1/report.json" "$d/prof2/report.json" <<'PY' || fail=1
import json, sys
def read(f):
    got = {}
    for e in json.load(open(f))["io"]:
        if "/train-" in e["path"]:
            got[e["path"].rsplit("/", 1)[1]] = {c["name"]: (c["count"], c["bytes"])
                                                 for c in e["calls"]}
    return got
one, pipe = read(sys.argv[1]), read(sys.argv[2])
if len(one) != 2 or any(f.get("open", (0, 0))[0] == 0 for f in one.values()) or pipe != one:
    print(f"FAIL: training files' I/O (calls, bytes): 1 data-parallel rank {one}, "
          f"the 2-stage pipeline {pipe}")
    sys.exit(1)
print(f"ok: the 2-stage pipeline read the training files once: {pipe}")
PY
if [ "$(grep -c '^# pipeline: 2 stages, 3 micro-batches, 1f1b schedule' <<<"$out")" -ne 1 ] ||
    ! grep -qE '^ +0 +0-1 +533248 ' <<<"$out" || ! grep -qE '^ +1 +2-2 +2570 ' <<<"$out"; then
    echo "FAIL: the text report lacks the stages:"; echo "$out" | tail -5; fail=1
fi
# 1F1B on 2 stages: stage 0 keeps min(M, S - 0) = 2 micro-batches, stage 1 one (live).
grep -qE '^ +0 +0-1 +533248 .* 2 +[0-9.]+ +[0-9.]+% +[0-9.]+$' <<<"$out" &&
    grep -qE '^ +1 +2-2 +2570 .* 1 +[0-9.]+ +[0-9.]+% +[0-9.]+$' <<<"$out" ||
    { echo "FAIL: live micro-batches per stage:"; echo "$out" | tail -3; fail=1; }
# The training data each stage holds: 600 images of 784 floats on stage 0 (1.794 MiB),
# 600 int32 labels on stage 1 (0.002 MiB).
grep -qE '^ +0 +0-1 +533248 .*% +1\.794$' <<<"$out" && grep -qE '^ +1 +2-2 +2570 .*% +0\.002$' <<<"$out" ||
    { echo "FAIL: the data each stage holds:"; echo "$out" | tail -3; fail=1; }
acc=$(sed -n 's/.*final test accuracy \([0-9.]*\)%.*/\1/p' <<<"$out")
ev=$($MPIRUN -np 2 "$HPML" eval -f "$d/m.hpml" --limit 200 2>&1)
if [ -z "$acc" ] || ! grep -qF "$acc%" <<<"$ev"; then
    echo "FAIL: eval of the pipeline's model does not score the run's $acc%:"; echo "$ev" | tail -3
    fail=1
else
    echo "ok: eval of the saved model: $acc%"
fi
# The trace: 12 steps of 3 micro-batches, a forward and a backward each, on both stages;
# on each stage a micro-batch's backward after its forward, and stage 1's forward of a
# micro-batch after stage 0's has ended.
/usr/bin/python3 - "$d/trace.json" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
bad = 0
if sorted(doc) != ["traceEvents"]:  # no displayTimeUnit: the spec's default, a hint only
    print(f"FAIL: trace keys {sorted(doc)}, want traceEvents alone"); bad = 1
by = {t: [e for e in ev if e["tid"] == t] for t in (0, 1)}
if [len(by[0]), len(by[1])] != [72, 72]:
    print(f"FAIL: trace events per stage {[len(by[0]), len(by[1])]}, want 72 each"); bad = 1
for k in range(0, 72, 6):
    f0 = {e["name"]: e for e in by[0][k:k + 6]}
    f1 = {e["name"]: e for e in by[1][k:k + 6]}
    for j in range(3):
        a, b = f"F{j}", f"B{j}"
        if a not in f0 or a not in f1 or b not in f0 or b not in f1:
            print(f"FAIL: step {k // 6}: actions {sorted(f0)} {sorted(f1)}"); bad = 1; break
        if f0[b]["ts"] < f0[a]["ts"] + f0[a]["dur"] or f1[a]["ts"] < f0[a]["ts"] + f0[a]["dur"]:
            print(f"FAIL: step {k // 6} micro-batch {j}: out of order"); bad = 1
print(f"train_pipe: trace of {len(ev)} actions in schedule order" if not bad else "")
sys.exit(bad)
PY
[ $fail -eq 0 ] && echo "train_pipe: all checks passed"
exit $fail
