#!/usr/bin/env bash
# hpml.dask (docs/dask.md): the mpi:// comm's tests in the style of distributed's
# test_comms.py (tests/dask/test_mpi_comm.py, one rank; again with the progress thread
# for the ping-pong, concurrency and close tests), the refusals (an MPI thread level
# too low for the progress thread, fewer than 3 ranks, an unknown protocol), the
# `distributed.comm.backends` entry point of the installed package (`make install-python`),
# and a 4-rank cluster over mpi:// (tests/dask/cluster_check.py): (x + x.T).sum() of a
# 4096² array equals NumPy's, the released result leaves the scheduler within 5 s, round
# trips after 0.3 s idle take under 0.2 s (median), K-Means through mpi_run equals
# `hpml kmeans` on the same data, every
# rank exits 0 within 5 s of the client script's end, and nothing prints a traceback; the
# same exit over tcp:// when the script shuts the cluster down itself
# (tests/dask/shutdown_check.py).
# On a failure its last lines name the step, the exit status, the load, and the failing
# cluster's error, warning and exit lines; every mpirun has its own time limit.
# Debian's python3-mpi4py is built for Open MPI: under MPICH the test is skipped.
# Env (from tests/run.sh): MPI, MPIRUN, BUILD, HPML, HPML_TEST_REPO.
# hpml-test: timeout=240
set -eu
cd "$HPML_TEST_REPO"
py=/usr/bin/python3
export PYTHONPATH=$HPML_TEST_REPO/python PYTHONDONTWRITEBYTECODE=1
export HPML_LIB=$BUILD/lib/libhpml.so.0

if [ "$MPI" = mpich ]; then
    echo "SKIP: mpi4py is built for Open MPI (hpml.dask runs on the Open MPI build)"
    exit 77
fi
"$py" -c 'import distributed' 2>/dev/null ||
    { echo "FAIL: python3-distributed is missing (scripts/install-deps.sh)"; exit 1; }
# Idle ranks yield the core instead of spinning: 4 ranks share 2 cores here. distributed's
# INFO lines are left out (warnings and errors stay).
export OMPI_MCA_mpi_yield_when_idle=1 DASK_LOGGING__DISTRIBUTED=warning

stage=$(mktemp -d)
# On failure the last lines say which step failed, how, and the machine's load (tests/run.sh
# shows a failed test's last 25 lines): the step's own output is above them, the cluster
# steps' lines that matter (errors, warnings, the ranks' exits, the last INFO lines) are
# repeated. Every mpirun
# has its own time limit, so that a hang ends in this report rather than in run.sh's kill.
step=start
finish() {
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
        if [ -s "$stage/out" ]; then
            echo "-- the last cluster's errors, warnings and exits (INFO lines left out):"
            grep -v " INFO - " "$stage/out" | grep -E \
                "Error|Exception|Traceback|WARNING|warn|assert|exit|client done|Killed|signal" |
                tail -12
            echo "-- its last INFO lines:"
            grep " INFO - " "$stage/out" | tail -6 || true
        fi
        echo "FAIL: tests/cli/dask.sh, step '$step': exit $rc after ${SECONDS}s;" \
            "load $(cut -d' ' -f1-3 /proc/loadavg)"
    fi
    rm -rf "$stage"
    exit $rc
}
trap finish EXIT
trap 'exit 143' TERM
# step NAME: announce the next step (and name it in a failure's report).
step() {
    step=$1
    echo "== $1 (${SECONDS}s)"
}
# limited SECONDS CMD...: CMD, ended after SECONDS (a hang, reported as exit 124).
limited() {
    local s=$1
    shift
    timeout -k 5 "$s" "$@"
}

step "test_comms-style tests over mpi://"
# shellcheck disable=SC2086
limited 120 $MPIRUN -np 1 "$py" -m pytest -q -p no:cacheprovider --color=no \
    tests/dask/test_mpi_comm.py
step "the same with the progress thread"
# shellcheck disable=SC2086
limited 90 env DASK_DISTRIBUTED__COMM__MPI__PROGRESS=thread $MPIRUN -np 1 "$py" -m pytest \
    -q -p no:cacheprovider --color=no -k "ping_pong_sizes or concurrent or either_side" \
    tests/dask/test_mpi_comm.py

step "refusals"
# refuses WHAT CMD...: CMD fails, its last line names WHAT.
refuses() {
    local what=$1 out rc=0
    shift
    out=$("$@" 2>&1) || rc=$?
    if [ $rc -eq 0 ] || ! tail -1 <<<"$out" | grep -qF -- "$what"; then
        echo "FAIL: '$*' (exit $rc) should fail with '$what':"
        echo "$out" | tail -3
        exit 1
    fi
    tail -1 <<<"$out"
}
# Before start(): connecting says the comm is not started; start() at a thread level
# below MPI_THREAD_MULTIPLE is refused (the other refusals: test_mpi_comm.py).
level="with thread progress needs MPI_THREAD_MULTIPLE,"  # (poll: SERIALIZED)
level+=" but MPI was initialised with MPI_THREAD_SERIALIZED"
refuses "$level" \
    env DASK_DISTRIBUTED__COMM__MPI__PROGRESS=thread "$py" -c 'import mpi4py
mpi4py.rc.thread_level = "serialized"
import asyncio, pytest
from distributed.comm import connect
from hpml import dask_comm
with pytest.raises(RuntimeError, match="the mpi:// comm is not started: call hpml.dask.initialize"):
    asyncio.run(connect("mpi://0/0", timeout=1))
dask_comm.start()'

step "the entry point of the installed package"
# `make install-python`, the Python part of `make install`, rebuilds nothing: `make
# install` relinks the library when the commit has changed since the build (the commit
# is compiled in), and one run of this test failed that way, loading a library that
# another run was relinking. The library is the build's (HPML_LIB).
make -s MPI="$MPI" O="${BUILD#"$HPML_TEST_REPO"/}" install-python DESTDIR="$stage" \
    PREFIX=/opt/hpml-test >/dev/null
site=$(echo "$stage"/opt/hpml-test/lib/python3*/dist-packages)
got=$(cd / && PYTHONPATH="$site" "$py" -c '
import sys
from distributed.comm import registry
print(type(registry.get_backend("mpi")).__module__, sys.modules["hpml"].__file__)')
[ "$got" = "hpml.dask_comm $site/hpml/__init__.py" ] ||
    { echo "FAIL: entry point gives '$got'"; exit 1; }
echo "PASS distributed.comm.backends entry point mpi -> $got"

step "4 ranks over mpi://"
"$py" -c '
import sys, numpy as np
rng = np.random.default_rng(5)
X = rng.normal(0, 6, (4, 5))[rng.integers(0, 4, 2001)] + rng.normal(size=(2001, 5))
np.save(sys.argv[1] + "/X.npy", X)
np.save(sys.argv[1] + "/init.npy", X[[0, 1, 2, 3]])' "$stage"
# cluster SCRIPT ARGS...: run SCRIPT at 4 ranks; every rank exits 0 within 5 s of the
# "client done <time>" line, and nothing prints a traceback.
cluster() {
    local rc=0
    # shellcheck disable=SC2016,SC2086
    # distributed's INFO lines go to the output (and are left out of what is shown but
    # for a failure's last lines)
    limited 150 env DASK_LOGGING__DISTRIBUTED=info $MPIRUN -np 4 sh -c '"$0" "$@"; rc=$?
        echo "rank $OMPI_COMM_WORLD_RANK exit $rc at $(date +%s.%N)"' "$py" "$@" \
        >"$stage/out" 2>&1 || rc=$?
    grep -v " INFO - " "$stage/out" || true
    if [ $rc -eq 124 ]; then
        echo "FAIL: the 4-rank job did not end within 150 s (its INFO lines:)"
        grep " INFO - " "$stage/out" | tail -8 || true
        exit 1
    fi
    if grep -q "Traceback" "$stage/out"; then
        echo "FAIL: a traceback was printed"
        exit 1
    fi
    "$py" - "$stage/out" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
# mpirun forwards the ranks' output in pieces: a line may start inside another's
done = float(re.search(r"client done ([0-9.]+)", text).group(1))
exits = re.findall(r"rank (\d+) exit (\d+) at ([0-9.]+)", text)
assert sorted(int(r) for r, _, _ in exits) == [0, 1, 2, 3], exits
for r, rc, t in exits:
    assert rc == "0", "rank %s exited with %s" % (r, rc)
    assert float(t) - done < 5, "rank %s exited %.2f s after the client" % (r, float(t) - done)
print("PASS every rank exited 0, at most %.2f s after the client script"
      % max(float(t) - done for _, _, t in exits))
EOF
}
cluster tests/dask/cluster_check.py mpi "$stage"

step "hpml kmeans on the same data"
# shellcheck disable=SC2086
limited 60 $MPIRUN -np 2 "$HPML" kmeans --data "$stage/X.npy" --init "$stage/init.npy" \
    --dtype f64 --out "$stage/cli" >/dev/null
"$py" - "$stage" <<'EOF'
import sys
import numpy as np
d = np.load(sys.argv[1] + "/dask-km.npz")
centers = np.load(sys.argv[1] + "/cli.centroids.npy")
labels = np.load(sys.argv[1] + "/cli.labels.npy")
# Same algorithm, same start; only the order of the partial sums differs.
np.testing.assert_allclose(d["centers"], centers, rtol=1e-12, atol=1e-12)
assert np.array_equal(d["labels"], labels), "labels differ"
print("PASS K-Means through mpi_run = hpml kmeans (centroids within %.1e, same labels)"
      % np.abs(d["centers"] - centers).max())
EOF
step "4 ranks over tcp://, the script shuts the cluster down"
cluster tests/dask/shutdown_check.py
step "done"
