#!/usr/bin/env bash
# hpml train --pipeline: a pipeline that cannot be made is a usage error (exit 2, one line
# naming the reason) before any data is read; a 2-stage 1F1B run on 2 ranks reports its
# stages and --save writes one ordinary model file, which hpml eval reads and scores as
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
out=$($MPIRUN -np 2 "$HPML" "${run[@]}" --save "$d/m.hpml" --trace "$d/trace.json" 2>&1)
if [ "$(grep -c '^# pipeline: 2 stages, 3 micro-batches, 1f1b schedule' <<<"$out")" -ne 1 ] ||
    ! grep -qE '^ +0 +0-1 +533248 ' <<<"$out" || ! grep -qE '^ +1 +2-2 +2570 ' <<<"$out"; then
    echo "FAIL: the text report lacks the stages:"; echo "$out" | tail -5; fail=1
fi
# 1F1B on 2 stages: stage 0 keeps min(M, S - 0) = 2 micro-batches, stage 1 one (live).
grep -qE '^ +0 +0-1 +533248 .* 2 +[0-9.]+ +[0-9.]+%$' <<<"$out" &&
    grep -qE '^ +1 +2-2 +2570 .* 1 +[0-9.]+ +[0-9.]+%$' <<<"$out" ||
    { echo "FAIL: live micro-batches per stage:"; echo "$out" | tail -3; fail=1; }
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
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
bad = 0
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
