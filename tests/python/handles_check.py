"""The package's MPI_Comm conversion (python/hpml/_abi.py) against both MPIs, without
mpi4py (Debian's is built for Open MPI only): under mpirun of this build's MPI, load
libhpml and tests/cli/mpi_handles.so (built with the same MPI) through cffi with the
package's own declarations, pass COMM_WORLD and a communicator of the ranks in reverse
order as mpi4py's MPI._handleof gives handles, and check that hpml works on the
communicator meant: its rank and size, an allreduce over it, and hpml_sysinfo_gather's
MPI library name.
    mpirun -np N python3 tests/python/handles_check.py BUILD openmpi|mpich
"""

import importlib.util
import os
import sys

import cffi

build, family = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "hpml_abi", os.path.join(here, "..", "..", "python", "hpml", "_abi.py"))
abi = importlib.util.module_from_spec(spec)
spec.loader.exec_module(abi)

hffi = cffi.FFI()
hffi.cdef("""
int handles_init(void);
int handles_finalize(void);
int handles_max_library_version_string(void);
int handles_world_rank(void);
uintptr_t handles_world(void);
uintptr_t handles_reversed(void);
""")
helper = hffi.dlopen(os.path.join(build, "tests", "cli", "mpi_handles.so"))
ffi = cffi.FFI()
ffi.cdef(abi.cdef(family, helper.handles_max_library_version_string()))
lib = ffi.dlopen(os.path.join(build, "lib", "libhpml.so.0"))

assert helper.handles_init() == 0
me = helper.handles_world_rank()
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


def on(handle, name, want_rank):
    out = ffi.new("hpml_comm_t **")
    rc = lib.hpml_comm_create(abi.c_comm(ffi, handle), ffi.NULL, out)
    if rc != 0:
        fails.append("%s (handle %#x): hpml_comm_create returned %d: %s" % (
            name, handle, rc, ffi.string(lib.hpml_last_error()).decode()))
        return None
    c = out[0]
    size = lib.hpml_comm_size(c)
    check(lib.hpml_comm_rank(c) == want_rank(size),
          "%s: rank %d, want %d" % (name, lib.hpml_comm_rank(c), want_rank(size)))
    x = ffi.new("int32_t[2]", [lib.hpml_comm_rank(c), 1])
    y = ffi.new("int32_t[2]")
    check(lib.hpml_allreduce_algo(0, x, y, 2, 6, 0, c) == 0, "%s: allreduce failed" % name)
    check(list(y) == [size * (size - 1) // 2, size], "%s: allreduce gave %s" % (name, list(y)))
    lib.hpml_comm_destroy(c)
    return size


world = helper.handles_world()
rev = helper.handles_reversed()
size = on(world, "COMM_WORLD", lambda n: me)
forms = [rev]
if family == "mpich":  # an int handle: as a plain int and widened with its sign
    low = rev & 0xFFFFFFFF
    forms = [rev, low - (1 << 32) if low >= 1 << 31 else low, low]
for h in forms:
    on(h, "reversed", lambda n: n - 1 - me)

si = ffi.new("hpml_sysinfo_t *")
check(lib.hpml_sysinfo_gather(abi.c_comm(ffi, world), si) == 0, "sysinfo failed")
name = ffi.string(si.mpi_library).decode(errors="replace")
check(name.startswith({"openmpi": "Open MPI", "mpich": "MPICH"}[family]),
      "sysinfo: MPI library %r" % name)
check(si.ranks == size, "sysinfo: %d ranks, want %d" % (si.ranks, size))
lib.hpml_sysinfo_free(si)
helper.handles_finalize()
if fails:
    print("FAIL rank %d: %s" % (me, "; ".join(fails)))
    sys.exit(1)
if me == 0:
    print("PASS %s handles: COMM_WORLD %#x and reversed %s on %d ranks (%s)" % (
        family, world, " ".join("%#x" % (f & (2 ** 64 - 1)) for f in forms), size,
        name.splitlines()[0].strip()))
