#!/usr/bin/env bash
# `hpml tune` on 2 ranks (small sizes, few samples): prints a timing table, writes a
# tuning file that hpml's loader accepts (every rule well formed, one open-ended rule per
# tuned collective), renames it into place only when complete, with no temporary file
# during the run; -o - puts the table on stderr; --max is measured; hier is not tried on
# one node; usage errors exit 2.
# (Loading tuning files, good and malformed, is tested in tests/mpi/test_comm_select.c.)
# Env (from tests/run.sh): HPML, MPIRUN, MPI.
# hpml-test: timeout=300
set -u
fail=0
check() { if eval "$1"; then :; else echo "FAIL: $2"; fail=1; fi; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

out=$($MPIRUN -np 2 "$HPML" tune --max 2K --samples 3 --coll allreduce,bcast -o "$dir/t.txt") ||
    { echo "FAIL: hpml tune exited $?"; exit 1; }
echo "$out"
check '[ -f "$dir/t.txt" ]' "tuning file not written"
check '[ -z "$(ls "$dir" | grep -v "^t.txt$")" ]' "temporary file left behind"
cat "$dir/t.txt"
check 'head -1 "$dir/t.txt" | grep -qx "hpml-tuning 1"' "header line missing"
check 'grep -q "^# allreduce" <<<"$out"' "no allreduce table"
check 'grep -q "shm" <<<"$out"' "shm algorithm not timed"
# Every rule: collective 2 1 max_bytes algorithm, the last one per collective open-ended.
rules=$(grep -v '^#' "$dir/t.txt" | tail -n +2)
check '[ -n "$rules" ]' "no rules"
check '! grep -vqE "^(allreduce|bcast) +2 1 ([0-9]+|inf) [a-z_]+$" <<<"$rules"' "malformed rule"
check '[ "$(grep -c " inf " <<<"$rules")" = 2 ]' "expected one open-ended rule per collective"
check '! grep -q "^reduce " <<<"$rules"' "untuned collective written"

# -o -: the tuning file on stdout, the table on stderr; --max itself is measured (3000 is
# not 8 x 4^k); on one node the multi-node hier algorithm is never tried nor chosen.
$MPIRUN -np 2 "$HPML" tune --max 3000 --samples 3 --coll allreduce -o - >"$dir/so" 2>"$dir/se" ||
    { echo "FAIL: hpml tune -o - exited $?"; fail=1; }
check 'head -1 "$dir/so" | grep -qx "hpml-tuning 1"' "-o -: no tuning file on stdout"
check 'grep -q "^# allreduce" "$dir/se" && ! grep -q "^# allreduce:" "$dir/so"' \
    "-o -: the table is not on stderr (or is mixed into the file)"
check 'grep -qE "^ +3000 " "$dir/se"' "--max 3000 was not measured"
check 'grep -q "(one node)" "$dir/se" && ! grep -q " hier$" "$dir/so"' "hier tried or chosen on one node"
# Usage errors: exit status 2 with a one-line message. --max below the default --min and
# --min above the default --max are usage errors too, not a failed run.
for args in "--coll nope" "--max 12Q" "--samples 0" "--min 1M --max 4K" "extra" "--max 4" \
    "--min 32M"; do
    $MPIRUN -np 2 "$HPML" tune $args -o "$dir/u.txt" >"$dir/err" 2>&1
    rc=$?
    check '[ $rc = 2 ]' "hpml tune $args: exit $rc, expected 2"
    check 'grep -q "hpml tune:" "$dir/err"' "hpml tune $args: no message"
done
check '[ ! -e "$dir/u.txt" ]' "usage error still wrote a file"
check '[ -z "$(ls "$dir" | grep "tmp")" ]' "a failed run left a temporary file behind"
# An unwritable output: one line, exit 1 on every rank, before any timing; no abort.
$MPIRUN -np 2 "$HPML" tune --max 64 -s 1 -q -o "$dir/no/such/dir/t.txt" >"$dir/out" 2>"$dir/err"
rc=$?
check '[ $rc = 1 ]' "unwritable output: exit $rc, expected 1"
check '[ "$(grep -c "^hpml tune:.*cannot create" "$dir/err")" = 1 ]' \
    "unwritable output: expected one 'cannot create' line: $(head -3 "$dir/err")"
check '! grep -qi "MPI_ABORT" "$dir/err"' "unwritable output aborted the job"
check '[ ! -s "$dir/out" ]' "unwritable output: the timing table was printed anyway"
# An output that is a directory: the same, before the timing run (not a failed rename after).
mkdir "$dir/d"
$MPIRUN -np 2 "$HPML" tune --max 64 -s 1 -q -o "$dir/d" >"$dir/out" 2>"$dir/err"
rc=$?
check '[ $rc = 1 ]' "directory output: exit $rc, expected 1"
check '[ "$(grep -c "^hpml tune:.*cannot create.*is a directory" "$dir/err")" = 1 ]' \
    "directory output: expected one 'is a directory' line: $(head -3 "$dir/err")"
check '! grep -qi "MPI_ABORT" "$dir/err"' "directory output aborted the job"
check '[ -z "$(ls "$dir" | grep "tmp")" ]' "directory output left a temporary file behind"
# The table stays in memory during the timing run, so a job torn down meanwhile (another
# rank's MPI_Abort, a kill) leaves nothing behind: no temporary file before the end. (The
# file is written and renamed in the run's last moment; one seen now and again a second
# later, with the run still going, was there during the run.)
$MPIRUN -np 2 "$HPML" tune --max 1M --samples 100 -q -o "$dir/slow.txt" >/dev/null 2>&1 &
pid=$!
sleep 1
if ls "$dir" | grep -q "slow.txt.tmp"; then
    sleep 1
    kill -0 $pid 2>/dev/null && ls "$dir" | grep -q "slow.txt.tmp" &&
        { echo "FAIL: a temporary file exists during the timing run"; fail=1; }
fi
wait $pid
rc=$?
check '[ $rc = 0 ] && [ -f "$dir/slow.txt" ]' "the longer run: exit $rc, or no tuning file"
$MPIRUN -np 1 "$HPML" tune --help | grep -q "HPML_TUNING_FILE" || { echo "FAIL: --help"; fail=1; }
exit $fail
