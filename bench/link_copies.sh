#!/usr/bin/env bash
# How many copies of the data an allreduce puts on each node's link per call, on an
# emulated cluster that is up (scripts/cluster.sh):
#
#   bench/link_copies.sh --name NAME --mpi openmpi|mpich --impl IMPL --size BYTES
#                        [--ppn P] [--mpi-args "ARGS"] [--limit SECONDS]
#
# Runs `hpml bench allreduce -T f32 --impl IMPL -m SIZE:SIZE` twice on all the cluster's
# nodes, with -i 100 and -i 300 (the same warm-up and validation call), reads the bytes
# every node's link sent before and after each run (`scripts/cluster.sh counters`), and
# prints one line:
#
#   copies SENT_PER_CALL / SIZE  bytes SENT_PER_CALL  calls DELTA  avg_us T
#
# where SENT_PER_CALL is the difference between the two runs' bytes, averaged over the
# nodes, divided by the difference of their timed calls: the start-up, the warm-up and the
# validation call cancel; T is the second run's average time per call. Headers (Ethernet,
# IP, TCP) and retransmissions are included: one copy of the data reads 1.00-1.01. IMPL
# is a `hpml bench --impl` name (mpi, hpml, hpml:hier, ...); --mpi-args passes launcher
# options, e.g. Open MPI's
# "--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 6".
# Exits 1 (with the reason on stderr) when a run fails.
set -euo pipefail
name='' mpi='' impl='' size='' ppn=1 extra='' limit_s=120
while [ $# -gt 0 ]; do
    case "$1" in
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --mpi) mpi=${2:?--mpi needs a value}; shift 2 ;;
    --impl) impl=${2:?--impl needs a value}; shift 2 ;;
    --size) size=${2:?--size needs a value}; shift 2 ;;
    --ppn) ppn=${2:?--ppn needs a value}; shift 2 ;;
    --mpi-args) extra=${2?--mpi-args needs a value}; shift 2 ;;
    --limit) limit_s=${2:?--limit needs a value}; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "link_copies.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in name mpi impl size; do
    [ -n "${!v}" ] || { echo "link_copies.sh: --$v is required" >&2; exit 2; }
done
[[ $size =~ ^[0-9]+$ ]] && [ "$size" -gt 0 ] ||
    { echo "link_copies.sh: --size must be a positive number of bytes (got '$size')" >&2; exit 2; }
[[ $limit_s =~ ^[0-9]+$ ]] && [ "$limit_s" -gt 0 ] ||
    { echo "link_copies.sh: --limit must be a positive number of seconds (got '$limit_s')" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
cluster=$repo/scripts/cluster.sh
hpml=$repo/build/$mpi/bin/hpml
[ -x "$hpml" ] || { echo "link_copies.sh: no $hpml (make MPI=$mpi)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sent() { "$cluster" counters --name "$name" | awk '{ s += $2 } END { printf "%.0f %d\n", s, NR }'; }

# run ITERS: prints "BYTES_SENT_BY_ALL_NODES NODES TIMED_CALLS"
run() {
    local before after calls rc=0
    before=$(sent)
    timeout -k 5 "$limit_s" "$cluster" run --name "$name" --mpi "$mpi" --ppn "$ppn" \
        --mpi-args "$extra" -- "$hpml" bench allreduce -T f32 --impl "$impl" \
        -m "$size:$size" -i "$1" -x 20 --csv >"$tmp/out.csv" 2>"$tmp/err" || rc=$?
    after=$(sent)
    calls=$(awk -F, -v i="$impl" 'NR > 1 && $2 == i { print $6; exit }' "$tmp/out.csv")
    if [ $rc -ne 0 ] && [ -n "$calls" ] && { [ $rc -eq 124 ] || [ $rc -eq 137 ]; }; then
        # The results are out: the run hung in MPI_Finalize (docs/cluster.md), after its calls.
        echo "link_copies.sh: note: the $impl run (-i $1) printed its results, then did not end in $limit_s s (stopped)" >&2
    elif [ $rc -ne 0 ]; then
        echo "link_copies.sh: the $impl run (-i $1) failed (exit $rc): $(tail -1 "$tmp/err")" >&2
        exit 1
    fi
    [ -n "$calls" ] || { echo "link_copies.sh: no $impl row in the bench's output" >&2; exit 1; }
    echo "$(( ${after% *} - ${before% *} )) ${after#* } $calls $(awk -F, -v i="$impl" \
        'NR > 1 && $2 == i { print $7; exit }' "$tmp/out.csv")"
}

r1=$(run 100)
r2=$(run 300)
read -r b1 nodes c1 _ <<<"$r1"
read -r b2 _ c2 us <<<"$r2"
[ "$c2" -gt "$c1" ] || { echo "link_copies.sh: the two runs timed the same number of calls" >&2; exit 1; }
awk -v b1="$b1" -v b2="$b2" -v c1="$c1" -v c2="$c2" -v n="$nodes" -v s="$size" -v us="$us" 'BEGIN {
    per = (b2 - b1) / n / (c2 - c1)
    printf "copies %.3f bytes %.0f calls %d avg_us %.0f\n", per / s, per, c2 - c1, us }'
