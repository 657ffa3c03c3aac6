#!/usr/bin/env bash
# --plot FILE.svg / FILE.png through gnuplot: latency and bandwidth against size, one line
# per implementation (the SVG names every implementation of --impl all in its legend).
# hpml-test: timeout=180
. "$(dirname "$0")/bench_common.bash"

if ! command -v gnuplot >/dev/null; then
    echo "gnuplot not installed: skipped"
    exit 0
fi
bench 2 allreduce -m 64K -i 5 -x 1 --impl all -T f32 --plot "$tmp/ar.svg"
[ $rc -eq 0 ] || fail "svg: exit $rc: $(head -3 "$err")"
[ -s "$tmp/ar.svg" ] && grep -q '<svg' "$tmp/ar.svg" || fail "no SVG written"
for im in mpi hpml hpml:ring hpml:recursive_doubling hpml:rabenseifner; do
    grep -q ">$im<" "$tmp/ar.svg" || fail "legend lacks $im"
done
grep -q 'Latency (us)' "$tmp/ar.svg" && grep -q 'Bus bandwidth' "$tmp/ar.svg" || fail "axis labels"
grep -qE '^# Size' "$out" || fail "text table not printed with --plot"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary plot file left behind"
# An unwritable plot path: one line and exit 1 before the benchmark runs; gnuplot's SVG
# never reaches stdout.
bench 2 allreduce -m 64 -i 5 -x 1 --plot "$tmp/no/such/dir/p.svg"
[ $rc -eq 1 ] || fail "unwritable --plot: exit $rc, expected 1"
[ "$(grep -c '^hpml bench:.*cannot create' "$err")" -eq 1 ] ||
    fail "unwritable --plot: expected one 'cannot create' line: $(head -3 "$err")"
grep -q '<svg' "$out" && fail "unwritable --plot: SVG written to stdout"
grep -q '^# Size' "$out" && fail "unwritable --plot: the benchmark ran anyway"
bench 2 bw -m 64K -i 4 -x 1 --plot "$tmp/bw.png"
[ $rc -eq 0 ] || fail "png: exit $rc: $(head -3 "$err")"
[ "$(head -c 4 "$tmp/bw.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "not a PNG"
finish
