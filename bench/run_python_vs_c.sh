#!/usr/bin/env bash
# hpml's allreduce from Python against the same loop from C in the same two processes
# (bench/python_vs_c.py: per round and size a block of `hpml bench`'s own loop through
# libhpml's hpml_bench_time_blocking, one of plain comm.allreduce calls and one of
# allreduce_init calls, on one Comm and one pair of arrays; per-round ratios, median and
# 95% interval). The companion of bench/run_python_allreduce.sh, whose separate
# processes differ from each other by more than the 3% it is asked to resolve.
#   bench/run_python_vs_c.sh [python_vs_c.py options: --rounds N --sizes B,B,...
#                             --iterations N --skip N --large-iterations N --large-skip N]
# 2 ranks bound to the cores, Open MPI (Debian's mpi4py is built for it). Env: BUILD
# (default build/openmpi); HPML_* settings reach the run. Run it under `chrt -f 1` on a
# quiet machine.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$repo/build/openmpi}
if [ ! -f "$build/lib/libhpml.so.0" ]; then
    echo "run_python_vs_c: no $build/lib/libhpml.so.0 (make MPI=openmpi)" >&2
    exit 2
fi
/usr/bin/python3 "$repo/bench/python_vs_c.py" --check "$@"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$repo/python
export HPML_LIB=$build/lib/libhpml.so.0
exec mpirun.openmpi --allow-run-as-root --bind-to core -np 2 \
    /usr/bin/python3 "$repo/bench/python_vs_c.py" "$@"
