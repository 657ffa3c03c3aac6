#!/usr/bin/env bash
# Run hpml's test suite: unit tests (cmocka), multi-rank tests under mpirun at several
# rank counts, command-line tests (tests/cli/*.sh) and the fuzz targets' replay of their
# seed corpus (tests/fuzz/), for each MPI named.
#
#   tests/run.sh [--mpi openmpi,mpich] [--filter REGEX] [--build-root DIR] [--san]
#                [--san-subset MPI]
#
# --san runs the sanitizer builds (build/<mpi>-san, from make SANITIZE=address,undefined).
# --san-subset MPI runs, after the rest, the unit tests and the multi-rank tests of
# build/MPI-san at 2 and 3 ranks (a power of two and one that is not; a test that takes
# neither runs at its first rank count): the sanitizer pass `make test` includes.
# A multi-rank test may declare in its source, on a comment line:
#   hpml-test: ranks=1 2 3 4        rank counts (default 1 2 3 4)
#   hpml-test: mpich-ranks=1 2 3    rank counts under MPICH (busy-polling: keep small)
#   hpml-test: timeout=300          seconds per run (default 300)
# A test that cannot run here exits 77 after printing "SKIP: <reason>": it is counted
# apart, with its reason, and is neither a pass nor a failure.
# Ends with the line "N passed, N failed" (and ", N skipped" when some were); exit status
# 1 when anything failed.
set -u

mpis=openmpi
filter=.
root=build
suffix=
san_subset=
while [ $# -gt 0 ]; do
    case "$1" in
    --mpi) mpis=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --build-root) root=$2; shift 2 ;;
    --san) suffix=-san; shift ;;
    --san-subset) san_subset=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
# One BLAS/OpenMP thread per rank: threads spinning against MPI ranks on 2 cores make
# runs several times slower and timings meaningless.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export HPML_TEST_REPO=$repo
# The MPI runtimes' own allocations are reported as leaks and cannot be suppressed by
# library name, so leak checking is off; every other ASan/UBSan error still fails.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
passed=0 failed=0 skipped=0 failed_names=() skipped_why=()
logdir=$root/test-logs
mkdir -p "$logdir"

directive() { # file key default
    local v
    v=$(grep -m1 -oE "hpml-test: $2=[0-9 ]+" "$1" 2>/dev/null | sed "s/.*$2=//")
    echo "${v:-$3}"
}

run_one() { # name timeout command...
    local name=$1 tmo=$2 log t0 t1 rc
    shift 2
    log=$logdir/$(echo "$name" | tr ' /:' '___').log
    t0=$(date +%s.%N)
    timeout -k 10 "$tmo" "$@" >"$log" 2>&1 </dev/null
    rc=$?
    t1=$(date +%s.%N)
    local dt
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        printf 'PASS  %-60s %6ss\n' "$name" "$dt"
    elif [ $rc -eq 77 ]; then
        local why
        why=$(grep -m1 '^SKIP: ' "$log" | sed 's/^SKIP: //')
        skipped=$((skipped + 1))
        skipped_why+=("$name: ${why:-no reason given}")
        printf 'SKIP  %-60s %6ss  (%s)\n' "$name" "$dt" "${why:-no reason given}"
    else
        failed=$((failed + 1))
        failed_names+=("$name")
        [ $rc -eq 124 ] && echo "(timed out after ${tmo}s)" >>"$log"
        printf 'FAIL  %-60s %6ss  (exit %d, log %s)\n' "$name" "$dt" "$rc" "$log"
        tail -n 25 "$log" | sed 's/^/      | /'
    fi
}

# launcher_for MPI: the launcher array for MPI's multi-rank runs.
launcher_for() {
    case "$1" in
    openmpi)
        launcher=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none)
        # When a rank exits non-zero, Open MPI's launcher sends SIGTERM to the rest and
        # waits this many seconds (default 1, about 2 s in all) before SIGKILL. The error
        # tests end hundreds of jobs that way; a test that needs the grace period (a
        # SIGTERM handler that must run) sets it back itself.
        export OMPI_MCA_odls_base_sigkill_timeout=0
        ;;
    mpich) launcher=(mpirun.mpich) ;;
    *) echo "run.sh: unknown MPI '$1'" >&2; exit 2 ;;
    esac
}

# unit_and_mpi LABEL BUILD MPI ONLY: the unit tests and the multi-rank tests of BUILD, named
# "LABEL unit ..." and "LABEL mpi ... np=N"; with ONLY (a list of rank counts) only those
# of each test's rank counts, or its first when it has none of them.
unit_and_mpi() {
    local label=$1 b=$2 mpi=$3 only=$4 t n src ranks sel tmo np
    for t in "$b"/tests/unit/test_*; do
        [ -x "$t" ] && [ "${t%.[od]}" = "$t" ] || continue
        n=$(basename "$t")
        [[ "$label unit $n" =~ $filter ]] || continue
        run_one "$label unit $n" 300 "$t"
    done
    for t in "$b"/tests/mpi/test_*; do
        [ -x "$t" ] && [ "${t%.[od]}" = "$t" ] || continue
        n=$(basename "$t")
        src=tests/mpi/$n.c
        ranks=$(directive "$src" ranks "1 2 3 4")
        [ "$mpi" = mpich ] && ranks=$(directive "$src" mpich-ranks "$ranks")
        sel=$ranks
        if [ -n "$only" ]; then
            sel=$(for np in $ranks; do [[ " $only " == *" $np "* ]] && echo "$np"; done)
            [ -n "$sel" ] || sel=${ranks%% *}
        fi
        tmo=$(directive "$src" timeout 300)
        for np in $sel; do
            [[ "$label mpi $n np=$np" =~ $filter ]] || continue
            run_one "$label mpi $n np=$np" "$tmo" "${launcher[@]}" -np "$np" "$t"
        done
    done
}

IFS=, read -r -a mpi_list <<<"$mpis"
for mpi in "${mpi_list[@]}"; do
    b=$root/$mpi$suffix
    if [ ! -x "$b/bin/hpml" ]; then
        echo "run.sh: $b/bin/hpml not built (make MPI=$mpi)" >&2
        failed=$((failed + 1)); failed_names+=("$mpi build"); continue
    fi
    launcher_for "$mpi"
    echo "== $mpi =="
    unit_and_mpi "$mpi" "$b" "$mpi" ""
    # Each fuzz target on its committed corpus, built with gcc's ASan + UBSan (make tests).
    # Leak checking is on here: these programs load no MPI runtime.
    for t in "$b"/tests/fuzz/replay_*; do
        [ -x "$t" ] && [ "${t%.[od]}" = "$t" ] || continue
        n=${t##*/replay_}
        [[ "$mpi fuzz $n" =~ $filter ]] || continue
        run_one "$mpi fuzz $n" 120 env ASAN_OPTIONS=detect_leaks=1 "$t" "tests/fuzz/corpus/$n"
    done
    for t in tests/cli/*.sh; do
        [ -f "$t" ] || continue
        n=$(basename "$t" .sh)
        [[ "$mpi cli $n" =~ $filter ]] || continue
        tmo=$(directive "$t" timeout 300)
        run_one "$mpi cli $n" "$tmo" env MPI="$mpi" HPML="$repo/$b/bin/hpml" BUILD="$repo/$b" \
            MPIRUN="${launcher[*]}" bash "$t"
    done
done

# The sanitizer pass: unit tests and multi-rank tests at 2 and 3 ranks.
if [ -n "$san_subset" ]; then
    b=$root/$san_subset-san
    echo "== $san_subset-san (address and undefined-behaviour sanitizers) =="
    launcher_for "$san_subset"
    if [ ! -d "$b/tests" ]; then
        echo "run.sh: $b/tests not built (make MPI=$san_subset SANITIZE=address,undefined tests)" >&2
        failed=$((failed + 1)); failed_names+=("$san_subset-san build")
    fi
    unit_and_mpi "$san_subset-san" "$b" "$san_subset" "2 3"
fi

if [ $failed -gt 0 ]; then
    echo "failed:"
    printf '  %s\n' "${failed_names[@]}"
fi
if [ $skipped -gt 0 ]; then
    echo "skipped:"
    printf '  %s\n' "${skipped_why[@]}"
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ $failed -eq 0 ]
