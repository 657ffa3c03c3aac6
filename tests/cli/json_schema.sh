#!/usr/bin/env bash
# Every command's --json record validates against docs/hpml.schema.json (each mode:
# fit and --predict, training and --synthetic, point-to-point, collective, rooted,
# nonblocking and barrier benchmarks), and so does the example in docs/json.md; every key
# the schema knows is described in docs/json.md; a record with a wrong or unknown key
# fails validation (so the check can fail). Env (from tests/run.sh): HPML, MPIRUN, MPI.
set -u
repo=${HPML_TEST_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
py=/usr/bin/python3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
n=0
json() { # args... : one record into $d/rec.N.json
    n=$((n + 1))
    $MPIRUN -np 2 "$HPML" "$@" --json >"$d/rec.$n.json" 2>"$d/err" ||
        { echo "FAIL: hpml $* --json: $(head -3 "$d/err")"; fail=1; }
}

$py - "$d" <<'EOF' || exit 1
import sys
import numpy as np
from sklearn.datasets import make_blobs
d = sys.argv[1]
X, y = make_blobs(n_samples=40, centers=3, n_features=4, random_state=1)
np.save(f"{d}/X.npy", X)
np.save(f"{d}/y.npy", y)
np.save(f"{d}/T.npy", np.c_[X[:, 0] - X[:, 1], X[:, 2]])
rng = np.random.default_rng(0)
np.save(f"{d}/im.npy", rng.random((64, 784)).astype(np.float32))
np.save(f"{d}/lab.npy", rng.integers(0, 10, 64))
EOF
json kmeans --data "$d/X.npy" -k 3 --out "$d/km"
json kmeans --data "$d/X.npy" --predict "$d/km.centroids.npy"
json knn --data "$d/X.npy" --labels "$d/y.npy" --query-labels "$d/y.npy" -k 3
json knn --data "$d/X.npy" -k 2
json linreg --data "$d/X.npy" --target "$d/T.npy" --out "$d/lr"
json linreg --predict "$d/lr" --data "$d/X.npy" --target "$d/T.npy"
json logreg --data "$d/X.npy" --target "$d/y.npy" --out "$d/lg" --test "$d/X.npy"
json logreg --predict "$d/lg" --data "$d/X.npy"
json pca --data "$d/X.npy" -k 2
json train --epochs 1 --train-limit 256 --test-limit 64 --save "$d/m.hpml"
json train --epochs 1 --train-images "$d/im.npy" --train-labels "$d/lab.npy"
json train --synthetic --iters 2 --warmup-iters 1
json train --epochs 1 --train-images "$d/im.npy" --train-labels "$d/lab.npy" --batch 16 --pipeline 2 \
    --micro-batches 3 --schedule 1f1b
# A run that checkpoints, its resume (resumed_from, history, --metrics lines) and a resume
# with nothing left to do.
tr=(train --train-images "$d/im.npy" --train-labels "$d/lab.npy" --batch 16 --checkpoint "$d/ck")
json "${tr[@]}" --epochs 1
json "${tr[@]}" --epochs 2 --resume --metrics "$d/metrics.jsonl" --metrics-every 2
json "${tr[@]}" --epochs 2 --resume
json eval -f "$d/m.hpml" --limit 64
json predict -f "$d/m.hpml" -i "$d/im.npy" -o "$d/pred.npy" --top-k 3 --proba "$d/p.npy"
json info
for b in "allreduce -c -z50,99" "reduce -k rotate -l" "bcast --impl all" latency bw mbw_mr \
    iallreduce barrier; do
    # shellcheck disable=SC2086  # the benchmark's words
    json bench $b -m 4:8 -i 3 -x 1
done
sed -n '/^```json$/,/^```$/p' "$repo/docs/json.md" | sed '1d;$d' >"$d/doc.json"

$py - "$repo" "$d" <<'EOF' || fail=1
import copy, glob, json, re, sys
import jsonschema
repo, d = sys.argv[1:]
schema = json.load(open(f"{repo}/docs/hpml.schema.json"))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
bad, seen = 0, set()
recs = sorted(glob.glob(f"{d}/rec.*.json"), key=lambda p: int(p.split(".")[-2])) + [f"{d}/doc.json"]
epochs = [json.loads(line) for line in open(f"{d}/metrics.jsonl")]
ev = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/epoch"})
for e in epochs:
    for err in ev.iter_errors(e):
        print(f"--metrics line {e}: {err.message[:200]}"); bad = 1
kinds = [e.get("event") for e in epochs]
if kinds != ["step", "epoch"]:
    print(f"--metrics lines of a resumed 4-step epoch with --metrics-every 2: {kinds}"); bad = 1
runs = [json.load(open(p)) for p in recs if '"checkpoint"' not in p]
res = [r for r in runs if r.get("command") == "train" and r.get("resumed_from")]
if len(res) != 1 or res[0]["resumed_from"] != {"epoch": 2, "step": 4} or res[0]["steps_this_run"] != 4 \
        or [h["epoch"] for h in res[0]["history"]] != [2]:
    print(f"resumed run: {[(r['resumed_from'], r.get('steps_this_run'), r.get('history')) for r in res]}"); bad = 1
pipes = [r["pipeline"] for r in runs if "pipeline" in r]
if len(pipes) != 1 or len(pipes[0]["per_stage"]) != 2 or pipes[0]["schedule"] != "1f1b" \
        or abs(pipes[0]["bubble_theory"] - 1 / 4) > 1e-9:
    print(f"--pipeline 2 --micro-batches 3 --schedule 1f1b: {pipes}"); bad = 1
if not any(r.get("nothing_to_do") for r in runs):
    print("a resume of a finished run does not say nothing_to_do"); bad = 1
for path in recs:
    try:
        r = json.load(open(path))
    except ValueError as e:
        print(f"{path}: not one JSON object: {e}"); bad = 1; continue
    seen.add(r.get("command"))
    for e in v.iter_errors(r):
        print(f"{r.get('command')} ({path.rsplit('/', 1)[1]}): {'/'.join(map(str, e.path))}: {e.message[:300]}")
        bad = 1
missing = set(schema["$defs"]) - {"epoch"} - seen
if missing:
    print(f"no record of {sorted(missing)}"); bad = 1
# The check can fail: an unknown key, -1 for "not reached", a flat 2-target coef.
r = json.load(open(recs[0]))
probes = [("unknown key", dict(r, extra=1))]
t = next((json.load(open(p)) for p in recs if '"train", "synthetic": false' in open(p).read()), {})
probes.append(("time_to_85_seconds -1", dict(t, time_to_85_seconds=-1)))
l = next((json.load(open(p)) for p in recs if '"linreg"' in open(p).read() and '"coef"' in open(p).read()), {})
if [len(row) for row in l.get("coef", [])] != [4, 4]:
    print(f"linreg coef of two targets is not 2 x 4: {l.get('coef')}"); bad = 1
else:
    probes.append(("flat coef", dict(l, coef=sum(l["coef"], []))))
for what, p in probes:
    if v.is_valid(p):
        print(f"a record with {what} validates: the schema checks nothing"); bad = 1
# docs/json.md describes every key of every command, in that command's section.
doc = open(f"{repo}/docs/json.md").read()
for c, s in schema["$defs"].items():
    m = re.search(rf"^### `{c}`.*?$(.*?)(?=^### |\Z)", doc, re.M | re.S)
    if m is None:
        print(f"docs/json.md has no section for {c}"); bad = 1; continue
    keys = set(s["properties"]) - {"schema_version", "command"}
    if c == "bench":
        keys |= set(s["properties"]["results"]["items"]["properties"])
    for k in sorted(keys):
        if f"| `{k}` |" not in m.group(1):
            print(f"docs/json.md, {c}: key {k} not described"); bad = 1
print(f"json_schema: {len(recs)} records of {len(seen)} commands checked")
sys.exit(bad)
EOF
[ $fail -eq 0 ] && echo "json_schema: all checks passed"
exit $fail
