#!/usr/bin/env bash
# Build and run bench/comm_allreduce.c against build/<mpi> (or $BUILD):
#   bench/run_comm_allreduce.sh openmpi|mpich [NP] [--all] [--interleave] [--min BYTES]
#                               [--max BYTES] [--rounds N]
set -eu
mpi=${1:-openmpi}
np=${2:-2}
shift $(( $# >= 2 ? 2 : $# ))
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$repo/build/$mpi}
out=$build/bench/comm_allreduce
mkdir -p "$(dirname "$out")"
"mpicc.$mpi" -O2 -std=c11 -I"$repo/include" -o "$out" "$repo/bench/comm_allreduce.c" \
    "$build/lib/libhpml.a" $(pkg-config --libs openblas lapacke 2>/dev/null || echo -lopenblas) -lz -lm -pthread
export OPENBLAS_NUM_THREADS=1
case $mpi in
openmpi) exec mpirun.openmpi --allow-run-as-root --bind-to core -np "$np" "$out" "$@" ;;
mpich) exec mpirun.mpich -bind-to core -np "$np" "$out" "$@" ;;
esac
