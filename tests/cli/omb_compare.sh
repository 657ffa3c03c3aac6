#!/usr/bin/env bash
# bench/omb_compare.sh's statistics (bench/omb_compare_stats.py) on rounds whose answer is
# known by hand: the median of the per-round ratios hpml / OMB, its sign-test interval
# (10 rounds: the 2nd and 9th smallest ratios, coverage 97.9%) and the verdict against
# +-5%; and the script's refusals of bad usage (exit 2, one line). No MPI run.
# Env (from tests/run.sh): MPI.
set -u
here=$(cd "$(dirname "$0")" && pwd)
stats=$here/../../bench/omb_compare_stats.py
script=$here/../../bench/omb_compare.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# Round r (1..10): OMB reads 2.00 us at every size; hpml reads 2.00 * ratio, where the
# ratio is 0.99/1.00/1.01 in turn at 4 B (within), 1.00 + 0.01 (r - 1) at 8 B (median
# 1.045, interval 1.01-1.08: straddles 1.05, open) and 1.20 at 16 B (outside).
mkdir "$tmp/d"
for r in $(seq 10); do
    printf '# OSU MPI Allreduce Latency Test v7.4\n# Size       Avg Latency(us)\n4 2.00\n8 2.00\n16 2.00\n' \
        >"$tmp/d/omb.$r"
    awk -v r="$r" 'BEGIN {
        printf "# hpml bench\n# Size  Avg Latency(us)  MaxRank Lat(us)  algbw\n"
        printf "4 %.4f 9 9\n8 %.4f 9 9\n16 %.4f 9 9\n", 2 * (0.99 + 0.01 * ((r - 1) % 3)),
            2 * (1 + 0.01 * (r - 1)), 2 * 1.2 }' >"$tmp/d/hpml.$r"
done
out=$(/usr/bin/python3 "$stats" "$tmp/d" 10 5)
rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "exit $rc with a size outside, expected 1"
row() { grep -E "^ +$1 " <<<"$out" | tr -s ' ' | sed 's/^ //'; }
[ "$(row 4)" = "4 2.00 2.00 1.000 0.990-1.010 within" ] || fail "4 B: '$(row 4)'"
[ "$(row 8)" = "8 2.00 2.09 1.045 1.010-1.080 open" ] || fail "8 B: '$(row 8)'"
[ "$(row 16)" = "16 2.00 2.40 1.200 1.200-1.200 outside" ] || fail "16 B: '$(row 16)'"
grep -q "1 of 3 sizes within ±5%, 1 outside, 1 open (interval coverage 97.9%)" <<<"$out" ||
    fail "summary line: $(tail -1 <<<"$out")"

# At 10% the 8 B interval lies inside: every size but 16 B within.
out=$(/usr/bin/python3 "$stats" "$tmp/d" 10 10 --markdown)
grep -q '^| 8 | 2.00 | 2.09 | 1.045 | 1.010–1.080 | within |$' <<<"$out" || fail "markdown 8 B at 10%: $out"

# --names compares other files, titled by their names (bench/omb_factors.sh's set-ups).
mkdir "$tmp/n"
for r in $(seq 10); do cp "$tmp/d/omb.$r" "$tmp/n/world.$r"; cp "$tmp/d/hpml.$r" "$tmp/n/dup.$r"; done
out=$(/usr/bin/python3 "$stats" "$tmp/n" 10 5 --names world,dup)
grep -qE '^ +size +world us +dup us ' <<<"$out" || fail "--names header: $(head -1 <<<"$out")"
[ "$(row 8)" = "8 2.00 2.09 1.045 1.010-1.080 open" ] || fail "--names 8 B: '$(row 8)'"
/usr/bin/python3 "$stats" "$tmp/n" 10 5 --names world 2>/dev/null
[ $? -eq 2 ] || fail "--names with one name: not exit 2"

# Every size within: exit 0.
mkdir "$tmp/ok"
for r in $(seq 6); do
    printf '4 1.00\n' >"$tmp/ok/omb.$r"
    printf '4 1.01\n' >"$tmp/ok/hpml.$r"
done
/usr/bin/python3 "$stats" "$tmp/ok" 6 5 >/dev/null || fail "all within: exit $?, expected 0"
# Too few rounds for a 95% interval: open, not within.
/usr/bin/python3 "$stats" "$tmp/ok" 5 5 >"$tmp/five" && fail "5 rounds: exit 0, expected 1"
grep -q "fewer than 6 rounds" "$tmp/five" || fail "5 rounds: $(tail -1 "$tmp/five")"

# Bad input: one line on stderr, exit 2.
err=$(/usr/bin/python3 "$stats" "$tmp/d" 11 5 2>&1 >/dev/null)
rc=$?
if [ $rc -ne 2 ] || ! grep -q "^omb_compare_stats: .*\.11" <<<"$err"; then
    fail "a missing round: exit $rc, '$err'"
fi
for args in "" "--omb-dir $tmp/none" "--omb-dir $tmp --rounds 0" "--omb-dir $tmp --seconds x" "--bogus"; do
    # shellcheck disable=SC2086
    err=$("$script" $args 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <<<"$err")" -ne 1 ] || ! grep -q "^omb_compare: " <<<"$err"; then
        fail "omb_compare.sh $args: exit $rc, '$err'"
    fi
done
[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo ok
