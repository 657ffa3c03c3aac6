#!/usr/bin/env bash
# `hpml info` tells the truth about this machine on 2 ranks, in text and JSON, and bad
# options give a one-line error, a usage line and exit status 2 on every rank.
# Env (from tests/run.sh): HPML, MPIRUN, MPI.
set -u
fail=0
check() { if eval "$1"; then :; else echo "FAIL: $2"; fail=1; fi; }

out=$($MPIRUN -np 2 "$HPML" info) || { echo "FAIL: hpml info exited $?"; exit 1; }
echo "$out"
host=$(hostname)
cores=$(getconf _NPROCESSORS_ONLN)  # not nproc: it obeys OMP_NUM_THREADS
case "$MPI" in
openmpi) lib='Open MPI' ;;
mpich) lib='MPICH' ;;
esac
check 'grep -q "library: *$lib" <<<"$out"' "MPI library is not $lib"
check 'grep -qE "ranks: +2$" <<<"$out"' "ranks is not 2"
check 'grep -qE "nodes: +1$" <<<"$out"' "nodes is not 1"
check 'grep -qE "^ +$host +2 ranks$" <<<"$out"' "host line for $host with 2 ranks missing"
check 'grep -q "shared memory:  works" <<<"$out"' "shared memory not reported working"
check 'grep -qE "online cores: +$cores$" <<<"$out"' "core count is not $cores"
check 'grep -q "OpenBLAS" <<<"$out"' "BLAS is not OpenBLAS"
check 'grep -qE "^  allreduce +0\.\." <<<"$out"' "selection table for allreduce missing"
# A malformed setting fails every rank with one line naming it (they used to be ignored
# or only warned about); a size takes the one grammar.
for bad in "HPML_LOG_LEVEL=loud:is not one of error|warn|info|debug" \
    "HPML_PROGRESS=bogus:is not one of thread|mpi" "HPML_SIMD=bogus:is not one of auto|avx2" \
    "HPML_SHM_CHUNK=0:is not a size from 64 to 1G" "HPML_SHM_NBUF=0:is not an integer from 3" \
    "HPML_SHM_CHUNK=100G:is not a size from 64 to 1G" "HPML_BCAST_CHUNK=64Q:is not a size"; do
    lvl=$(env "${bad%%:*}" $MPIRUN -np 2 "$HPML" info 2>&1 >/dev/null)
    rc=$?
    check '[ $rc = 1 ] && [ "$(grep -c "^hpml info:" <<<"$lvl")" = 1 ] && grep -qF "${bad#*:}" <<<"$lvl"' \
        "${bad%%:*}: exit $rc, want one line '${bad#*:}': $lvl"
done
check 'HPML_SHM_CHUNK=64KB HPML_BCAST_CHUNK=1M $MPIRUN -np 2 "$HPML" info >/dev/null' \
    "sizes with KB, M refused"
# The node segment the settings ask for must fit the node (MPICH spun in
# MPI_Win_allocate_shared for 400 GB).
seg=$(HPML_SHM_CHUNK=1G HPML_SHM_NBUF=64 $MPIRUN -np 2 "$HPML" info 2>&1 >/dev/null)
check 'grep -q "of node shared memory, more than half of this node" <<<"$seg"' "no limit: $seg"
# The README's table and the registry (hpml info) name the same variables.
readme=$(sed -n '/^| variable | meaning |/,/^$/p' "$HPML_TEST_REPO/README.md" |
    grep -oE 'HPML_[A-Z_]+' | sort -u)
registry=$("$HPML" info --json | /usr/bin/python3 -c \
    'import json, sys; print("\n".join(sorted(s["name"] for s in json.load(sys.stdin)["settings"])))')
check '[ "$readme" = "$registry" ] && [ -n "$registry" ]' \
    "README and registry differ: $(diff <(echo "$readme") <(echo "$registry") | tr '\n' ' ')"
forced=$(HPML_ALGO_ALLREDUCE=ring $MPIRUN -np 2 "$HPML" info)
check 'grep -qE "^  allreduce .*ring" <<<"$forced"' "HPML_ALGO_ALLREDUCE=ring not shown by info"
for f in avx2 f16c fma; do
    if grep -qw "$f" /proc/cpuinfo; then want=yes; else want=no; fi
    check 'grep -q "$f=$want" <<<"$out"' "CPU feature $f should be $want"
done
# The last-level cache as lscpu gives it (the highest level's size per instance).
llc=$(lscpu -C=ONE-SIZE,LEVEL --bytes 2>/dev/null | awk 'NR > 1 && $2 >= lvl { lvl = $2; b = $1 } END { print b }')
if [ -n "$llc" ]; then
    check 'grep -qE "^  cache: +$((llc / 1024)) KiB \(last level\)$" <<<"$out"' \
        "last-level cache is not lscpu's $llc bytes: $(grep cache: <<<"$out")"
fi

# JSON: the same facts, one valid document.
json=$($MPIRUN -np 2 "$HPML" info --json) || { echo "FAIL: info --json exited $?"; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '%s' "$json" >"$tmp"
/usr/bin/python3 - "$host" "$lib" "$tmp" "$llc" <<'PYEOF' || fail=1
import json, sys
d = json.load(open(sys.argv[3]))
host, lib = sys.argv[1], sys.argv[2]
assert d["job"]["ranks"] == 2, d["job"]
assert d["job"]["nodes"] == [{"host": host, "ranks": 2}], d["job"]["nodes"]
assert d["job"]["shared_memory"] is True
assert lib in d["mpi"]["library"], d["mpi"]["library"]
assert d["mpi"]["thread_level"].startswith("MPI_THREAD_")
assert isinstance(d["cpu"]["llc_bytes"], int), d["cpu"]
if sys.argv[4]:
    assert d["cpu"]["llc_bytes"] == int(sys.argv[4]), (d["cpu"], sys.argv[4])
assert d["selection"]["collectives"]["allreduce"]["ranges"][0]["from_bytes"] == 0
print("json ok")
PYEOF

# Bad options: exit 2 on every rank, one error line plus a usage line, no hang.
# (tests/cli/options.sh goes through the getopt cases one by one.)
for args in "--bogus" "info --bogus" "info extra" "info --json=1" "nosuchcommand" ""; do
    err=$(timeout 60 $MPIRUN -np 2 "$HPML" $args 2>&1 >/dev/null)
    rc=$?
    check '[ $rc -eq 2 ]' "'hpml $args' exited $rc, want 2"
    # mpirun adds its own banner about the exit status; hpml's part is two lines, once.
    check '[ $(grep -c "^hpml" <<<"$err") -eq 1 ]' "'hpml $args': want one error line: $err"
    check '[ $(grep -c "^Usage: hpml" <<<"$err") -eq 1 ]' "'hpml $args': want one usage line: $err"
    # Without a launcher (a singleton) stderr is exactly those two lines.
    err=$(timeout 60 "$HPML" $args 2>&1 >/dev/null)
    rc=$?
    check '[ $rc -eq 2 ] && [ $(grep -c . <<<"$err") -eq 2 ]' "singleton 'hpml $args': rc $rc: $err"
done
# --json takes no value: said as such, not as an unknown option.
err=$(timeout 60 "$HPML" info --json=1 2>&1 >/dev/null)
check 'grep -q "^hpml info: option .--json. takes no value" <<<"$err"' "info --json=1: $err"
[ $fail -eq 0 ] && echo "info: all checks passed"
exit $fail
