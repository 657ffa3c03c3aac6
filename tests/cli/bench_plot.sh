#!/usr/bin/env bash
# --plot FILE.svg / FILE.png through gnuplot: latency and bandwidth against size, one line
# per implementation (the SVG names every implementation of --impl all in its legend);
# an unwritable path, or a plot gnuplot leaves incomplete, fails with one line.
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
# gnuplot exits 0 even when its writes fail (a full disk leaves a cut file): a stand-in
# gnuplot that writes half an SVG and exits 0. The cut file must not replace the old one.
mkdir "$tmp/fake"
cat >"$tmp/fake/gnuplot" <<'EOF'
#!/bin/sh
out=$(sed -n "s/^set output '\(.*\)'$/\1/p")
printf '<?xml version="1.0"?>\n<svg>\n<g>\n' >"$out"
EOF
chmod +x "$tmp/fake/gnuplot"
echo old >"$tmp/cut.svg"
PATH="$tmp/fake:$PATH" bench 2 allreduce -m 64 -i 5 -x 1 --plot "$tmp/cut.svg"
[ $rc -eq 1 ] || fail "cut plot: exit $rc, expected 1"
grep -q "^hpml bench: --plot .*cut.svg: gnuplot's file is incomplete" "$err" ||
    fail "cut plot: no 'incomplete' line: $(head -3 "$err")"
[ "$(cat "$tmp/cut.svg")" = old ] || fail "cut plot: the old file was replaced"
ls "$tmp" | grep -q '\.tmp\.' && fail "cut plot: temporary file left behind"
bench 2 bw -m 64K -i 4 -x 1 --plot "$tmp/bw.png"
[ $rc -eq 0 ] || fail "png: exit $rc: $(head -3 "$err")"
[ "$(head -c 4 "$tmp/bw.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "not a PNG"
finish
