# shellcheck shell=bash disable=SC2034  # sets the caller's variables
# What bench/omb_compare.sh and bench/omb_factors.sh share (sourced, never run): their
# common options, the check of --rounds, and the launcher that pins one rank per core.
#
# omb_parse PROG HELP_LINES ARGS...  parses --mpi, --rounds, --np, -m, --tolerance,
#   --markdown and -h/--help (prints lines HELP_LINES of the script, e.g. '2,25p') into
#   mpi rounds np sizes tol md (the caller sets their defaults first). An option it does
#   not know goes to the caller's function omb_extra_opt ARGS..., which sets omb_used to
#   the number of words it took (0: not its option). Bad usage: one line
#   "PROG: ..." on stderr, exit 2. Then sets run=(launcher ...) for $mpi and $np, bound to
#   ${BIND:-core} (BIND=none unbinds), and exports OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
#   so that no program under test starts BLAS or OpenMP threads.

omb_usage() { # PROG MESSAGE
    echo "$1: $2" >&2
    exit 2
}

omb_parse() {
    local prog=$1 help=$2
    shift 2
    while [ $# -gt 0 ]; do
        case $1 in
        --mpi | --rounds | --np | -m | --tolerance)
            [ $# -ge 2 ] || omb_usage "$prog" "$1 needs a value"
            case $1 in
            --mpi) mpi=$2 ;;
            --rounds) rounds=$2 ;;
            --np) np=$2 ;;
            -m) sizes=$2 ;;
            --tolerance) tol=$2 ;;
            esac
            shift 2
            ;;
        --markdown) md=1; shift ;;
        -h | --help) sed -n "$help" "$0"; exit 0 ;;
        *)
            omb_used=0
            if declare -F omb_extra_opt >/dev/null; then omb_extra_opt "$@"; fi
            [ "$omb_used" -gt 0 ] || omb_usage "$prog" "unknown option '$1' (see --help)"
            [ $# -ge "$omb_used" ] || omb_usage "$prog" "$1 needs a value"
            shift "$omb_used"
            ;;
        esac
    done
    case $rounds in '' | *[!0-9]* | 0) omb_usage "$prog" "--rounds must be a positive integer" ;; esac
    case $np in '' | *[!0-9]* | 0 | 1) omb_usage "$prog" "--np must be an integer of at least 2" ;; esac
    bind=${BIND:-core}
    case $mpi in
    openmpi) run=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to "$bind" -np "$np") ;;
    mpich) run=(mpirun.mpich -bind-to "$bind" -np "$np") ;;
    *) omb_usage "$prog" "--mpi openmpi or mpich" ;;
    esac
    export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
}
