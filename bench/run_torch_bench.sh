#!/usr/bin/env bash
# hpml.torch against PyTorch DDP over gloo: `python3 -m hpml.torch.bench` (Horovod's
# synthetic benchmark) at 2 ranks, one thread per rank (torch.set_num_threads(1),
# OMP/OPENBLAS_NUM_THREADS=1), each rank bound to a core, --batch-size 64 per rank, on the
# MLP (784-512-256-10) and LeNet, for: hpml.torch's DistributedOptimizer (its default
# choice, which on 2 cores is the blocking allreduce inside backward; --nonblocking:
# iallreduce started during backward), DDP with hpml's comm hook, and DDP over gloo; and
# each model on 2 ranks with no gradient exchange (--framework none: two independent
# trainings at once, the bound the machine sets for any synchronous 2-rank run), and the
# MLP on 1 rank (hpml.torch and DDP-gloo) for the scaling efficiency. The runs alternate over --rounds rounds; per configuration the
# median over the rounds of the "Total img/sec" line is printed in a Markdown table with
# the ratio to DDP-gloo at the same model and rank count, and the scaling 1 -> 2 ranks
# (total img/s at 2 ranks / (2 x at 1 rank)). A run that has not ended after --limit seconds
# is stopped with its ranks (scripts/run-limited.sh) and counted as stopped in the table.
#   bench/run_torch_bench.sh [--rounds N] [--iters N] [--models "mlp lenet"] [--limit SECONDS]
#                            [--until HH:MM]
# --until: start no round after that time of day (date's clock), so that a measurement
# window's rounds end complete and the table is printed in time.
# Env: BUILD (default build/openmpi). Installs PyTorch (scripts/install-deps.sh --torch).
# Run it under `chrt -f 1` on a quiet machine.
set -eu
rounds=5 iters=10 models="mlp lenet" limit=120 until=
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --until)
        until=$(date -d "$2" +%s 2>/dev/null) ||
            { echo "run_torch_bench: --until: not a time of day: '$2'" >&2; exit 2; }
        shift 2
        ;;
    *) echo "run_torch_bench: unknown option '$1'" >&2; exit 2 ;;
    esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$repo/build/openmpi}
"$repo/scripts/install-deps.sh" --torch >&2
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$repo/python
export HPML_LIB=$build/lib/libhpml.so.0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
configs=()
for m in $models; do
    configs+=("2|$m|hpml|" "2|$m|hpml|--nonblocking" "2|$m|ddp-hpml|" "2|$m|ddp-gloo|" "2|$m|none|")
done
configs+=("1|mlp|hpml|" "1|mlp|ddp-gloo|")
# Under a real-time policy (chrt -f 1 bench/run_torch_bench.sh) the runs keep it and this
# script moves one priority above them, so that scripts/run-limited.sh can stop a run
# whose ranks spin on every core (a run that hangs would otherwise starve it and mpirun).
rt=()
read -r policy prio < <(chrt -p $$ | awk -F': ' 'NR==1{p=$2} NR==2{print p, $2}')
case "$policy" in
SCHED_FIFO | SCHED_RR)
    flag=$([ "$policy" = SCHED_FIFO ] && echo -f || echo -r)
    rt=(chrt "$flag" "$prio")
    chrt "$flag" -p $((prio + 1)) $$ >/dev/null
    ;;
esac
for r in $(seq "$rounds"); do
    if [ -n "$until" ] && [ "$(date +%s)" -ge "$until" ]; then
        echo "round $r: not started (--until)" >&2
        break
    fi
    for c in "${configs[@]}"; do
        IFS='|' read -r np model fw extra <<<"$c"
        # shellcheck disable=SC2086
        line=$("$repo/scripts/run-limited.sh" "$limit" "${rt[@]}" mpirun.openmpi \
            --allow-run-as-root --bind-to core -np "$np" \
            /usr/bin/python3 -m hpml.torch.bench --model "$model" --framework "$fw" $extra \
            --batch-size 64 --num-iters "$iters" | grep '^Total img/sec') ||
            {
                echo "$r|$c|stopped" >>"$out/runs"
                echo "round $r: $c: no result within ${limit}s (stopped)" >&2
                continue
            }
        echo "$r|$c|$line" >>"$out/runs"
        echo "round $r: $np rank(s) $model $fw $extra: $line" >&2
    done
done
touch "$out/runs"
/usr/bin/python3 - "$out/runs" <<'PY'
import re, statistics, sys
runs, stopped, by_round = {}, {}, {}
for line in open(sys.argv[1]):
    rnd, np_, model, fw, extra, total = line.rstrip("\n").split("|", 5)
    key = (int(np_), model, fw + (" " + extra if extra else ""))
    runs.setdefault(key, [])
    if total == "stopped":
        stopped[key] = stopped.get(key, 0) + 1
    else:
        v = float(re.search(r": ([0-9.]+) \+-", total).group(1))
        runs[key].append(v)
        by_round.setdefault(int(rnd), {})[key] = v
med = {k: statistics.median(v) for k, v in runs.items() if v}


def ratio(key, ref, scale=1.0):
    """Median of the ratios, with their quartiles, over the rounds that ran both."""
    rs = sorted(r[key] / (scale * r[ref]) for r in by_round.values() if key in r and ref in r)
    if not rs:
        return ""
    if len(rs) < 4:
        return "%.2f" % statistics.median(rs)
    q = statistics.quantiles(rs, n=4)
    return "%.2f [%.2f-%.2f]" % (statistics.median(rs), q[0], q[2])


print("Ratios: median over the rounds [quartiles] of the ratio within each round.")
print("| ranks | model | framework | total img/s (median) | runs (stopped) | spread (min-max) | vs DDP-gloo | scaling 1->2 | vs none (no exchange) |")
print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
for key in sorted(runs, key=lambda k: (k[1], -k[0], k[2])):
    np_, model, fw = key
    n = "%d (%d)" % (len(runs[key]), stopped.get(key, 0))
    if key not in med:
        print("| %d | %s | %s | no result | %s | | | | |" % (np_, model, fw, n))
        continue
    one = (1, model, fw) if (1, model, fw) in med else (1, model, "hpml")
    scal = ratio(key, one, 2.0) if np_ == 2 else ""
    vs_none = ratio(key, (np_, model, "none")) if np_ == 2 else ""
    print("| %d | %s | %s | %.0f | %s | %.0f-%.0f | %s | %s | %s |"
          % (np_, model, fw, med[key], n, min(runs[key]), max(runs[key]),
             ratio(key, (np_, model, "ddp-gloo")), scal, vs_none))
PY
