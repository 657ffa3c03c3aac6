#!/usr/bin/env bash
# Dask over mpi:// against Dask over tcp://, in the same run (docs/dask.md,
# docs/performance.md "dask: mpi:// vs tcp://").
#
#   bench/dask_mpi.sh [--quick] [--until HH:MM] [rounds]          (default: 1 round)
#
# --until HH:MM (UTC, today): start no round after that time once one is complete (a
# measurement window); the table gives the medians of the rounds done.
#
# Each round starts three 4-rank Dask clusters with hpml.dask.initialize (rank 0 the
# scheduler, rank 1 the client, ranks 2 and 3 one worker each, 1 thread), one after the
# other, the order rotating from round to round: mpi:// with event-loop polling progress
# (the default), tcp:// (127.0.0.1), and mpi:// with its progress thread. Each runs
# bench/dask_mpi.py: a worker-to-worker ping-pong through distributed's RPC (1 B to
# 16 MiB), (x + x.T).sum() of an 8192² float64 array, and a merge of two 2M-row pandas
# dataframes. The table at the end gives the medians over the rounds and the ratios
# mpi/tcp. --quick: small sizes and few repeats (a check that the script works).
#
# The ping-pong runs twice: through distributed's RPC, and on one comm between the two
# workers (an echo listener on worker 3), the transport without the RPC layer.
#
# 4 processes (plus their progress threads) on 2 cores: ranks that wait yield the core
# (OMPI_MCA_mpi_yield_when_idle=1, and hpml.dask's waits sleep between tests); during the
# ping-pong the scheduler and the client are idle (the client waits for one answer) and
# only the two workers run; the mpi:// progress of an idle rank sleeps (1 ms at a time).
# Run it on an otherwise idle machine.
#
# The sum and the merge are repeated with the same graph keys: each repeat waits until
# the scheduler has forgotten the result of the one before (distributed's client could
# otherwise skip the release; bench/dask_mpi.py says why), and that wait is reported.
set -eu
quick=
until=
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=--quick; shift ;;
    --until)
        # shellcheck disable=SC2015  # any of the three failing is the error
        [ $# -ge 2 ] && [ -n "$2" ] && until=$(date -u -d "$2" +%s 2>/dev/null) ||
            { echo "$0: --until needs a time HH:MM, not '${2:-}'" >&2; exit 2; }
        shift 2 ;;
    *) break ;;
    esac
done
rounds=${1:-1}
case $rounds in '' | *[!0-9]* | 0) echo "$0: rounds must be a positive integer" >&2; exit 2 ;; esac
repo=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
export PYTHONPATH=$repo/python PYTHONDONTWRITEBYTECODE=1
export HPML_LIB=${HPML_LIB:-$repo/build/openmpi/lib/libhpml.so.0}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
[ -e "$HPML_LIB" ] || { echo "$0: $HPML_LIB: not built (make MPI=openmpi)" >&2; exit 2; }
"$repo/scripts/install-deps.sh" --dask >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

configs=(mpi-poll tcp mpi-thread)
features=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
    grep -x -E 'avx2|f16c|fma|avx512f' | tr '\n' ' ')
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo "# machine: $(getconf _NPROCESSORS_ONLN) cores, $cpu (${features% }),"\
    "load: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC'),"\
    "commit $(git -C "$repo" rev-parse --short HEAD)"
for ((r = 0; r < rounds; r++)); do
    if [ $r -gt 0 ] && [ -n "$until" ] && [ "$(date -u +%s)" -ge "$until" ]; then
        echo "# --until: $r of $rounds rounds done"
        break
    fi
    for ((i = 0; i < 3; i++)); do
        c=${configs[$(((i + r) % 3))]}
        proto=${c%%-*}
        progress=${c#*-}
        [ "$progress" != "$c" ] || progress=thread
        echo "## round $((r + 1)): $c"
        DASK_DISTRIBUTED__COMM__MPI__PROGRESS=$progress \
            mpirun.openmpi --allow-run-as-root --oversubscribe -np 4 \
            "$py" "$repo/bench/dask_mpi.py" "$proto" "$tmp/$c.$r.json" $quick 2>&1 |
            grep -v " INFO - " || true
        [ -s "$tmp/$c.$r.json" ] || { echo "$0: the $c cluster gave no result" >&2; exit 1; }
    done
done

"$py" - "$tmp" <<'EOF'
import glob, json, statistics, sys
tmp = sys.argv[1]
runs = {}
for path in sorted(glob.glob(tmp + "/*.json")):
    runs.setdefault(path.split("/")[-1].split(".")[0], []).append(json.load(open(path)))
med = statistics.median
def pp(c, size, key, kind="pingpong"):
    return med(r[kind][str(size)][key] for r in runs[c])
def app(c, name):
    if not all(name in r for r in runs[c]):
        return None
    return med(r[name]["seconds"] for r in runs[c])
sizes = sorted(int(s) for s in runs["tcp"][0]["pingpong"])
C = ("mpi-poll", "mpi-thread", "tcp")
print("\n| measure | mpi:// (poll, default) | mpi:// (thread) | tcp:// | mpi/tcp (poll) "
      "| mpi/tcp (thread) |")
print("|---|---:|---:|---:|---:|---:|")
for kind, name in (("pingpong", "RPC ping-pong"), ("comm_pingpong", "one comm")):
    for s in sizes:
        p, t, c = (pp(x, s, "latency_us", kind) for x in C)
        print("| %s %s B, one-way latency µs | %.1f | %.1f | %.1f | %.2f× the time "
              "| %.2f× the time |" % (name, s, p, t, c, p / c, t / c))
        if s >= 1 << 20:
            p, t, c = (pp(x, s, "bandwidth_MBps", kind) for x in C)
            print("| %s %s B, bandwidth MB/s | %.0f | %.0f | %.0f | %.2f× | %.2f× |"
                  % (name, s, p, t, c, p / c, t / c))
p, t, c = (med(r["idle_rtt_us"] for r in runs[x]) for x in C)
print("| RPC 1 B round trip after 0.2 s idle, µs | %.1f | %.1f | %.1f | %.2f× the time "
      "| %.2f× the time |" % (p, t, c, p / c, t / c))
for name, label in (("sum", "(x + x.T).sum() %d², s" % runs["tcp"][0]["sum"]["n"]),
                    ("merge", "dataframe merge, s")):
    vals = [app(x, name) for x in C]
    if None in vals:
        continue
    print("| %s | %.3f | %.3f | %.3f | %.2f× the time | %.2f× the time |"
          % (label, *vals, vals[0] / vals[2], vals[1] / vals[2]))
rel = [med([m for r in runs[x] for name in ("sum", "merge") for m in r.get(name, {})
            .get("release_ms", [])]) for x in C]
print("| a result released by the client, gone from the scheduler after, ms | %.1f | %.1f "
      "| %.1f | %.2f× the time | %.2f× the time |" % (*rel, rel[0] / rel[2], rel[1] / rel[2]))
print("\n(medians over %d round(s); latency = half the median round trip)" % len(runs["tcp"]))
print("\nEvery round:")
for c in C:
    print("- %s: comm %d B latency µs %s | comm %d B bandwidth MB/s %s" % (
        c, sizes[0], " ".join("%.1f" % r["comm_pingpong"][str(sizes[0])]["latency_us"]
                              for r in runs[c]),
        sizes[-1], " ".join("%.0f" % r["comm_pingpong"][str(sizes[-1])]["bandwidth_MBps"]
                            for r in runs[c])))
    print("- %s: RPC %d B latency µs %s | RPC %d B bandwidth MB/s %s | sum s (each repeat) %s"
          " | merge s %s" % (
        c, sizes[0], " ".join("%.1f" % r["pingpong"][str(sizes[0])]["latency_us"] for r in runs[c]),
        sizes[-1],
        " ".join("%.0f" % r["pingpong"][str(sizes[-1])]["bandwidth_MBps"] for r in runs[c]),
        " ".join("/".join("%.3f" % t for t in r["sum"]["all"]) for r in runs[c]),
        " ".join("%.3f" % r["merge"]["seconds"] for r in runs[c] if "merge" in r)))
EOF
