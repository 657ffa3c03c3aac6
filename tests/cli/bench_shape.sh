#!/usr/bin/env bash
# hpml bench output keeps OMB's shape: "# OSU MPI ... Test" header, "# Datatype: X.",
# "# Size" header, rows = size left-aligned in 10 columns then values right-aligned in 18
# with 2 decimals; -f / -z / -c add columns; --csv and --json parse; size 0 is kept.
# hpml-test: timeout=240
. "$(dirname "$0")/bench_common.bash"

bench 2 allreduce -m 4K -i 10 -x 2 -T mpi_float
[ $rc -eq 0 ] || fail "allreduce exit $rc: $(cat "$err")"
sed -n 1p "$out" | grep -qE '^# OSU MPI Allreduce Latency Test' || fail "title: $(sed -n 1p "$out")"
sed -n 1p "$out" | grep -q 'hpml' || fail "title does not say hpml"
grep -qx '# Datatype: MPI_FLOAT.' "$out" || fail "no '# Datatype: MPI_FLOAT.' line"
grep -qE '^# Size +Avg Latency\(us\)' "$out" || fail "no '# Size  Avg Latency(us)' header"
# Rows: OMB's printf("%-10d%18.2f...").
rows=$(grep -v '^#' "$out")
[ "$(echo "$rows" | head -1 | awk '{print $1}')" = 0 ] || fail "size 0 is not the first row"
echo "$rows" | awk '{ if (length($0) != 10 + 18 * (NF - 1)) bad = 1;
    if (substr($0, 1, 10) !~ /^[0-9]+ *$/) bad = 1;
    for (i = 2; i <= NF; i++) if ($i !~ /^-?[0-9]+\.[0-9][0-9]$/) bad = 1 }
    END { exit bad }' || fail "rows are not %-10d then %18.2f: $(echo "$rows" | head -3)"
[ "$(echo "$rows" | wc -l)" -eq 12 ] || fail "expected sizes 0,4..4096 (12 rows), got $(echo "$rows" | wc -l)"

# -f -z -c: OMB's extra columns, in OMB's order, hpml's after them.
bench 2 allreduce -m 64 -i 10 -x 2 -f -z50,99 -c -T f32
[ $rc -eq 0 ] || fail "allreduce -f -z -c exit $rc: $(cat "$err")"
hdr=$(grep '^# Size' "$out")
echo "$hdr" | grep -qE 'Avg Latency\(us\) +Min Latency\(us\) +Max Latency\(us\) +Iterations +P50 Tail Lat\(us\) +P99 Tail Lat\(us\) +Validation +MaxRank Lat\(us\) +BusBW\(MB/s\)' \
    || fail "-f -z -c header: $hdr"
grep -v '^#' "$out" | awk '$5 != 10 || $8 != "Pass" { bad = 1 } END { exit bad }' \
    || fail "Iterations/Validation columns: $(grep -v '^#' "$out" | head -2)"
# -z alone means 50,90,99.
bench 2 bcast -m 8 -i 10 -x 1 -z
grep -qE 'P50 Tail Lat\(us\) +P90 Tail Lat\(us\) +P99 Tail Lat\(us\)' "$out" || fail "-z default percentiles"

# Point-to-point and nonblocking headers.
bench 2 bw -m 1K -i 4 -x 1
grep -qE '^# OSU MPI Bandwidth Test' "$out" && grep -qE '^# Size +Bandwidth \(MB/s\)$' "$out" \
    || fail "bw header: $(head -5 "$out")"
bench 2 latency -m 64 -i 20 -x 2
grep -qE '^# Size +Latency \(us\)$' "$out" || fail "latency header: $(head -5 "$out")"
bench 2 mbw_mr -m 64 -i 4 -x 1
grep -qE '^# Size +MB/s +Messages/s$' "$out" || fail "mbw_mr header: $(head -5 "$out")"
bench 2 iallreduce -m 64 -i 10 -x 1
grep -qE '^# Size +Overall\(us\) +Compute\(us\) +Pure Comm\.\(us\) +Overlap\(%\)' "$out" \
    || fail "iallreduce header: $(head -5 "$out")"
bench 2 barrier -i 10 -x 1
grep -qE '^# +Avg Latency\(us\)' "$out" || fail "barrier header: $(head -5 "$out")"

# -T all: three tables (MPI_CHAR, MPI_INT, MPI_FLOAT), as OMB.
bench 2 reduce -m 16 -i 5 -x 1 -T all
[ "$(grep -c '^# Datatype: MPI_\(CHAR\|INT\|FLOAT\)\.$' "$out")" -eq 3 ] || fail "-T all: $(grep Datatype "$out")"

# --impl all: a table per statistic, one column per implementation (native MPI first,
# short names spelled out in a legend), a speed-up column (mpi over the fastest hpml
# one, to 2 decimals), every line within 100 columns.
bench 2 allreduce -m 64 -i 5 -x 1 --impl all -T f32 -f
hdr=$(grep -m1 '^# Size' "$out")
echo "$hdr" | grep -qE '^# Size +mpi +hpml +rec_dbl +ring +rabenseif +red_bcast +shm +hier +speed-up$' ||
    fail "--impl all header: $hdr"
grep -q 'rec_dbl = hpml:recursive_doubling' "$out" || fail "--impl all: no legend: $(head -6 "$out")"
grep -q 'Implementations: mpi hpml' "$out" || fail "implementations line"
[ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$out")" -le 100 ] ||
    fail "--impl all wider than 100 columns: $(awk 'length($0) > 100' "$out" | head -2)"
for st in "Avg Latency(us)" "Min Latency(us)" "Iterations" "MaxRank Lat(us)"; do
    grep -q "^# $st" "$out" || fail "--impl all -f: no table of $st"
done
python3 - "$out" <<'EOF2' || fail "--impl all: speed-up column is not mpi / fastest hpml"
import sys
lines = open(sys.argv[1]).read().splitlines()
i = next(k for k, l in enumerate(lines) if l.startswith("# Avg Latency"))
# The last row (64 bytes): the speed-up of the unrounded times lies within what the
# printed (2-decimal) times allow.
j = i + 2
while j + 1 < len(lines) and not lines[j + 1].startswith("#"):
    j += 1
row = lines[j].split()
vals = [float(v) for v in row[1:-1]]
lo = (vals[0] - 0.005) / (min(vals[1:]) + 0.005) - 0.005
hi = (vals[0] + 0.005) / (min(vals[1:]) - 0.005) + 0.005
assert lo <= float(row[-1].rstrip("x")) <= hi, (row, lo, hi)
EOF2
# One hpml implementation without an algorithm choice (alltoall: hpml_alltoallv): all
# means mpi and hpml, side by side, with no note.
bench 2 alltoall -m 64 -i 5 -x 1 --impl all
hdr=$(grep '^# Size' "$out")
echo "$hdr" | grep -qE '^# Size +mpi +hpml +speed-up$' || fail "alltoall --impl all: $hdr"
grep -q '^# Ranks: 2\. Implementations: mpi hpml\.$' "$out" || fail "alltoall implementations: $(head -4 "$out")"
! grep -q '^# Note:' "$out" || fail "alltoall note: $(grep '^# Note:' "$out")"
# Collectives hpml has no implementation of: mpi only, and the output says so.
bench 2 gather -m 64 -i 5 -x 1 --impl all
grep -q '^# Note: hpml has no gather of its own: native MPI only\.' "$out" || fail "gather note: $(head -5 "$out")"

# CSV and JSON parse and hold every size of every implementation.
bench 2 allreduce -m 256 -i 5 -x 1 --impl mpi,hpml:ring --csv -T f32 -z
python3 - "$out" <<'PY' || fail "csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2 * 8, len(rows)               # sizes 0,4,...,256 for 2 impls
assert {r["impl"] for r in rows} == {"mpi", "hpml:ring"}
assert rows[0]["size"] == "0" and "p99_us" in rows[0]
PY
bench 2 allreduce -m 256 -i 5 -x 1 --impl mpi,hpml --json -c -T bf16
python3 - "$out" <<'PY' || fail "json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["benchmark"] == "allreduce" and d["ranks"] == 2 and d["dtype"] == "bf16"
assert d["implementations"] == ["mpi", "hpml"]
assert all(r["validation"] == "pass" for r in d["results"]), d["results"]
assert {r["size"] for r in d["results"]} == {0, 2, 4, 8, 16, 32, 64, 128, 256}
PY
# Progress goes to stderr only on a terminal: never into a log.
[ ! -s "$err" ] || fail "stderr not empty without a terminal: $(head -3 "$err")"
# -M: sizes whose buffers exceed the per-rank limit are left out, and the output says so.
bench 2 allgather -m 64K -i 2 -x 1 -M 16K -T f32
grep -q '^# Note: sizes above 4096 bytes left out: -M 16384 bytes per rank\.' "$out" || fail "-M note: $(grep '^#' "$out")"
[ "$(grep -v '^#' "$out" | tail -1 | awk '{print $1}')" = 4096 ] || fail "-M: last size $(grep -v '^#' "$out" | tail -1)"
# --progress forces the line (ranks never see a terminal under mpirun): stderr only.
bench 2 allreduce -m 64 -i 5 -x 1 --impl mpi,hpml --progress
grep -q 'hpml bench\] allreduce hpml 64 B (16/16)' "$err" || fail "--progress: $(tr '\r' '\n' <"$err" | tail -2)"
! grep -q 'hpml bench\]' "$out" || fail "--progress wrote to stdout"
finish
