#!/usr/bin/env bash
# bench/omb_compare.sh's statistics (bench/omb_compare_stats.py) on rounds whose answer is
# known by hand: the median of the per-round ratios hpml / OMB, its sign-test interval
# (10 rounds: the 2nd and 9th smallest ratios, coverage 97.9%) and the verdict against
# +-5%, each program's printed resolution; both scripts' refusals of bad usage (exit 2,
# one line); and the random environment padding of every launch, with stand-in programs.
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
    # hpml bench --csv: the columns are found by name (here avg_us before size).
    awk -v r="$r" 'BEGIN {
        printf "case,impl,avg_us,min_us,size,validation\n"
        printf "allreduce,mpi,%.4f,9,4,\nallreduce,mpi,%.4f,9,8,\nallreduce,mpi,%.4f,9,16,\n",
            2 * (0.99 + 0.01 * ((r - 1) % 3)), 2 * (1 + 0.01 * (r - 1)), 2 * 1.2 }' >"$tmp/d/hpml.$r"
done
out=$(/usr/bin/python3 "$stats" "$tmp/d" 10 5)
rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "exit $rc with a size outside, expected 1"
row() { grep -E "^ +$1 " <<<"$out" | tr -s ' ' | sed 's/^ //'; }
[ "$(row 4)" = "4 2.00 2.0000 1.000 0.990-1.010 within" ] || fail "4 B: '$(row 4)'"
[ "$(row 8)" = "8 2.00 2.0900 1.045 1.010-1.080 open" ] || fail "8 B: '$(row 8)'"
[ "$(row 16)" = "16 2.00 2.4000 1.200 1.200-1.200 outside" ] || fail "16 B: '$(row 16)'"
grep -q "1 of 3 sizes within ±5%, 1 outside, 1 open (interval coverage 97.9%)" <<<"$out" ||
    fail "summary line: $(tail -1 <<<"$out")"

# At 10% the 8 B interval lies inside: every size but 16 B within.
out=$(/usr/bin/python3 "$stats" "$tmp/d" 10 10 --markdown)
grep -q '^| 8 | 2.00 | 2.0900 | 1.045 | 1.010–1.080 | within |$' <<<"$out" || fail "markdown 8 B at 10%: $out"

# --names compares other files, titled by their names (bench/omb_factors.sh's set-ups).
mkdir "$tmp/n"
for r in $(seq 10); do cp "$tmp/d/omb.$r" "$tmp/n/world.$r"; cp "$tmp/d/hpml.$r" "$tmp/n/dup.$r"; done
out=$(/usr/bin/python3 "$stats" "$tmp/n" 10 5 --names world,dup)
grep -qE '^ +size +world us +dup us ' <<<"$out" || fail "--names header: $(head -1 <<<"$out")"
[ "$(row 8)" = "8 2.00 2.0900 1.045 1.010-1.080 open" ] || fail "--names 8 B: '$(row 8)'"
/usr/bin/python3 "$stats" "$tmp/n" 10 5 --names world 2>/dev/null
[ $? -eq 2 ] || fail "--names with one name: not exit 2"

# Each program's medians at its own printed resolution; a step above 0.5% of the smallest
# latency (OMB's 0.01 us at 0.33 us: 3%) is noted, with the way to print more decimals.
grep -q "^# note" <<<"$out" && fail "a note at 2.00 us: $out"
mkdir "$tmp/q"
for r in $(seq 6); do
    printf '# Size       Avg Latency(us)\n256                     0.33\n' >"$tmp/q/omb.$r"
    printf 'case,impl,size,avg_us\nallreduce,mpi,256,0.3412\n' >"$tmp/q/hpml.$r"
done
out=$(/usr/bin/python3 "$stats" "$tmp/q" 6 5)
[ "$(row 256)" = "256 0.33 0.3412 1.034 1.034-1.034 within" ] || fail "256 B: '$(row 256)'"
grep -q "^# note: OMB prints 2 decimals: its 0.01 us step is 3.0% of its 0.33 us.*FLOAT_PRECISION=4" \
    <<<"$out" || fail "no resolution note for OMB: $out"
[ "$(grep -c '^# note' <<<"$out")" -eq 1 ] || fail "a note for hpml's 4 decimals: $out"

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
for args in "" "--omb-dir $tmp/none" "--omb-dir $tmp --rounds 0" "--omb-dir $tmp --seconds x" "--bogus" \
    "--omb-dir" "--omb-dir $tmp --np 1" "--omb-dir $tmp --mpi"; do
    # shellcheck disable=SC2086
    err=$("$script" $args 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <<<"$err")" -ne 1 ] || ! grep -q "^omb_compare: " <<<"$err"; then
        fail "omb_compare.sh $args: exit $rc, '$err'"
    fi
done
# --omb-preload names files that exist (checked before any run: a stand-in osu_allreduce).
mkdir "$tmp/fake"
printf '#!/bin/sh\nexit 0\n' >"$tmp/fake/osu_allreduce"
chmod +x "$tmp/fake/osu_allreduce"
# refused OPTION ARGS: the script, on the stand-in, refuses ARGS in one line naming OPTION.
refused() {
    local opt=$1 err rc
    shift
    err=$(HPML=$tmp/fake/osu_allreduce "$script" --omb-dir "$tmp/fake" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <<<"$err")" -ne 1 ] || ! grep -q "^omb_compare: $opt" <<<"$err"; then
        fail "omb_compare.sh $*: exit $rc, '$err'"
    fi
}
refused --omb-preload --omb-preload "$tmp/none.so"
refused --omb-preload --omb-preload "$tmp/none.so:$tmp/fake/osu_allreduce"
refused --omb-preload --omb-preload
err=$(HPML=$tmp/fake/osu_allreduce "$script" --omb-dir "$tmp/fake" --omb-preload '' 2>&1 >/dev/null)
rc=$?
if [ $rc -ne 2 ] || ! grep -q "^omb_compare: --omb-preload: no library named$" <<<"$err"; then
    fail "omb_compare.sh --omb-preload '': exit $rc, '$err'"
fi
# --omb-env takes one NAME=VALUE, and not with --omb-preload (one third program).
for v in 1x=2 =x PAD; do
    refused --omb-env --omb-env "$v"
done
refused --omb-env --omb-env
refused --omb-env --omb-env PAD=x --omb-preload "$tmp/fake/osu_allreduce"

# Every launch gets OMB_COMPARE_PAD of 0-4095 random bytes; --fixed-layout none. Stand-ins
# under the real launcher log, on rank 0, the variable's length (-1: not set) and print one
# row each: an osu_allreduce linked with the MPI (the script checks that with ldd) and an
# hpml bench.
mkdir "$tmp/lay"
cat >"$tmp/lay/osu.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *pad = getenv("OMB_COMPARE_PAD");
    int up;
    FILE *f;

    MPI_Initialized(&up); /* keeps the MPI linked */
    if (rank == NULL)
        rank = getenv("PMI_RANK");
    if (rank != NULL && strcmp(rank, "0") != 0)
        return 0;
    if ((f = fopen(getenv("FAKE_LOG"), "a")) == NULL)
        return 1;
    fprintf(f, "%d\n", pad ? (int)strlen(pad) : -1);
    fclose(f);
    printf("# Size       Avg Latency(us)\n4 2.00\n");
    return 0;
}
C
cat >"$tmp/lay/hpml" <<'SH'
#!/bin/sh
[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 0 ] || exit 0
if [ -n "${OMB_COMPARE_PAD+set}" ]; then echo "${#OMB_COMPARE_PAD}"; else echo -1; fi >>"$FAKE_LOG"
printf 'case,impl,size,avg_us\nallreduce,mpi,4,2.0000\n'
SH
chmod +x "$tmp/lay/hpml"
if ! "mpicc.$MPI" -o "$tmp/lay/osu_allreduce" "$tmp/lay/osu.c"; then
    fail "cannot build the stand-in osu_allreduce with mpicc.$MPI"
else
    for mode in random fixed; do
        log=$tmp/lay/$mode.log
        opt=()
        [ $mode = fixed ] && opt=(--fixed-layout)
        out=$(FAKE_LOG=$log HPML=$tmp/lay/hpml "$script" --omb-dir "$tmp/lay" --mpi "$MPI" \
            --rounds 6 "${opt[@]}" 2>&1)
        rc=$?
        [ $rc -eq 0 ] || fail "stand-ins, $mode layout: exit $rc: $out"
        lens=$(sort -n "$log" 2>/dev/null | uniq | tr '\n' ' ')
        [ "$(wc -l <"$log" 2>/dev/null)" = 12 ] || fail "$mode layout: not 12 launches logged: $lens"
        if [ $mode = fixed ]; then
            [ "$lens" = "-1 " ] || fail "--fixed-layout: OMB_COMPARE_PAD set ($lens)"
            grep -q "^# every launch with this environment (--fixed-layout)" <<<"$out" ||
                fail "--fixed-layout: no header line: $out"
        else
            awk '$1 < 0 || $1 > 4095 { bad = 1 } END { exit bad }' "$log" ||
                fail "random layout: a length outside 0-4095 ($lens)"
            [ "$(wc -w <<<"$lens")" -ge 2 ] || fail "random layout: one length in 12 launches ($lens)"
            grep -q "^# every launch with OMB_COMPARE_PAD of 0-4095 random bytes" <<<"$out" ||
                fail "random layout: no header line: $out"
        fi
    done
fi
# bench/omb_factors.sh shares the option parsing (bench/omb_common.sh) and its refusals.
for args in "--bogus" "--rounds 0" "--rounds" "--mpi lam" "--np 1"; do
    # shellcheck disable=SC2086
    err=$("$here/../../bench/omb_factors.sh" $args 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 2 ] || [ "$(wc -l <<<"$err")" -ne 1 ] || ! grep -q "^omb_factors: " <<<"$err"; then
        fail "omb_factors.sh $args: exit $rc, '$err'"
    fi
done
[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo ok
