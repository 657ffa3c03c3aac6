#!/usr/bin/env bash
# The Python package (python/hpml, docs/python.md): the pytest suite of tests/python
# under mpirun at 1, 2 and 3 ranks (one mpirun per rank count runs every test; checking
# mode on, so ranks that fall out of step fail instead of hanging), the estimators
# against the hpml commands, the OMB-Py benchmarks (tests/python/bench_check.py), the loader's
# refusals (a libhpml built for the other MPI, a file that is not libhpml, a missing
# HPML_LIB), the in-tree default location, the package without its compiled module
# hpml._fast, the package `make install` installs (with hpml._fast), and the MPI_Comm
# handle conversion without mpi4py (tests/python/handles_check.py, both MPIs).
# Debian's python3-mpi4py is built for Open MPI, so under MPI=mpich only the refusal of
# the MPICH build and the communicator handles (tests/python/handles_check.py, without
# mpi4py) are checked.
# Env (from tests/run.sh): MPI, MPIRUN, BUILD, HPML_TEST_REPO.
# hpml-test: timeout=300
set -eu
cd "$HPML_TEST_REPO"
py=/usr/bin/python3
export PYTHONPATH=$HPML_TEST_REPO/python PYTHONDONTWRITEBYTECODE=1

# refuses WHAT HPML_LIB: importing hpml fails with one line naming WHAT.
refuses() {
    local out rc=0
    out=$(HPML_LIB=$2 "$py" -c 'import hpml' 2>&1) || rc=$?
    if [ $rc -eq 0 ] || ! grep -q "^hpml.errors.LibraryError: hpml: .*$1" <<<"$out"; then
        echo "FAIL: HPML_LIB=$2 (exit $rc) should be refused with '$1':"
        echo "$out" | tail -3
        exit 1
    fi
    grep "^hpml.errors.LibraryError" <<<"$out"
}

# The handle conversion with this build's MPI, through the package's declarations but
# without mpi4py (so under MPICH too): COMM_WORLD and a communicator made at run time.
# shellcheck disable=SC2086
$MPIRUN -np 2 "$py" tests/python/handles_check.py "$BUILD" "$MPI"

if [ "$MPI" = mpich ]; then
    refuses "is built for MPICH but mpi4py uses Open MPI: load the Open MPI build" \
        "$BUILD/lib/libhpml.so.0"
    echo "PASS (mpi4py is built for Open MPI: the package runs on the Open MPI build)"
    exit 0
fi

refuses "is not a libhpml linked against an MPI library" /bin/sh
refuses "HPML_LIB=/nonexistent/libhpml.so: no such file" /nonexistent/libhpml.so

# The in-tree default: build/openmpi next to python/.
if [ "$BUILD" = "$HPML_TEST_REPO/build/openmpi" ]; then
    got=$(env -u HPML_LIB "$py" -c 'import hpml; print(hpml.library_path)')
    [ "$got" = "$BUILD/lib/libhpml.so.0" ] || { echo "FAIL: in-tree library is '$got'"; exit 1; }
fi

export HPML_LIB=$BUILD/lib/libhpml.so.0 HPML_CHECK=1

# A program that finalises MPI itself ends cleanly (its Comms are not freed after that).
"$py" -c 'from mpi4py import MPI
import hpml
c = hpml.Comm()
MPI.Finalize()' || { echo "FAIL: exit after MPI.Finalize()"; exit 1; }
for np in 1 2 3; do
    echo "== pytest at $np rank(s) (${SECONDS}s)"
    # shellcheck disable=SC2086
    $MPIRUN -np "$np" "$py" -m pytest -q -p no:cacheprovider --color=no tests/python
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

echo "== without hpml._fast (${SECONDS}s)"
# A library with no compiled module beside it: the collectives take the checked path
# (cffi), allreduce_init gives a Prepared, and the results are the same.
mkdir -p "$stage/nofast/lib"
cp -L "$BUILD/lib/libhpml.so.0" "$stage/nofast/lib/"
# shellcheck disable=SC2086
HPML_LIB=$stage/nofast/lib/libhpml.so.0 $MPIRUN -np 2 "$py" -c '
import hpml, hpml._lib, hpml.comm
assert hpml._lib.fast is None and hpml.Comm.allreduce is hpml.Comm._allreduce_checked
c = hpml.Comm()
assert isinstance(c.allreduce_init(hpml.IN_PLACE, bytearray(1)), hpml.comm.Prepared)
c.free()'
# shellcheck disable=SC2086
HPML_LIB=$stage/nofast/lib/libhpml.so.0 $MPIRUN -np 2 "$py" -m pytest -q -p no:cacheprovider \
    --color=no tests/python/test_comm.py -k "allreduce or bcast or prepared"

echo "== python3 -m hpml.bench (${SECONDS}s)"
# python3 -m hpml.bench: OMB-Py's output, validation of every dtype, hpml bench's CSV and
# JSON schema (taken from this build's hpml bench), bad options.
# shellcheck disable=SC2086
{
    $MPIRUN -np 2 "$HPML" bench allreduce -m 4:8 -i 2 -x 1 -c --csv >"$stage/c.csv"
    $MPIRUN -np 2 "$HPML" bench allreduce -m 4:8 -i 2 -x 1 -c --json >"$stage/c.json"
    $MPIRUN -np 2 "$py" tests/python/bench_check.py "$stage/c.csv" "$stage/c.json"
}

echo "== bench/python_vs_c.py (${SECONDS}s)"
# The same-process Python-against-C harness on small settings: a row per size with
# positive times, ratios and 95% intervals (6 rounds: the smallest count that has one),
# a verdict; a bad option is one line on stderr and exit 2.
# shellcheck disable=SC2086
$MPIRUN -np 2 "$py" bench/python_vs_c.py --rounds 6 --iterations 20 --skip 2 --large-iterations 4 \
    --sizes 8,65536 >"$stage/pvc.md"
"$py" - "$stage/pvc.md" <<'EOF'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"\| \d", l)]
assert [r.split("|")[1].strip() for r in rows] == ["8", "65536"], rows
for r in rows:
    cells = [c.strip() for c in r.strip().strip("|").split("|")]
    assert all(float(c) > 0 for c in cells[1:4]), r
    for c in cells[4:10]:
        m, lo, hi = map(float, re.match(r"(\S+) \[(\S+), (\S+)\]", c).groups())
        assert lo <= m <= hi, r
    for c in cells[7:10]:
        assert float(c.split()[0]) > 0, r
    assert cells[10] in ("met", "missed", "not resolved") and cells[11] in (
        "met", "missed", "not resolved"), r
EOF
rc=0
err=$("$py" bench/python_vs_c.py --check --sizes 6 2>&1) || rc=$?
want="python_vs_c.py: --sizes: every size must be a positive multiple of 4 bytes (f32)"
if [ $rc -ne 2 ] || [ "$err" != "$want" ]; then
    echo "FAIL: python_vs_c.py --sizes 6: exit $rc, '$err'"
    exit 1
fi

echo "== the estimators against the commands (${SECONDS}s)"
# The estimators give the hpml commands' numbers, bit for bit, at 2 ranks.
"$py" -c '
import sys, numpy as np
rng = np.random.default_rng(5)
X = rng.normal(0, 6, (4, 5))[rng.integers(0, 4, 301)] + rng.normal(size=(301, 5))
np.save(sys.argv[1] + "/X.npy", X)
np.save(sys.argv[1] + "/y.npy", X @ np.arange(1.0, 6.0) + rng.normal(size=301))' "$stage"
# shellcheck disable=SC2086
{
    $MPIRUN -np 2 "$HPML" kmeans --data "$stage/X.npy" -k 4 --seed 3 --dtype f64 \
        --out "$stage/km"
    $MPIRUN -np 2 "$HPML" pca --data "$stage/X.npy" -k 3 --out "$stage/pca.npy"
    $MPIRUN -np 2 "$HPML" linreg --data "$stage/X.npy" --target "$stage/y.npy" --alpha 0.5 \
        --pred-out "$stage/pred.npy"
} >/dev/null
# shellcheck disable=SC2086
$MPIRUN -np 2 "$py" tests/python/same_as_cli.py "$stage"

echo "== the installed package (${SECONDS}s)"
# Installed: the package, with its compiled hot path, beside the library it loads.
make -s MPI="$MPI" O="${BUILD#"$HPML_TEST_REPO"/}" install DESTDIR="$stage" PREFIX=/opt/hpml-test \
    >/dev/null
site=$(echo "$stage"/opt/hpml-test/lib/python3*/dist-packages)
got=$(cd / && env -u HPML_LIB PYTHONPATH="$site" "$py" -c '
import os, numpy as np, hpml, hpml._lib
c = hpml.Comm()
print(hpml.library_path, c.allreduce(np.arange(3.0)).tolist(), c.bcast(np.arange(2.0)).tolist(),
      os.path.dirname(hpml._lib.fast.__file__) == os.path.dirname(hpml.__file__))
c.free()')
[ "$got" = "$stage/opt/hpml-test/lib/libhpml-openmpi.so.0 [0.0, 1.0, 2.0] [0.0, 1.0] True" ] ||
    { echo "FAIL: installed package: '$got'"; exit 1; }
echo "PASS installed package: $got"
echo "== done (${SECONDS}s)"
