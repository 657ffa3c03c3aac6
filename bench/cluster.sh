#!/usr/bin/env bash
# hpml across emulated nodes (scripts/cluster.sh) against the MPI in the same run:
#   - allreduce, f32, 4 KiB to 16 MiB: the MPI's MPI_Allreduce, hpml's default selection
#     (`hpml`) and the hierarchical algorithm (`hpml:hier`), average µs, on
#     2 nodes x 1 rank and 2 nodes x 2 ranks, links unshaped and shaped to RATE;
#   - the bytes each node's link carries per allreduce call, as copies of the data
#     (bench/link_copies.sh), for the MPI's allreduce, hier and, with Open MPI at 2 ranks
#     per node, each of its tuned algorithms forced (3 recursive doubling, 4 ring,
#     6 Rabenseifner), 1 MiB and 16 MiB on the shaped links: the speed-up over the MPI
#     that sending fewer bytes can give at most is the ratio of the copies;
#   - data-parallel MLP training (Fashion-MNIST, `dense 512 relu | dense 512 relu |
#     dense 10`) on 2 nodes x 1 rank with shaped links: f32 gradients against bf16
#     gradients, images/s and test accuracy.
# Prints markdown tables (the ones of docs/performance.md, "comm: allreduce across nodes"):
# the allreduce medians per size, then per MPI a summary of the ratios side by side. Where
# the selection runs the library's own call (`hpml` is MPI_Allreduce), the mpi / hpml cell
# reads "= mpi" (in the per-size table with the measured ratio of the identical calls in
# brackets, the measurement's noise); the summary's last lines give, per layout and links,
# the lowest mpi / hpml where hpml runs its own algorithm, and the spread of the identical
# calls.
#
#   bench/cluster.sh [--mpi openmpi,mpich] [--rate 1gbit] [--limit SECONDS] [--quick]
#                    [--rounds N] [--iters N] [--ppn 2,1] [--parts comm,bytes,model,train]
#
# --rounds N: run each allreduce sweep N times, the implementations' order rotated each
# round (mpi,hpml,hier; hpml,hier,mpi; hier,mpi,hpml; ...), and report per size the
# median time of each and the median of the per-round ratios. The order matters on shaped
# links: the first implementation of a size starts with the token bucket full and rides
# its burst (256 KiB), the next ones find it drained (default 1, the order above; use a
# multiple of 3 so that each implementation comes first equally often).
# --iters N: timed calls per size and implementation up to 8 KiB, N/10 above (OMB's rule),
# warm-up N/5 (default 100, --quick 20; more iterations steady the large sizes).
# --ppn: ranks per node of the allreduce sweeps and byte counts; --parts: which of the
# four parts to run.
# --limit: seconds one run (one launcher call) may take before it is stopped and reported
# as failed (default 150; MPICH can hang in MPI_Finalize, docs/cluster.md).
# Needs root (network namespaces). --quick: few sizes and iterations, to check the script
# (not a measurement). 2 x 2 is 4 ranks: on a machine with fewer than 4 cores it measures
# the shaped network only where the link, not the CPU, is the bottleneck (large sizes).
# The cluster is named hpmlb on 10.213.252.0/24 and is taken down on every exit.
set -euo pipefail
mpis=openmpi,mpich
rate=1gbit
quick=0
limit_s=
rounds=1
iters_n=
ppns=2,1
parts=comm,bytes,model,train
while [ $# -gt 0 ]; do
    case "$1" in
    --mpi) mpis=${2:?--mpi needs a value}; shift 2 ;;
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --quick) quick=1; shift ;;
    --limit) limit_s=${2:?--limit needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --iters) iters_n=${2:?--iters needs a value}; shift 2 ;;
    --ppn) ppns=${2:?--ppn needs a value}; shift 2 ;;
    --parts) parts=${2:?--parts needs a value}; shift 2 ;;
    -h | --help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "cluster.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
cluster=$repo/scripts/cluster.sh
name=hpmlb
subnet=10.213.252
data=/usr/share/datasets/fashion-mnist
[ "$(id -u)" -eq 0 ] || { echo "cluster.sh: needs root (network namespaces)" >&2; exit 2; }
for m in ${mpis//,/ }; do
    case $m in openmpi | mpich) ;; *) echo "cluster.sh: --mpi: unknown MPI '$m'" >&2; exit 2 ;; esac
    [ -x "$repo/build/$m/bin/hpml" ] || { echo "cluster.sh: build first: make MPI=$m" >&2; exit 2; }
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap '"$cluster" down --name $name >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
[ -z "$iters_n" ] || [[ $iters_n =~ ^[1-9][0-9]+$ ]] ||
    { echo "cluster.sh: --iters must be a number of at least 10 (got '$iters_n')" >&2; exit 2; }
if [ $quick -eq 1 ]; then
    iters_n=${iters_n:-20}
    sizes=64K:1M epochs=1 limit=(--train-limit 4000 --test-limit 1000)
    byte_sizes=1048576
    limit_s=${limit_s:-60}
else
    iters_n=${iters_n:-100}
    sizes=4K:16M epochs=2 limit=(--train-limit 20000 --test-limit 10000)
    byte_sizes="1048576 16777216"
    limit_s=${limit_s:-150}
fi
iters=(-i "$iters_n" -x $((iters_n / 5)))
case $limit_s in '' | *[!0-9]* | 0) echo "cluster.sh: --limit must be a positive number of seconds (got '$limit_s')" >&2; exit 2 ;; esac
case $rounds in '' | *[!0-9]* | 0) echo "cluster.sh: --rounds must be a positive number (got '$rounds')" >&2; exit 2 ;; esac
for p in ${ppns//,/ }; do
    case $p in 1 | 2) ;; *) echo "cluster.sh: --ppn: 1 or 2 ranks per node (got '$p')" >&2; exit 2 ;; esac
done
for part in ${parts//,/ }; do
    case $part in comm | bytes | model | train) ;; *) echo "cluster.sh: --parts: comm, bytes, model or train (got '$part')" >&2; exit 2 ;; esac
done
want() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }

up() { # RATE|none
    "$cluster" down --name $name >/dev/null 2>&1 || true
    if [ "$1" = none ]; then
        "$cluster" up 2 --name $name --subnet $subnet >/dev/null
    else
        "$cluster" up 2 --name $name --subnet $subnet --rate "$1" >/dev/null
    fi
}
crun() { # MPI PPN program args... (MPICH can hang in MPI_Finalize: docs/cluster.md)
    local m=$1 p=$2
    shift 2
    timeout -k 5 "$limit_s" "$cluster" run --name $name --mpi "$m" --nodes 2 --ppn "$p" -- "$@"
}
# crun_out OUT SHAPE MPI PPN program args...: crun with its output in OUT, for a program
# that prints all it prints at its end (hpml bench --csv, hpml info flush stdout before
# MPI_Finalize). Once OUT has output and has not grown for 5 s while the run goes on, the
# run is hung in MPI_Finalize (MPICH over UCX, docs/cluster.md): it is stopped, and the
# cluster made again (links SHAPE), so that no rank of it spins on during the next run.
crun_out() {
    local out=$1 shape=$2 m=$3 p=$4 pid t=0 last=-1 still=0
    shift 4
    timeout -k 5 "$limit_s" "$cluster" run --name $name --mpi "$m" --nodes 2 --ppn "$p" -- "$@" \
        >"$out" 2>"$tmp/crun.err" &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
        sleep 1
        t=$((t + 1))
        if [ -s "$out" ] && [ "$(stat -c %s "$out")" -eq "$last" ]; then
            still=$((still + 1))
        else
            still=0
        fi
        last=$(stat -c %s "$out")
        if [ $still -ge 5 ] && kill -0 $pid 2>/dev/null; then
            echo "# note: $m 2 x $p: $(basename "$1") $2 printed its results, then had not ended" \
                "$t s after the start: stopped (MPI_Finalize hang, docs/cluster.md)" >&2
            kill $pid 2>/dev/null || true
            wait $pid 2>/dev/null || true
            up "$shape"
            return 0
        fi
    done
    wait $pid 2>/dev/null || { tail -3 "$tmp/crun.err" >&2; up "$shape"; }
    return 0
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$repo" rev-parse --short HEAD)," \
    "$(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo
impls=(mpi hpml hpml:hier)
if want comm; then
echo "| MPI | layout | links | size | mpi µs | hpml µs (algorithm) | hier µs | mpi / hpml | mpi / hier |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
fi
# Shaped first, 2 x 2 first: the targets' runs come before the others.
for shape in "$rate" none; do
    want comm || continue
    up "$shape"
    for m in ${mpis//,/ }; do
        for p in ${ppns//,/ }; do
            csvs=()
            for ((r = 0; r < rounds; r++)); do
                k=$((r % 3))
                order=$(IFS=,; echo "${impls[*]:k},${impls[*]:0:k}")
                order=${order%,}
                out=$tmp/$m-$p-$shape-$r.csv
                crun_out "$out" "$shape" "$m" "$p" "$repo/build/$m/bin/hpml" bench allreduce -T f32 \
                    --impl "$order" -m "$sizes" "${iters[@]}" --csv
                csvs+=("$out")
            done
            crun_out "$tmp/info" "$shape" "$m" "$p" "$repo/build/$m/bin/hpml" info
            /usr/bin/python3 - "$m" "2 x $p" "${shape/none/unshaped}" "$tmp/info" \
                "$tmp/$m-$p-$shape.med" "${csvs[@]}" <<'PY'
import csv, re, statistics, sys
mpi, layout, links, info, medians = sys.argv[1:6]
rounds = []  # per round: {size: {impl: avg_us}}
for path in sys.argv[6:]:
    rows = {}
    try:
        for r in csv.DictReader(open(path)):
            rows.setdefault(int(r["size"]), {})[r["impl"]] = float(r["avg_us"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    rounds.append(rows)
# the default selection's allreduce ranges from `hpml info` ("allreduce  0..512K-1 mpi, ...")
ranges = []
for line in open(info, errors="replace"):
    m = re.match(r"\s+allreduce\s+(.*)", line)
    if m:
        for part in m.group(1).split(", "):
            lo, _, algo = part.partition(" ")
            a, _, b = lo.partition("..")
            ranges.append((a, b, algo))
def unit(s):
    if not s: return float("inf")
    k = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * k[s[-1]] if s[-1] in k else int(s)
def algo(n):
    for a, b, name in ranges:
        if unit(a) <= n <= unit(b): return name
    return "?"
want = {"mpi", "hpml", "hpml:hier"}
sizes = sorted({n for rows in rounds for n in rows})
# "size mpi_us hpml_us hier_us mpi/hpml mpi/hier algorithm rounds": the medians, for the
# model and the summary
med_out = open(medians, "w")
if not sizes:
    print("| %s | %s | %s | (no result: the run failed or timed out) | | | | | |" % (mpi, layout, links))
for n in sizes:
    ok = [rows[n] for rows in rounds if n in rows and want <= rows[n].keys()]
    if not ok: continue
    med = {i: statistics.median(r[i] for r in ok) for i in want}
    r_hpml = statistics.median(r["mpi"] / r["hpml"] for r in ok)
    r_hier = statistics.median(r["mpi"] / r["hpml:hier"] for r in ok)
    size = "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)
    # where hpml's choice is the library's own call, the ratio is that of identical calls
    c_hpml = ("= mpi (%.2f)" if algo(n) == "mpi" else "%.2f") % r_hpml
    print("| %s | %s | %s | %s | %.0f | %.0f (%s) | %.0f | %s | %.2f |" % (
        mpi, layout, links, size, med["mpi"], med["hpml"], algo(n), med["hpml:hier"],
        c_hpml, r_hier))
    med_out.write("%d %r %r %r %.4f %.4f %s %d\n" % (n, med["mpi"], med["hpml"], med["hpml:hier"],
                                                  r_hpml, r_hier, algo(n), len(ok)))
PY
        done
    done
done
# The summary: per MPI, the median ratios of every layout and link side by side.
if want comm; then
    /usr/bin/python3 - "$tmp" "$rate" "$mpis" "$ppns" <<'PY'
import os, statistics, sys
tmp, rate, mpis, ppns = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4].split(",")
def size_name(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)
cols = [(p, sh) for p in ppns for sh in ("none", rate)]
for m in mpis:
    data, rounds = {}, set()
    for p, sh in cols:
        try:
            for line in open(os.path.join(tmp, "%s-%s-%s.med" % (m, p, sh))):
                f = line.split()
                data[(p, sh, int(f[0]))] = (float(f[4]), float(f[5]), f[6])
                rounds.add(int(f[7]))
        except OSError:
            pass
    if not data:
        continue
    print()
    print("%s: mpi / hpml, then mpi / hier; medians of the per-round ratios (%s rounds); "
          "bold where hpml ran hier, \"= mpi\" where it ran the library's own call"
          % (m, "/".join(str(r) for r in sorted(rounds))))
    print()
    print("| size | " + " | ".join("2 × %s %s" % (p, "unshaped" if sh == "none" else sh)
                                  for p, sh in cols) + " |")
    print("|---:|" + "---:|" * len(cols))
    for n in sorted({k[2] for k in data}):
        cells = []
        for p, sh in cols:
            if (p, sh, n) not in data:
                cells.append("")
                continue
            rh, rr, a = data[(p, sh, n)]
            c = "= mpi" if a == "mpi" else ("**%.2f**" if a == "hier" else "%.2f") % rh
            cells.append(c + " / %.2f" % rr)
        print("| %s | %s |" % (size_name(n), " | ".join(cells)))
    # Per layout and links: the target's verdict (hpml >= 0.95x the MPI wherever it runs
    # its own algorithm; elsewhere it is the library's call) and the identical calls' spread.
    print()
    for p, sh in cols:
        own = [(data[k][0], k[2]) for k in sorted(data) if k[:2] == (p, sh) and data[k][2] != "mpi"]
        same = sorted(data[k][0] for k in data if k[:2] == (p, sh) and data[k][2] == "mpi")
        if not own and not same:
            continue
        line = "- %s 2 × %s %s: " % (m, p, "unshaped" if sh == "none" else sh)
        if own:
            low = min(own)
            line += "hpml's own algorithm at %d size%s, lowest mpi / hpml %.2f (%s): %s" % (
                len(own), "" if len(own) == 1 else "s", low[0], size_name(low[1]),
                ">= 0.95 at every size" if round(low[0], 2) >= 0.95 else "below 0.95")
        else:
            line += "the library's own call at every size"
        if same:
            line += "; identical calls (= mpi) at %d size%s read %.2f-%.2f (median %.2f)" % (
                len(same), "" if len(same) == 1 else "s", same[0], same[-1],
                statistics.median(same))
        print(line)
PY
fi

# Copies of the data per link and call (bench/link_copies.sh), on the shaped links: the
# MPI's allreduce, hier, and Open MPI's tuned algorithms forced one by one, with each
# one's average time (30 calls, one run: not a median).
if want bytes; then
up "$rate"
echo
echo "| MPI | layout | size | implementation | copies per link and call | µs per call | bound on mpi / hier from the copies |"
echo "|---|---|---:|---|---:|---:|---:|"
for m in ${mpis//,/ }; do
    for p in ${ppns//,/ }; do
        for n in $byte_sizes; do
            runs=("mpi|mpi|" "hier|hpml:hier|")
            if [ "$m" = openmpi ] && [ "$p" -gt 1 ]; then
                for a in "3 recursive doubling" "4 ring" "6 Rabenseifner"; do
                    runs+=("mpi forced: ${a#* } (${a%% *})|mpi|--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm ${a%% *}")
                done
            fi
            c_mpi=''
            for r in "${runs[@]}"; do
                IFS='|' read -r label impl margs <<<"$r"
                res=$("$repo/bench/link_copies.sh" --name $name --mpi "$m" --ppn "$p" --impl "$impl" \
                    --size "$n" --limit "$limit_s" --mpi-args "$margs") || res=''
                c=$(awk '{ print $2 }' <<<"$res") us=$(awk '{ print $8 }' <<<"$res")
                [ "$label" = mpi ] && c_mpi=$c
                bound=''
                [ "$label" != hier ] || [ -z "$c_mpi" ] || [ -z "$c" ] ||
                    bound=$(awk -v a="$c_mpi" -v b="$c" 'BEGIN { printf "%.2f", a / b }')
                echo "| $m | 2 x $p | $((n >> 20)) MiB | $label | ${c:-(run failed)} | $us | $bound |"
            done
        done
    done
done
fi

# The cost model (bench/scaling_model.py, docs/scaling.md) against the shaped 2 x 2 rows,
# with its parameters measured here: the network's latency (half the round trip of 8
# bytes, `hpml bench latency`, 2 x 1 shaped) and the node's shared-memory rate (the shm
# allreduce of 16 MiB on 2 ranks of one node, taken as 3 passes over the data).
if want model; then
up "$rate"
m0=${mpis%%,*}
alpha=$(crun "$m0" 1 "$repo/build/$m0/bin/hpml" bench latency -m 8:8 -i 2000 -x 200 --csv |
    awk -F, 'NR > 1 && $5 == 8 { print $7; exit }' || true)
case $m0 in
openmpi) one=(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2) ;;
mpich) one=(mpirun.mpich -np 2) ;;
esac
shm_us=$("${one[@]}" "$repo/build/$m0/bin/hpml" bench allreduce -T f32 --impl hpml:shm \
    -m 16M:16M -i 100 -x 10 --csv | awk -F, 'NR > 1 && $2 == "hpml:shm" { print $7; exit }' || true)
shm_gbs=
[ -z "$shm_us" ] || shm_gbs=$(/usr/bin/python3 -c "print('%.1f' % (3 * 16 * 2**20 / ($shm_us * 1e-6) / 1e9))")
# the shaped 2 x 2 medians of the comm part, when it ran (lines "size mpi hpml hier")
measured=()
awk '$1 >= 262144 { print 2, 2, $1, $2, $4 }' "$tmp/$m0-2-$rate.med" >"$tmp/measured" 2>/dev/null &&
    [ -s "$tmp/measured" ] && measured=(--measured "$tmp/measured")
rate_mbit=$(/usr/bin/python3 -c "
import re; m = re.fullmatch(r'(\d+(?:\.\d+)?)([kmg]?)bit', '$rate')
print(float(m.group(1)) * {'k': 1e-3, 'm': 1, 'g': 1e3, '': 1e-6}[m.group(2)])")
echo
if [ -n "$alpha" ] && [ -n "$shm_gbs" ]; then
    echo "# model ($m0): alpha_n ${alpha} µs, link ${rate_mbit} Mbit/s, shared memory ${shm_gbs} GB/s"
    "$repo/bench/scaling_model.py" --alpha-us "$alpha" --link-mbit "$rate_mbit" \
        --shm-gbs "$shm_gbs" --ppn 2 --bytes 1M,16M "${measured[@]}"
else
    echo "# model: its parameters could not be measured (a run failed)"
fi
fi

# Training across 2 shaped nodes, 1 rank each: f32 against bf16 gradients.
want train || exit 0
up "$rate"
echo
echo "| MPI | gradients | images/s | test accuracy | rate / f32 rate |"
echo "|---|---|---:|---:|---:|"
for m in ${mpis//,/ }; do
    for g in f32 bf16; do
        crun "$m" 1 "$repo/build/$m/bin/hpml" train --data "$data" --parallel data \
            --model "dense 512 relu | dense 512 relu | dense 10" --epochs "$epochs" --batch 128 \
            "${limit[@]}" --lr 0.01 --grad-dtype "$g" --json --no-progress \
            >"$tmp/train-$m-$g.json" 2>"$tmp/train.err" || true
    done
    /usr/bin/python3 - "$m" "$tmp/train-$m-f32.json" "$tmp/train-$m-bf16.json" <<'PY'
import json, sys
mpi, files = sys.argv[1], sys.argv[2:]
res = []
for f in files:
    try:
        lines = [l for l in open(f) if l.startswith("{")]
        res.append(json.loads(lines[-1]))
    except (OSError, ValueError, IndexError):
        res.append(None)
base = res[0]["images_per_second"] if res[0] else None
for g, r in zip(("f32", "bf16"), res):
    if r is None:
        print("| %s | %s | (no result) | | |" % (mpi, g)); continue
    ratio = "%.2f" % (r["images_per_second"] / base) if base else ""
    print("| %s | %s | %.0f | %.4f | %s |" % (mpi, g, r["images_per_second"], r["test_accuracy"], ratio))
PY
done
