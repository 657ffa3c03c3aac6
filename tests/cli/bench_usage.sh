#!/usr/bin/env bash
# Bad options: a one-line error naming the problem plus a usage line naming --help, on
# rank 0 only, and exit status 2 (every rank), also for a combination of options no
# implementation can run (in place with hpml's alltoall). --help exits 0.
# hpml-test: timeout=180
. "$(dirname "$0")/bench_common.bash"

# Options are parsed before anything else, so most cases run as a singleton (no
# launcher: 4x faster); a few run on 2 ranks to check that no rank hangs or prints twice.
single() {
    out=$tmp/out.$RANDOM err=$tmp/err.$RANDOM
    "$HPML" bench "$@" >"$out" 2>"$err" </dev/null
    rc=$?
}
ranks=single
expect_usage() { # pattern args...
    local pat=$1
    shift
    if [ $ranks = single ]; then single "$@"; else bench 2 "$@"; fi
    [ $rc -eq 2 ] || fail "'$*': exit $rc, expected 2"
    grep -q "^hpml bench: .*$pat" "$err" || fail "'$*': no '$pat' in: $(head -3 "$err")"
    grep -q "hpml bench --help" "$err" || fail "'$*': no usage hint"
    [ "$(grep -c '^hpml bench:' "$err")" -eq 1 ] || fail "'$*': error printed more than once"
    [ ! -s "$out" ] || fail "'$*': printed on stdout"
}
ranks=2
expect_usage "missing benchmark"
expect_usage "bad -m/--message-size" allreduce -m 64:8
expect_usage "unknown allreduce algorithm 'fastest'" allreduce --impl hpml:fastest
expect_usage "root out of range" bcast -k fixed:7
ranks=single
expect_usage "unknown benchmark 'allreduz'" allreduz
expect_usage "bad -m/--message-size" allreduce -m 1X
expect_usage "-i/--iterations must be an integer from 1 to 100000000 (got '0')" allreduce -i 0
expect_usage "-i/--iterations must be an integer from 1 to 100000000" allreduce -i abc
expect_usage "-x/--warmup must be an integer from 0 to 100000000" allreduce -x -1
expect_usage "bad -T/--type" allreduce -T mpi_complex
expect_usage "bad -z" allreduce -z101
expect_usage "bad -k/--root" bcast -k middle
expect_usage "-W/--window must be an integer from 1 to 100000" bw -W 0
expect_usage "bad -M/--mem-limit" allreduce -M lots
expect_usage "unknown option" allreduce --bogus
expect_usage "needs a value" allreduce -m
# alltoall has one hpml implementation (hpml_alltoallv): --impl hpml passes parsing (the
# singleton then stops at the rank count), an algorithm name does not.
expect_usage "alltoall needs at least 2 ranks" alltoall --impl hpml
expect_usage "hpml has no algorithm choice for alltoall" alltoall --impl hpml:ring
expect_usage "hpml has no gather" gather --impl hpml
expect_usage "bad --impl" allreduce --impl nccl
expect_usage "--plot wants" allreduce --plot out.pdf
# MAX 0 would mean "the default" and silently run the whole sweep; a MIN above the default
# maximum would sweep nothing and exit 0.
expect_usage "bad -m/--message-size '0:0'" allreduce -m 0:0
expect_usage "bad -m/--message-size '0'" allreduce -m 0
expect_usage "default maximum 1048576" allreduce -m 8M:
expect_usage "default maximum 4194304" latency -m 8M:
expect_usage "cannot be combined" allreduce --csv --json
$MPIRUN -np 1 "$HPML" bench allreduce >"$tmp/o1" 2>"$tmp/e1"
[ $? -eq 2 ] && grep -q 'at least 2 ranks' "$tmp/e1" || fail "1 rank: $(cat "$tmp/e1")"
# hpml_alltoallv has no in-place form: -l with hpml's alltoall is refused with the
# options (also through "all"); native MPI's in-place alltoall still runs.
ranks=2
expect_usage "-l/--in-place with alltoall --impl hpml: hpml_alltoallv has no in-place form" \
    alltoall --impl mpi,hpml -l -m 64 -i 2 -x 1
ranks=single
expect_usage "-l/--in-place with alltoall --impl hpml: hpml_alltoallv has no in-place form" \
    alltoall --impl all -l
bench 2 alltoall --impl mpi -l -c -m 64 -i 2 -x 1
[ $rc -eq 0 ] && [ "$(grep -c ' Pass' "$out")" -eq 8 ] \
    || fail "alltoall --impl mpi -l: exit $rc: $(head -3 "$err")"
bench 2 --help
[ $rc -eq 0 ] && grep -q -- '--impl' "$out" && [ "$(grep -c '^Usage: hpml bench' "$out")" -eq 1 ] \
    || fail "--help: exit $rc"
finish
