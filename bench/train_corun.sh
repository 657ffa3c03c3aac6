#!/usr/bin/env bash
# What two cores give when both are busy, next to what data-parallel training gets.
#
#   bench/train_corun.sh [openmpi|mpich] [model] [rounds]     (default: openmpi mlp 9)
#
# Each round runs `hpml train --synthetic` (batch 128 per rank) three ways: one rank
# alone on core 0 (solo); two independent 1-rank runs at once, one on each core (co_a on
# core 0, co_b on core 1); and a 2-rank run bound one rank per core (two). co_eff =
# (co_a + co_b) / (2 solo) is what two busy cores give with no communication at all;
# slow_eff = min(co_a, co_b) / solo bounds any synchronous 2-rank run, whose every step
# waits for the slower core; two_eff = two / (2 solo) is the scaling efficiency that
# bench/train_scaling.sh reports. Medians over the rounds at the end. Run it under
# `chrt -f 1` on an otherwise idle machine. Binary: build/<mpi>/bin/hpml or $HPML;
# ITERS (default 300) and BATCH (default 128) as in train_scaling.sh. LAYOUTS (default
# "auto"): the --parallel layouts of the 2-rank run, each measured in every round with
# a column two_eff_<layout>, e.g. LAYOUTS="data hybrid" compares them side by side;
# split1 and split2 are the hybrid layout with 1 or 2 layers split (--split-layers).
# BASE=<another hpml binary> runs every 2-rank layout with it too, in the same round and
# against the same solo run (columns <layout>@base; which build goes first alternates
# from round to round): two builds compared side by side.
set -eu
mpi=${1:-openmpi}
model=${2:-mlp}
rounds=${3:-9}
repo=$(cd "$(dirname "$0")/.." && pwd)
hpml=${HPML:-$repo/build/$mpi/bin/hpml}
iters=${ITERS:-300}
batch=${BATCH:-128}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
case $mpi in
openmpi) run=(mpirun.openmpi --allow-run-as-root) bind=(--bind-to core) free=(--bind-to none) ;;
mpich) run=(mpirun.mpich) bind=(-bind-to core) free=(-bind-to none) ;;
*) echo "usage: $0 [openmpi|mpich] [model] [rounds]" >&2; exit 2 ;;
esac
case $rounds in '' | *[!0-9]* | 0) echo "$0: rounds must be a positive integer" >&2; exit 2 ;; esac
[ -x "$hpml" ] || { echo "$0: $hpml: not built (make MPI=$mpi)" >&2; exit 2; }
base=${BASE:-}
[ -z "$base" ] || [ -x "$base" ] || { echo "$0: BASE: $base is not an executable" >&2; exit 2; }
[ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ] || { echo "$0: needs 2 cores" >&2; exit 2; }
args=(train --synthetic --model "$model" --batch "$batch" --iters "$iters" --no-progress)
read -ra layouts <<<"${LAYOUTS:-auto}"
for l in "${layouts[@]}"; do
    case $l in auto | data | hybrid | split1 | split2) ;;
    *) echo "$0: LAYOUTS: '$l' is not auto, data, hybrid, split1 or split2" >&2; exit 2 ;;
    esac
done
# The columns: each layout, then with BASE each layout on that build.
cols=("${layouts[@]}")
[ -z "$base" ] || for l in "${layouts[@]}"; do cols+=("$l@base"); done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Images/s (the img/s_total column of the synthetic data line).
rate() { tail -1 | awk '{ print $6 }'; }
alone() { # core: a 1-rank run pinned to that core
    taskset -c "$1" "${run[@]}" "${free[@]}" -np 1 "$hpml" "${args[@]}" | rate
}
echo "# machine: $(getconf _NPROCESSORS_ONLN) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC')"
echo "# ${run[*]} -np 1|2 $hpml ${args[*]}"
[ -z "$base" ] || echo "# @base: $base"
printf '# %-5s %9s %9s %9s' round solo co_a co_b
for l in "${cols[@]}"; do printf ' %9s' "two_$l"; done
printf ' %8s %8s' co_eff slow_eff
for l in "${cols[@]}"; do printf ' %14s' "two_eff_$l"; done
echo
co=() slow=()
declare -A two
for r in $(seq "$rounds"); do
    s=$(alone 0)
    alone 0 >"$tmp/a" &
    alone 1 >"$tmp/b"
    wait
    a=$(cat "$tmp/a") b=$(cat "$tmp/b")
    ts=() tes=()
    declare -A got=()
    order=("${cols[@]}")
    if [ -n "$base" ] && [ $((r % 2)) = 0 ]; then # the base build first in even rounds
        order=()
        for l in "${layouts[@]}"; do order+=("$l@base"); done
        order+=("${layouts[@]}")
    fi
    for c in "${order[@]}"; do
        l=${c%@base} bin=$hpml
        [ "$c" = "$l" ] || bin=$base
        case $l in
        split?) lay=(--split-layers "${l#split}") ;;
        *) lay=(--parallel "$l") ;;
        esac
        got[$c]=$("${run[@]}" "${bind[@]}" -np 2 "$bin" "${args[@]}" "${lay[@]}" | rate)
    done
    for c in "${cols[@]}"; do
        t=${got[$c]}
        te=$(awk -v s="$s" -v t="$t" 'BEGIN { printf "%.1f", 100 * t / (2 * s) }')
        ts+=("$t") tes+=("$te")
        two[$c]="${two[$c]:-} $te"
    done
    unset got
    read -r ce se <<<"$(awk -v s="$s" -v a="$a" -v b="$b" 'BEGIN {
        printf "%.1f %.1f", 100 * (a + b) / (2 * s), 100 * (a < b ? a : b) / s }')"
    co+=("$ce") slow+=("$se")
    printf '  %-5s %9s %9s %9s' "$r" "$s" "$a" "$b"
    printf ' %9s' "${ts[@]}"
    printf ' %7s%% %7s%%' "$ce" "$se"
    printf ' %13s%%' "${tes[@]}"
    echo
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
    printf "%.1f%%", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m="# median over $rounds rounds: co_eff $(median "${co[@]}"), slow_eff $(median "${slow[@]}")"
for l in "${cols[@]}"; do
    # shellcheck disable=SC2086 # the list of one layout's values
    m="$m, two_eff_$l $(median ${two[$l]})"
done
echo "$m"
