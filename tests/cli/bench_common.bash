# Shared by tests/cli/bench_*.sh (sourced, not a test itself: run.sh runs *.sh only).
# Env from tests/run.sh: HPML (binary), MPIRUN (launcher with flags), MPI, BUILD.
set -u
: "${HPML:?HPML not set}" "${MPIRUN:?MPIRUN not set}" "${MPI:=openmpi}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# bench NP ARGS...: run hpml bench on NP ranks; stdout to $out, stderr to $err, status $rc.
bench() {
    local np=$1
    shift
    out=$tmp/out.$RANDOM err=$tmp/err.$RANDOM
    # shellcheck disable=SC2086
    $MPIRUN -np "$np" "$HPML" bench "$@" >"$out" 2>"$err"
    rc=$?
}
check_csv() { python3 "$here/bench_check.py" "$@" || fail "plausibility: $*"; }
finish() {
    if [ "$fails" -gt 0 ]; then
        echo "$fails failure(s)" >&2
        exit 1
    fi
    echo "ok"
}
