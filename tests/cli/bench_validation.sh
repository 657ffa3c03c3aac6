#!/usr/bin/env bash
# Validation catches a broken algorithm: HPML_BENCH_BREAK=drop-last makes the harness
# zero the last element of every hpml result before checking. Every non-empty size must
# fail (all reported, not just the first), native MPI must still pass, the exit status
# must be non-zero; without the variable everything passes. Every dtype, incl. f16/bf16.
# hpml-test: timeout=300
. "$(dirname "$0")/bench_common.bash"

for dt in f32 f16 bf16 i8; do
    HPML_BENCH_BREAK=drop-last bench 2 allreduce -m 256 -i 2 -x 1 -c --impl mpi,hpml:ring -T "$dt" --csv
    [ $rc -ne 0 ] || fail "$dt: exit 0 with a broken algorithm"
    check_csv "$out" --expect-fail hpml
    n=$(grep -c 'validation failed' "$err")
    want=$(awk -F, 'NR>1 && $2=="hpml:ring" && $5>0' "$out" | wc -l)
    [ "$n" -eq "$want" ] && [ "$n" -gt 0 ] || fail "$dt: $n sizes reported failing on stderr, expected $want"
    grep -q 'element .* is 0, expected' "$err" || fail "$dt: message does not name the element: $(head -2 "$err")"
done
# Other collectives and the nonblocking path, with hpml's own selection, on the other
# dtypes (every dtype is covered once).
for cd in bcast:f64 reduce:u8 allgather:i32 reduce_scatter:i64 iallreduce:f16 ibcast:bf16; do
    c=${cd%:*} dt=${cd#*:}
    HPML_BENCH_BREAK=drop-last bench 2 "$c" -m 64 -i 2 -x 1 -c --impl mpi,hpml -T "$dt" --csv
    [ $rc -ne 0 ] || fail "$c: exit 0 with a broken algorithm"
    check_csv "$out" --expect-fail hpml
done
# Text output shows Fail in the column, and the sweep does not stop at the first.
HPML_BENCH_BREAK=drop-last bench 2 allreduce -m 64 -i 2 -x 1 -c --impl hpml -T f32
[ "$(grep -c ' Fail' "$out")" -eq 5 ] || fail "text: expected 5 Fail rows (4..64): $(cat "$out")"
grep -qE '^0 .* Pass' "$out" || fail "size 0 has nothing to break and must pass"
# The same runs without the variable pass.
bench 2 allreduce -m 256 -i 2 -x 1 -c --impl all -T bf16 --csv
[ $rc -eq 0 ] || fail "correct algorithms: exit $rc: $(head -3 "$err")"
check_csv "$out"
finish
