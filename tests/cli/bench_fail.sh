#!/usr/bin/env bash
# A benchmark that fails the same way on every rank ends like any agreed error: one
# "hpml bench:" line (rank 0's), exit status 1 on every rank, no MPI_Abort. The case:
# ranks that disagree on a setting hpml_comm_create agrees on (HPML_SHM_CHUNK on rank 1
# only), so every rank's hpml_comm_create fails with the same message; and a malformed
# HPML_BENCH_STORE, which `--impl mpi` alone reads, on every rank or on rank 1 only.
# hpml-test: timeout=120
. "$(dirname "$0")/bench_common.bash"

# The rank's number from the launcher: Open MPI's or MPICH's (Hydra's PMI) variable.
# shellcheck disable=SC2016
one_rank_differs='r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}
[ "$r" = 1 ] && export HPML_SHM_CHUNK=65536
exec "$0" "$@"'
for impl in mpi,hpml hpml:ring; do
    out=$tmp/out.$impl err=$tmp/err.$impl
    timeout -k 5 60 $MPIRUN -np 2 sh -c "$one_rank_differs" "$HPML" bench allreduce \
        -m 1024:1024 -i 10 -x 1 --impl "$impl" >"$out" 2>"$err" </dev/null
    rc=$?
    [ $rc -eq 1 ] || fail "--impl $impl: exit $rc, expected 1: $(head -3 "$err")"
    [ "$(grep -c '^hpml bench' "$err")" -eq 1 ] ||
        fail "--impl $impl: expected one 'hpml bench' line: $(head -4 "$err")"
    grep -q "^hpml bench: .*disagree on HPML_SHM_CHUNK" "$err" ||
        fail "--impl $impl: the error does not name the setting: $(head -3 "$err")"
    ! grep -qi "MPI_ABORT" "$err" || fail "--impl $impl: aborted the job: $(head -3 "$err")"
    [ ! -s "$out" ] || fail "--impl $impl: printed results: $(head -3 "$out")"
done

# shellcheck disable=SC2016
rank1_store='r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}
[ "$r" = 1 ] && export HPML_BENCH_STORE=lots
exec "$0" "$@"'
for where in all rank1; do
    out=$tmp/out.$where err=$tmp/err.$where
    if [ $where = all ]; then
        want="HPML_BENCH_STORE='0' is not an integer from 1 to 2147483647"
        HPML_BENCH_STORE=0 timeout -k 5 60 $MPIRUN -np 2 "$HPML" bench allreduce -m 8:8 -i 10 \
            --impl mpi >"$out" 2>"$err" </dev/null
    else
        want="HPML_BENCH_STORE is malformed on another rank"
        timeout -k 5 60 $MPIRUN -np 2 sh -c "$rank1_store" "$HPML" bench allreduce -m 8:8 \
            -i 10 --impl mpi >"$out" 2>"$err" </dev/null
    fi
    rc=$?
    [ $rc -eq 1 ] || fail "HPML_BENCH_STORE ($where): exit $rc, expected 1: $(head -3 "$err")"
    [ "$(grep -c '^hpml bench' "$err")" -eq 1 ] && grep -qF "$want" "$err" ||
        fail "HPML_BENCH_STORE ($where): expected one line naming it: $(head -4 "$err")"
    [ ! -s "$out" ] || fail "HPML_BENCH_STORE ($where): printed results: $(head -3 "$out")"
done
finish
