#!/usr/bin/env bash
# Scaling efficiency of data-parallel training from 1 to 2 ranks, in pairs of runs.
#
#   bench/train_scaling.sh [openmpi|mpich] [model] [pairs]     (default: openmpi mlp 9)
#
# Horovod's definition: a fixed batch per rank (hpml train --synthetic --batch, default
# 128), efficiency = images/s of 2 ranks / (2 x images/s of 1 rank). This machine drifts
# between fast and slow states within minutes, so every 2-rank run is paired with a
# 1-rank run made just before it, and the median over the pairs is reported next to
# each pair. Ranks are bound one per core (BIND=none to leave them free); run it under
# `chrt -f 1` on an otherwise idle machine. Binary: build/<mpi>/bin/hpml or $HPML;
# ITERS (default 300) and BATCH (default 128) set the run length and the batch per rank.
set -eu
mpi=${1:-openmpi}
model=${2:-mlp}
pairs=${3:-9}
repo=$(cd "$(dirname "$0")/.." && pwd)
hpml=${HPML:-$repo/build/$mpi/bin/hpml}
iters=${ITERS:-300}
batch=${BATCH:-128}
bind=${BIND:-core}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
case $mpi in
openmpi) run=(mpirun.openmpi --allow-run-as-root --bind-to "$bind") ;;
mpich) run=(mpirun.mpich -bind-to "$bind") ;;
*) echo "usage: $0 [openmpi|mpich] [model] [pairs]" >&2; exit 2 ;;
esac
case $pairs in '' | *[!0-9]* | 0) echo "$0: pairs must be a positive integer" >&2; exit 2 ;; esac
[ -x "$hpml" ] || { echo "$0: $hpml: not built (make MPI=$mpi)" >&2; exit 2; }

# The data line of `hpml train --synthetic`: ranks step_ms compute_ms comm_ms img/s/rank
# img/s_total img/cpu_s/rank.
one() {
    "${run[@]}" -np "$1" "$hpml" train --synthetic --model "$model" --batch "$batch" \
        --iters "$iters" --no-progress ${EXTRA:-} | tail -1
}
echo "# machine: $(getconf _NPROCESSORS_ONLN) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC')"
echo "# ${run[*]} -np 1|2 $hpml train --synthetic --model $model --batch $batch --iters $iters"
printf '# %-4s %12s %12s %12s %14s %10s\n' pair "1r img/s" "2r img/s" "2r step_ms" "2r exposed_ms" efficiency
effs=()
for p in $(seq "$pairs"); do
    read -r _ _ _ _ _ t1 _ <<<"$(one 1)"
    read -r _ s2 _ c2 _ t2 _ <<<"$(one 2)"
    e=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", 100 * b / (2 * a) }')
    effs+=("$e")
    printf '  %-4s %12s %12s %12s %14s %9s%%\n' "$p" "$t1" "$t2" "$s2" "$c2" "$e"
done
printf '%s\n' "${effs[@]}" | sort -n | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "# median efficiency %.1f%% over %d pairs (min %.1f%%, max %.1f%%)\n", m, NR, v[1], v[NR] }'
