#!/usr/bin/env bash
# hpml.torch (python/hpml/torch, docs/torch.md): the pytest suite of tests/torch under
# mpirun at 1 and 2 ranks with checking mode on (Horovod's API against MPI's own
# allreduce, single-process training on the same global batch, DDP over gloo), and
# python3 -m hpml.torch.bench: Horovod's output lines (its refusals: tests/torch).
# PyTorch comes from scripts/install-deps.sh --torch (a minute or two on a fresh machine:
# hence the long timeout). Debian's python3-mpi4py is built for
# Open MPI, so under MPICH the test is skipped.
# Env (from tests/run.sh): MPI, MPIRUN, BUILD, HPML_TEST_REPO.
# hpml-test: timeout=900
set -eu
cd "$HPML_TEST_REPO"
py=/usr/bin/python3
skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$MPI" = openmpi ] || skip "mpi4py (python3-mpi4py) is built for Open MPI: hpml.torch runs on the Open MPI build"
if ! "$py" -c 'import torch' 2>/dev/null; then
    scripts/install-deps.sh --torch >&2 || true
    "$py" -c 'import torch' 2>/dev/null ||
        skip "PyTorch is not installed and scripts/install-deps.sh --torch could not install it"
fi
export PYTHONPATH=$HPML_TEST_REPO/python PYTHONDONTWRITEBYTECODE=1
export HPML_LIB=$BUILD/lib/libhpml.so.0 HPML_CHECK=1

for np in 1 2; do
    echo "== pytest at $np rank(s) (${SECONDS}s)"
    # shellcheck disable=SC2086
    $MPIRUN -np "$np" "$py" -m pytest -q -p no:cacheprovider --color=no tests/torch
done

echo "== python3 -m hpml.torch.bench (${SECONDS}s)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# As a user runs it: a process of its own per rank (the other frameworks and options:
# tests/torch/test_bench.py). Horovod's lines, in order, numbers where it has them; rank 0
# alone prints.
args="--framework hpml --model lenet --bf16-allreduce"
# shellcheck disable=SC2086
$MPIRUN -np 2 "$py" -m hpml.torch.bench $args --batch-size 8 --num-warmup-batches 1 \
    --num-batches-per-iter 2 --num-iters 3 >"$out"
awk '
    NR == 1 { ok = $0 == "Model: lenet" }
    NR == 2 { ok = ok && $0 == "Batch size: 8" }
    NR == 3 { ok = ok && $0 == "Number of ranks: 2" }
    NR == 4 { ok = ok && $0 ~ /^Framework: hpml \((non)?blocking\), compression bf16, 1 thread\(s\) per rank$/ }
    NR == 5 { ok = ok && $0 == "Running warmup..." }
    NR == 6 { ok = ok && $0 == "Running benchmark..." }
    NR >= 7 && NR <= 9 { ok = ok && $0 ~ ("^Iter #" NR - 7 ": [0-9]+\\.[0-9] img/sec per rank$") }
    NR == 10 { ok = ok && $0 ~ /^Img\/sec per rank: [0-9]+\.[0-9] \+-[0-9]+\.[0-9]$/ }
    NR == 11 { ok = ok && $0 ~ /^Total img\/sec on 2 rank\(s\): [0-9]+\.[0-9] \+-[0-9]+\.[0-9]$/ }
    END { exit !(ok && NR == 11) }' "$out" || { echo "FAIL: bench $args:"; cat "$out"; exit 1; }
echo "PASS bench $args: $(tail -1 "$out")"

# DDP with hpml's hook under SCHED_FIFO, each rank bound to a core, as
# bench/run_torch_bench.sh measures it: PyTorch's process-group teardown used to hang
# there (a TCPStore thread busy-polling at real-time priority starved its rank's main
# thread; hpml.torch's destroy_process_group). Before the fix one of the first 3 runs hung
# in each of 4 tries (without checking mode, whose extra allgathers make it rarer); a hung
# run spins on both cores until scripts/run-limited.sh, one priority above, kills its ranks.
echo "== DDP teardown under chrt -f 1, ranks bound to cores (${SECONDS}s)"
if ! chrt -f 2 true 2>/dev/null; then
    echo "SKIP (this part): chrt -f is not permitted here (no CAP_SYS_NICE or RLIMIT_RTPRIO)"
elif [ "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" -lt 2 ]; then
    echo "SKIP (this part): 2 ranks bound to cores need 2 CPUs, this process may use $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
else
    args="--framework ddp-hpml --model lenet"
    for i in 1 2 3 4; do
        # shellcheck disable=SC2086
        HPML_CHECK=0 chrt -f 2 scripts/run-limited.sh 30 chrt -f 1 mpirun.openmpi \
            --allow-run-as-root --bind-to core -np 2 "$py" -m hpml.torch.bench $args \
            --batch-size 64 --num-warmup-batches 2 --num-batches-per-iter 5 --num-iters 2 >"$out" ||
            { echo "FAIL: run $i of bench $args under chrt -f 1 (rc $?):"; cat "$out"; exit 1; }
        grep -q '^Total img/sec on 2 rank(s): ' "$out" ||
            { echo "FAIL: run $i of bench $args under chrt -f 1: no total:"; cat "$out"; exit 1; }
    done
    echo "PASS bench $args under chrt -f 1, 4 runs"
fi
echo "== done (${SECONDS}s)"
