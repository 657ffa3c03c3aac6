#!/usr/bin/env bash
# `make install` into a staging folder gives headers, both libraries (with a soname), the
# profiler's libhpml-prof.so, the hpml binary and a working hpml.pc; a program built only
# from what was installed runs, and runs under the installed hpml prof;
# `make uninstall` removes everything it installed.
# Env (from tests/run.sh): MPI, MPIRUN, HPML_TEST_REPO.
set -eu
cd "$HPML_TEST_REPO"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
prefix=/opt/hpml-test
make -s MPI="$MPI" install DESTDIR="$stage" PREFIX="$prefix" >/dev/null
root=$stage$prefix
for f in include/hpml/hpml.h include/hpml/core.h include/hpml/comm.h lib/libhpml.a \
         lib/libhpml.so lib/libhpml-prof.so lib/pkgconfig/hpml.pc bin/hpml; do
    [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
soname=$(objdump -p "$root/lib/libhpml.so" | awk '/SONAME/ {print $2}')
[ "$soname" = libhpml.so.0 ] || { echo "FAIL: soname is '$soname'"; exit 1; }
grep -q "^prefix=$prefix$" "$root/lib/pkgconfig/hpml.pc" || { echo "FAIL: hpml.pc prefix"; exit 1; }

# Build a program against the installed tree only, through pkg-config.
cat >"$stage/prog.c" <<'CEOF'
#include <hpml/hpml.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL;
    float x[3] = {1, 2, 3};
    int rc;
    MPI_Init(&argc, &argv);
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (rc == 0)
        rc = hpml_allreduce(HPML_IN_PLACE, x, 3, HPML_F32, HPML_SUM, comm);
    hpml_comm_destroy(comm);
    printf("%s %d %g %g %g\n", hpml_version(), rc, x[0], x[1], x[2]);
    MPI_Finalize();
    return rc != 0;
}
CEOF
export PKG_CONFIG_SYSROOT_DIR=$stage PKG_CONFIG_PATH=$root/lib/pkgconfig
flags=$(pkg-config --cflags hpml)
libs=$(pkg-config --libs --static hpml)
mpicc."$MPI" $flags -o "$stage/prog" "$stage/prog.c" $libs
out=$($MPIRUN -np 2 env LD_LIBRARY_PATH="$root/lib" "$stage/prog" | sort -u)
[ "$out" = "0.1.0 0 2 4 6" ] || { echo "FAIL: installed program printed '$out'"; exit 1; }
"$root/bin/hpml" --version | grep -q "hpml 0.1.0" || { echo "FAIL: installed hpml --version"; exit 1; }
# The installed hpml prof finds the installed libhpml-prof.so (../lib next to it).
# shellcheck disable=SC2086
"$root/bin/hpml" prof -q -o "$stage/prof" -- $MPIRUN -np 2 env LD_LIBRARY_PATH="$root/lib" \
    "$stage/prog" >/dev/null 2>&1 && grep -q '"complete": true' "$stage/prof/report.json" ||
    { echo "FAIL: installed hpml prof"; exit 1; }

make -s MPI="$MPI" uninstall DESTDIR="$stage" PREFIX="$prefix" >/dev/null
left=$(find "$root" -type f -o -type l)
[ -z "$left" ] || { echo "FAIL: uninstall left: $left"; exit 1; }
echo "install: ok ($soname, program built from hpml.pc printed '$out')"
