#!/usr/bin/env bash
# The main job: data-parallel training of a LeNet-5-style CNN on Fashion-MNIST across
# 2 MPI ranks (gradients bucketed and allreduced with hpml's nonblocking allreduce while
# backward runs), with the per-epoch report, then the saved model evaluated by
# `hpml eval`. Called by `make demo` as scripts/demo.sh <openmpi|mpich>.
set -eu
mpi=${1:-openmpi}
repo=$(cd "$(dirname "$0")/.." && pwd)
hpml=$repo/build/$mpi/bin/hpml
[ -x "$hpml" ] || { echo "demo: $hpml not built (make MPI=$mpi)" >&2; exit 1; }
case $mpi in
openmpi) run=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none) ;;
mpich) run=(mpirun.mpich) ;;
*) echo "usage: $0 openmpi|mpich" >&2; exit 2 ;;
esac
# One BLAS thread per rank: the ranks are the parallelism.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# The trained model is kept for `hpml eval` / `hpml predict` after the demo.
out=$repo/build/demo
mkdir -p "$out"
cmd=("${run[@]}" -np 2 "$hpml" train --model lenet --epochs ${DEMO_EPOCHS:-5} --batch 64
     --lr 0.05 --schedule cosine --save "$out/lenet.hpml")
echo "+ ${cmd[*]}"
"${cmd[@]}"
echo
cmd=("${run[@]}" -np 2 "$hpml" eval --model-file "$out/lenet.hpml")
echo "+ ${cmd[*]}"
"${cmd[@]}"
echo
echo "The trained model is $out/lenet.hpml (try: $hpml predict --help)."
