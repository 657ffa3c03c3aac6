#!/usr/bin/env bash
# `make install` gives headers, both libraries (with a soname), the profiler's
# libhpml-prof-<mpi>.so, the hpml binary and a working pkg-config file, under names that
# carry the MPI (hpml-openmpi.pc, libhpml-mpich.so, ...), so that the Open MPI and MPICH builds install side by side; the
# Open MPI build also owns the plain names (hpml.pc, libhpml.so, bin/hpml). The examples
# (examples/*.c) build with plain `cc` and `pkg-config --cflags --libs hpml-$MPI` only
# (no MPI wrapper, no LD_LIBRARY_PATH: the rpath finds the library) and run correctly;
# the installed hpml prof finds its own MPI's profiler library and profiles an example;
# `make uninstall` of both removes everything installed.
# Env (from tests/run.sh): MPI, MPIRUN, HPML_TEST_REPO.
set -eu
cd "$HPML_TEST_REPO"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
other=$([ "$MPI" = openmpi ] && echo mpich || echo openmpi)

# Staged (DESTDIR) install of this MPI: the files and their names.
prefix=/opt/hpml-test
make -s MPI="$MPI" install DESTDIR="$stage/d" PREFIX="$prefix" >/dev/null
root=$stage/d$prefix
for f in include/hpml/hpml.h include/hpml/core.h include/hpml/comm.h lib/libhpml-$MPI.a \
         lib/libhpml-$MPI.so lib/libhpml-prof-$MPI.so lib/pkgconfig/hpml-$MPI.pc bin/hpml-$MPI; do
    [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
soname=$(objdump -p "$root/lib/libhpml-$MPI.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libhpml-$MPI.so.0" ] || { echo "FAIL: soname is '$soname'"; exit 1; }
grep -q "^prefix=$prefix$" "$root/lib/pkgconfig/hpml-$MPI.pc" || { echo "FAIL: .pc prefix"; exit 1; }
make -s MPI="$MPI" uninstall DESTDIR="$stage/d" PREFIX="$prefix" >/dev/null
left=$(find "$root" -type f -o -type l)
[ -z "$left" ] || { echo "FAIL: uninstall left: $left"; exit 1; }

# Both MPIs into one prefix (no DESTDIR, so the rpath points where the files are).
p=$stage/p
make -s MPI=openmpi install PREFIX="$p" >/dev/null
make -s MPI=mpich install PREFIX="$p" >/dev/null
for m in openmpi mpich; do
    for f in lib/libhpml-$m.so.0.1.0 lib/libhpml-$m.a lib/libhpml-prof-$m.so lib/pkgconfig/hpml-$m.pc \
             bin/hpml-$m; do
        [ -f "$p/$f" ] || { echo "FAIL: $f missing with both MPIs installed"; exit 1; }
    done
    "$p/bin/hpml-$m" info | grep -qi "$m" || { echo "FAIL: hpml-$m is not the $m build"; exit 1; }
done
[ "$(readlink "$p/lib/pkgconfig/hpml.pc")" = hpml-openmpi.pc ] &&
    [ "$(readlink "$p/bin/hpml")" = hpml-openmpi ] || { echo "FAIL: default names"; exit 1; }
"$p/bin/hpml" --version | grep -q "hpml 0.1.0" || { echo "FAIL: installed hpml --version"; exit 1; }

export PKG_CONFIG_PATH=$p/lib/pkgconfig
pkg-config --print-requires "hpml-$MPI" | grep -qE "^(ompi-c|mpich)" ||
    { echo "FAIL: hpml-$MPI.pc does not require the MPI"; exit 1; }
out=""
for src in examples/*.c; do
    e=$stage/$(basename "$src" .c)
    # shellcheck disable=SC2046  # pkg-config's words
    cc -std=c11 -O2 -o "$e" "$src" $(pkg-config --cflags --libs "hpml-$MPI") ||
        { echo "FAIL: $src does not build with pkg-config hpml-$MPI"; exit 1; }
    ldd "$e" | grep -q "libhpml-$MPI.so.0 => $p/lib/" ||
        { echo "FAIL: $e does not find libhpml-$MPI.so.0 in $p/lib by its rpath"; exit 1; }
    np=2 # allreduce_comm splits the ranks in two: 3 gives a half of 2
    [ "$(basename "$e")" = allreduce_comm ] && np=3
    line=$(timeout 120 $MPIRUN -np $np "$e") || { echo "FAIL: $e: exit $?: $line"; exit 1; }
    out="$out
  $line"
done
# The installed hpml-$MPI prof preloads libhpml-prof-$MPI.so (next to its bin/) into an
# example built from the installed files.
# shellcheck disable=SC2086
"$p/bin/hpml-$MPI" prof -q -o "$stage/prof" -- $MPIRUN -np 2 "$stage/iallreduce_overlap" \
    >/dev/null 2>&1 && grep -q '"complete": true' "$stage/prof/report.json" ||
    { echo "FAIL: installed hpml-$MPI prof"; exit 1; }
for m in openmpi mpich; do make -s MPI=$m uninstall PREFIX="$p" >/dev/null; done
left=$(find "$p" -type f -o -type l)
[ -z "$left" ] || { echo "FAIL: uninstall of both left: $left"; exit 1; }
echo "install: ok ($soname; $other beside it; examples built from hpml-$MPI.pc printed:$out)"
