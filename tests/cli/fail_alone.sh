#!/usr/bin/env bash
# A rank that fails alone ends the job with one line naming it, instead of leaving the
# others waiting in a collective; ranks that all fail say it once and exit 1.
# - A launch that gives one rank a bad option (MPMD): every rank stops at the comparison
#   of the parsed options (cli_getopt), one line naming the difference, exit 2.
# - One rank out of memory creating the model, before the first collective, and one
#   during training (cli_fail_agreed's rank-local path): "rank 1: out of memory: ...".
# - Every rank out of memory: one line without a rank, exit 1, no MPI_Abort.
# Memory runs out through an LD_PRELOAD shim (tests/cli/fail_alloc.c, built by `make
# tests`), not under the sanitizer builds, whose runtime owns malloc.
# Env (from tests/run.sh): HPML, MPIRUN, BUILD.
# hpml-test: timeout=240
set -u
: "${HPML:?}" "${MPIRUN:?}" "${BUILD:?}"
fail=0
shim=$BUILD/tests/cli/fail_alloc.so
run=(--synthetic --iters 5 --no-progress)

expect() { # want-status expected-substring unwanted-substring command...
    local want=$1 msg=$2 bad=$3 out rc t0
    shift 3
    t0=$(date +%s)
    out=$(timeout 60 "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 124 ]; then
        echo "FAIL: hung (killed after 60 s): ${*: -12}"; fail=1
    elif [ $rc -ne "$want" ] || ! grep -qF -- "$msg" <<<"$out" ||
        { [ -n "$bad" ] && grep -qF -- "$bad" <<<"$out"; }; then
        echo "FAIL: exit $rc (want $want), expected '$msg' (and not '$bad') in:"
        echo "$out" | head -6; fail=1
    else
        echo "ok ($((  $(date +%s) - t0 )) s): $(grep -m1 -F -- "$msg" <<<"$out")"
    fi
}

# shellcheck disable=SC2086 # MPIRUN is a command with its options
expect 2 "hpml train: the ranks were started with different options: rank 1 has '--bogus', rank 0 does not" "" \
    $MPIRUN -np 1 "$HPML" train "${run[@]}" : -np 1 "$HPML" train "${run[@]}" --bogus

case $BUILD in *-san) echo "skipped: out-of-memory cases (sanitizer build)"; exit $fail ;; esac
[ -f "$shim" ] || { echo "FAIL: $shim not built (make tests)"; exit 1; }
oom=(env LD_PRELOAD="$shim")
# The MLP's 535,818 parameters and gradients are 4.1 MiB: refused at 1 MB.
# shellcheck disable=SC2086
expect 1 "hpml train: rank 1: out of memory: nn: cannot allocate the model's 535818 parameters" "" \
    $MPIRUN -np 1 "$HPML" train "${run[@]}" --model mlp \
    : -np 1 "${oom[@]}" FAIL_ALLOC_MIN=1000000 "$HPML" train "${run[@]}" --model mlp
# A small model passes; a batch of 50,000 images (157 MB) fails once training has begun.
# shellcheck disable=SC2086
expect 1 "hpml train: rank 1: out of memory: nn: cannot allocate activations for batch 50000" "" \
    $MPIRUN -np 1 "$HPML" train "${run[@]}" --model "dense 10" --batch 50000 \
    : -np 1 "${oom[@]}" FAIL_ALLOC_MIN=100000000 "$HPML" train "${run[@]}" --model "dense 10" \
    --batch 50000
# shellcheck disable=SC2086
expect 1 "hpml train: out of memory: nn: cannot allocate the model's" "rank" \
    $MPIRUN -np 2 "${oom[@]}" FAIL_ALLOC_MIN=1000000 "$HPML" train "${run[@]}" --model mlp
exit $fail
