#!/usr/bin/env bash
# hpml bench allreduce --impl mpi against OMB 7.4's osu_allreduce, in paired rounds on the
# same pinned ranks. Per size: each program's median Avg latency, the median over the rounds
# of the round's ratio hpml / OMB with a distribution-free 95% confidence interval, and the
# verdict (bench/omb_compare_stats.py): "within" when the whole interval lies inside
# 1 +- tolerance, "outside" when it lies wholly outside, "open" when it straddles a bound.
#
#   bench/omb_compare.sh --omb-dir DIR [--mpi openmpi|mpich] [--rounds N] [--seconds S]
#                        [--np N] [-m MIN:MAX] [-i N] [-x N] [--tolerance PCT] [--markdown]
#                        [--omb-preload LIB[:LIB...] | --omb-env NAME=VALUE] [--fixed-layout]
# (-m in bytes, as OMB takes it; default 4:1048576; --rounds default 20, at least 6 for
# an interval; --seconds S: no round starts after S seconds, once 6 rounds are done, so
# --rounds is then the most; --tolerance default 5)
#
# DIR is an OMB 7.4 tree built with this MPI, outside the repository (the repository never
# holds OMB), e.g. from a public copy of its sources:
#     ./configure CC=mpicc.openmpi CXX=mpicxx.openmpi
#     make -C c/mpi/collective/blocking osu_allreduce CFLAGS='-g -O2 -DFLOAT_PRECISION=4'
# (the binary is looked for at DIR/c/mpi/collective/blocking/osu_allreduce, then
# DIR/osu_allreduce). FLOAT_PRECISION (OMB's c/util/osu_util.h, default 2) is the number of
# decimals OMB prints; it changes the output format only. With OMB's 2 decimals a 0.33 us
# row moves in 3% steps, which alone can carry an interval past 5%: the statistics then
# print a note. hpml's rows are read from its --csv output (4 decimals).
# Both programs get OMB's options (-m, -i, -x; default datatype mpi_char) and the same
# launcher; a round runs one of each, OMB first in odd rounds and hpml first in even ones,
# so neither always runs on the warmer or the quieter side.
# --omb-preload adds a third program to each round, osu_allreduce with LD_PRELOAD=LIB...
# (e.g. build/openmpi/lib/libhpml.so.0, which loads hpml's libraries: OpenBLAS, LAPACKE,
# gfortran), and two more tables: that program against osu_allreduce (what loading the
# libraries alone does to OMB's own rows) and hpml against that program. The three run
# in turns, each first in every third round.
# --omb-env NAME=VALUE instead adds osu_allreduce with one more environment variable that
# no program reads (e.g. PAD set to 200 characters): OMB against itself with nothing
# changed but the size of its environment. Its table is the method's own
# floor, how far OMB's rows move without any change to timed code (docs/benchmarks.md).
# Each launch of each program gets one more environment variable, OMB_COMPARE_PAD, of 0 to
# 4,095 bytes drawn at random per launch: the size of a process's environment moves its
# memory layout, and one fixed layout can read a few per cent high at one size and
# reproducibly so (docs/benchmarks.md). Randomised, every program is measured over many
# layouts, not one. --fixed-layout launches every program in the caller's environment,
# unchanged.
# Exit 0 when every size is within the tolerance, 1 otherwise, 2 on bad usage (the
# third program's tables do not count).
# Run on an otherwise idle machine (check `uptime`), best under `chrt -f 1`. Ranks are
# bound to cores (BIND=none to unbind); OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1.
set -eu
mpi=openmpi omb='' rounds=20 np=2 sizes=4:1048576 iters='' warm='' tol=5 md=0 budget=''
preload='' preload_set=0 penv='' penv_set=0 fixed=0
omb_extra_opt() {
    case $1 in
    --omb-dir) omb=${2-}; omb_used=2 ;;
    --omb-preload) preload=${2-} preload_set=1; omb_used=2 ;;
    --omb-env) penv=${2-} penv_set=1; omb_used=2 ;;
    --seconds) budget=${2-}; omb_used=2 ;;
    --fixed-layout) fixed=1; omb_used=1 ;;
    -i) iters=${2-}; omb_used=2 ;;
    -x) warm=${2-}; omb_used=2 ;;
    esac
}
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/omb_common.sh
. "$repo/bench/omb_common.sh"
omb_parse omb_compare '2,45p' "$@"
case $budget in *[!0-9]*) omb_usage omb_compare "--seconds must be a whole number" ;; esac
hpml=${HPML:-$repo/build/$mpi/bin/hpml}
[ -n "$omb" ] || omb_usage omb_compare "--omb-dir DIR is required (see --help)"
osu=$omb/c/mpi/collective/blocking/osu_allreduce
[ -x "$osu" ] || osu=$omb/osu_allreduce
[ -x "$osu" ] || omb_usage omb_compare "no osu_allreduce in $omb (build it: see --help)"
[ -x "$hpml" ] || omb_usage omb_compare "no $hpml (make MPI=$mpi)"
if [ "$preload_set" = 1 ]; then
    IFS=: read -ra libs <<<"$preload"
    [ ${#libs[@]} -gt 0 ] || omb_usage omb_compare "--omb-preload: no library named"
    for l in "${libs[@]}"; do
        [ -f "$l" ] || omb_usage omb_compare "--omb-preload: no file '$l'"
    done
fi
if [ "$penv_set" = 1 ]; then
    [ "$preload_set" = 0 ] || omb_usage omb_compare "--omb-env and --omb-preload: one third program at most"
    [[ $penv =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || omb_usage omb_compare "--omb-env: '$penv' is not NAME=VALUE"
fi
# The third program: OMB with the preload or the extra variable (pre_env), or none.
pre_env=()
[ "$preload_set" = 1 ] && pre_env=("LD_PRELOAD=$preload")
[ "$penv_set" = 1 ] && pre_env=("$penv")
pre_desc=${pre_env[*]-}
# The OMB binary must be linked against the same MPI as hpml.
if ! ldd "$osu" | grep -q "lib$( [ "$mpi" = openmpi ] && echo mpi.so || echo mpich)"; then
    omb_usage omb_compare "$osu is not linked against $mpi"
fi
opts=(-m "$sizes")
[ -n "$iters" ] && opts+=(-i "$iters")
[ -n "$warm" ] && opts+=(-x "$warm")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# layout: lay=(OMB_COMPARE_PAD=<a random number of bytes>) for the next launch, or none.
lay=()
layout() {
    local pad
    [ "$fixed" = 1 ] && return
    printf -v pad '%*s' $((RANDOM % 4096)) ''
    lay=("OMB_COMPARE_PAD=${pad// /x}")
}
run_omb() {
    layout
    "${run[@]}" env "${lay[@]}" "$osu" "${opts[@]}" >"$tmp/omb.$1" 2>"$tmp/err" ||
        { echo "omb_compare: osu_allreduce failed: $(head -3 "$tmp/err")" >&2; exit 1; }
}
run_pre() {
    layout
    "${run[@]}" env "${lay[@]}" "${pre_env[@]}" "$osu" "${opts[@]}" >"$tmp/pre.$1" 2>"$tmp/err" ||
        { echo "omb_compare: osu_allreduce with $pre_desc failed: $(head -3 "$tmp/err")" >&2; exit 1; }
}
run_hpml() {
    layout
    "${run[@]}" env "${lay[@]}" "$hpml" bench allreduce --impl mpi --csv "${opts[@]}" >"$tmp/hpml.$1" 2>"$tmp/err" ||
        { echo "omb_compare: hpml bench failed: $(head -3 "$tmp/err")" >&2; exit 1; }
}
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
feat=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|avx512f|fma|f16c' | tr '\n' ' ')
echo "# $mpi, $np ranks, bind-to $bind, paired rounds (at most $rounds${budget:+, $budget s}), -m $sizes${iters:+ -i $iters}${warm:+ -x $warm}"
echo "# $osu against $hpml bench allreduce --impl mpi --csv${pre_desc:+, and against itself with $pre_desc}"
if [ "$fixed" = 1 ]; then
    echo "# every launch with this environment (--fixed-layout)"
else
    echo "# every launch with OMB_COMPARE_PAD of 0-4095 random bytes added to its environment"
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), hpml $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'), ${cpu:-unknown CPU} (${feat% }), load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$SECONDS done=0
for r in $(seq "$rounds"); do
    if [ -n "$budget" ] && [ "$done" -ge 6 ] && [ $((SECONDS - start)) -ge "$budget" ]; then
        break
    fi
    if [ -n "$pre_desc" ]; then
        case $((r % 3)) in
        1) run_omb "$r"; run_hpml "$r"; run_pre "$r" ;;
        2) run_hpml "$r"; run_pre "$r"; run_omb "$r" ;;
        0) run_pre "$r"; run_omb "$r"; run_hpml "$r" ;;
        esac
    elif [ $((r % 2)) -eq 1 ]; then run_omb "$r"; run_hpml "$r"; else run_hpml "$r"; run_omb "$r"; fi
    done=$r
done
rounds=$done
echo "# $rounds rounds in $((SECONDS - start)) s; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
mdopt=()
[ "$md" = 1 ] && mdopt=(--markdown)
status=0
/usr/bin/python3 "$repo/bench/omb_compare_stats.py" "$tmp" "$rounds" "$tol" "${mdopt[@]}" || status=$?
if [ -n "$pre_desc" ]; then
    echo "## osu_allreduce with $pre_desc (pre) against osu_allreduce (omb)"
    /usr/bin/python3 "$repo/bench/omb_compare_stats.py" "$tmp" "$rounds" "$tol" --names omb,pre \
        "${mdopt[@]}" || [ $? -eq 1 ] || status=2
    echo "## hpml bench (hpml) against osu_allreduce with $pre_desc (pre)"
    /usr/bin/python3 "$repo/bench/omb_compare_stats.py" "$tmp" "$rounds" "$tol" --names pre,hpml \
        "${mdopt[@]}" || [ $? -eq 1 ] || status=2
fi
exit $status
