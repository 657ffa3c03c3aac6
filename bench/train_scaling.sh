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
# ITERS (default 300) and BATCH (default 128) set the run length and the batch per rank;
# EXTRA adds options to every run. VS="options" adds to every pair a second 2-rank run
# with those options (e.g. VS=--replicated-update), compared with the same 1-rank run;
# odd pairs run it after the plain 2-rank run, even pairs before. VS_HPML=binary runs
# that second 2-rank run with another build (with or without VS).
set -eu
mpi=${1:-openmpi}
model=${2:-mlp}
pairs=${3:-9}
repo=$(cd "$(dirname "$0")/.." && pwd)
hpml=${HPML:-$repo/build/$mpi/bin/hpml}
vs_hpml=${VS_HPML:-$hpml}
vs=0
[ -n "${VS:-}${VS_HPML:-}" ] && vs=1
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
for b in "$hpml" "$vs_hpml"; do
    [ -x "$b" ] || { echo "$0: $b: not built (make MPI=$mpi)" >&2; exit 2; }
done

# The data line of `hpml train --synthetic`: ranks step_ms compute_ms comm_ms img/s/rank
# img/s_total img/cpu_s/rank.
one() { # binary ranks options...
    local bin=$1 np=$2
    shift 2
    # shellcheck disable=SC2086 # EXTRA holds several options
    "${run[@]}" -np "$np" "$bin" train --synthetic --model "$model" --batch "$batch" \
        --iters "$iters" --no-progress ${EXTRA:-} "$@" | tail -1
}
echo "# machine: $(getconf _NPROCESSORS_ONLN) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC')"
echo "# ${run[*]} -np 1|2 $hpml train --synthetic --model $model --batch $batch --iters $iters"
printf '# %-4s %12s %12s %12s %14s %10s' pair "1r img/s" "2r img/s" "2r step_ms" "2r exposed_ms" efficiency
[ $vs = 1 ] && printf ' | %12s %12s %14s %10s' "2r VS img/s" "step_ms" "exposed_ms" "efficiency"
printf '\n'
eff() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 100 * b / (2 * a) }'; }
median() { # label, then the values
    local label=$1
    shift
    printf '%s\n' "$@" | sort -n | awk -v l="$label" '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "# median efficiency%s %.1f%% over %d pairs (min %.1f%%, max %.1f%%)\n", l, m, NR,
            v[1], v[NR] }'
}
effs=() vs_effs=()
for p in $(seq "$pairs"); do
    read -r _ _ _ _ _ t1 _ <<<"$(one "$hpml" 1)"
    # With VS, even pairs run the VS variant first, so that neither always runs later.
    # shellcheck disable=SC2086 # VS holds several options
    [ $vs = 1 ] && [ $((p % 2)) = 0 ] && read -r _ s3 _ c3 _ t3 _ <<<"$(one "$vs_hpml" 2 ${VS:-})"
    read -r _ s2 _ c2 _ t2 _ <<<"$(one "$hpml" 2)"
    # shellcheck disable=SC2086
    [ $vs = 1 ] && [ $((p % 2)) = 1 ] && read -r _ s3 _ c3 _ t3 _ <<<"$(one "$vs_hpml" 2 ${VS:-})"
    e=$(eff "$t1" "$t2")
    effs+=("$e")
    printf '  %-4s %12s %12s %12s %14s %9s%%' "$p" "$t1" "$t2" "$s2" "$c2" "$e"
    if [ $vs = 1 ]; then
        vs_effs+=("$(eff "$t1" "$t3")")
        printf ' | %12s %12s %14s %9s%%' "$t3" "$s3" "$c3" "${vs_effs[-1]}"
    fi
    printf '\n'
done
median "" "${effs[@]}"
[ $vs = 1 ] && median " with ${VS:-}${VS_HPML:+ ($VS_HPML)}" "${vs_effs[@]}"
exit 0
