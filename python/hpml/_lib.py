"""Finding and loading libhpml.so through cffi (ABI mode), and the compiled hot path.

The library must be built for the MPI that mpi4py uses: both MPIs export the same MPI_*
symbols with different ABIs (Open MPI's MPI_Comm is a pointer, MPICH's an int), so a
libhpml linked against the other MPI would call into the wrong library. The check reads
the MPI library the .so file names in its ELF dynamic section before loading it.

Where the library is looked for, first found wins:
  1. $HPML_LIB (a file, or a folder holding libhpml.so.0);
  2. in the source tree: <repo>/build/<mpi>/lib/libhpml.so.0, <mpi> being openmpi or
     mpich after the MPI mpi4py uses (`make MPI=<mpi>` builds it);
  3. installed: the lib folder that holds this package's site-packages folder
     (`make install` puts the package in <prefix>/lib/python3.X/dist-packages and the
     library in <prefix>/lib, named after its MPI: libhpml-<mpi>.so.0);
  4. the dynamic loader's search path (libhpml-<mpi>.so.0).

hpml._fast (python/hpml/_fast.c, a CPython extension `make` builds) runs Comm.allreduce
and Comm.bcast on plain buffers without cffi's per-call cost; it calls libhpml through the
function addresses cffi gives it, so one build serves both MPIs. It is looked for in the
package (installed by `make install`), then in the build tree beside the library
(<build>/python/hpml/_fast*.so). Without it the collectives take the checked Python path
(`fast` is None then): the same results, about 1.7 µs more per call (2.0 against 0.35 µs
for an 8-byte allreduce at 1 rank, Zen 4).
"""

import importlib.machinery
import importlib.util
import os
import struct

from mpi4py import MPI

import cffi

from . import _abi, errors

# MPI families by ABI: the MPICH ABI family shares MPI_Comm as int.
_VENDOR_FAMILY = {
    "Open MPI": "openmpi",
    "MPICH": "mpich",
    "MVAPICH2": "mpich",
    "Intel MPI": "mpich",
}
_FAMILY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH"}


def _mpi4py_family():
    vendor = MPI.get_vendor()[0]
    fam = _VENDOR_FAMILY.get(vendor)
    if fam is None:
        raise errors.LibraryError(
            "hpml: mpi4py uses %s, an MPI hpml is not built for (Open MPI or MPICH)" % vendor
        )
    return fam


def _elf_needed(path):
    """The DT_NEEDED names of an ELF64 little-endian shared object ([] if not one)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    names = []
    for _name, kind, _flags, _addr, off, size, link, _info, _align, entsize in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        stroff = sections[link][4]
        for pos in range(off, off + size, entsize or 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", stroff + val)
                names.append(data[stroff + val : end].decode())
    return names


def _lib_family(path):
    for name in _elf_needed(path):
        if name.startswith("libmpich.so"):
            return "mpich"
        if name.startswith("libmpi.so"):
            return "openmpi"
    return None


def _candidates(family):
    env = os.environ.get("HPML_LIB")
    if env:
        return [os.path.join(env, "libhpml.so.0") if os.path.isdir(env) else env], True
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        os.path.join(here, "..", "..", "build", family, "lib", "libhpml.so.0"),
        os.path.join(here, "..", "..", "..", "libhpml-%s.so.0" % family),
    ], False


def find_library():
    """(path or soname, MPI family) of the libhpml to load; raises LibraryError."""
    family = _mpi4py_family()
    paths, forced = _candidates(family)
    for p in paths:
        if os.path.isfile(p):
            path = os.path.normpath(p)
            built = _lib_family(path)
            if built is None:
                raise errors.LibraryError(
                    "hpml: %s is not a libhpml linked against an MPI library" % path
                )
            if built != family:
                raise errors.LibraryError(
                    "hpml: %s is built for %s but mpi4py uses %s: load the %s build "
                    "(make MPI=%s, HPML_LIB=build/%s/lib/libhpml.so)"
                    % (path, _FAMILY_NAME[built], _FAMILY_NAME[family], _FAMILY_NAME[family],
                       family, family)
                )
            return path, family
        if forced:
            raise errors.LibraryError("hpml: HPML_LIB=%s: no such file" % p)
    # Last, the loader's search path; the MPI cannot be checked before loading there.
    return "libhpml-%s.so.0" % family, family


# The version of the --json records' schema (HPML_JSON_SCHEMA_VERSION, hpml/core.h).
JSON_SCHEMA_VERSION = 1

ffi = cffi.FFI()
path, family = find_library()
ffi.cdef(_abi.cdef(family, MPI.MAX_LIBRARY_VERSION_STRING))
try:
    lib = ffi.dlopen(path)
except OSError as e:
    raise errors.LibraryError(
        "hpml: cannot load %s (%s): build it with `make MPI=%s`, or set HPML_LIB to its path"
        % (path, e, family)
    ) from None
libc = ffi.dlopen(None)


def _load_fast():
    try:
        from . import _fast  # installed beside this file

        return _fast
    except ImportError:
        pass
    if os.sep not in path:  # found by the dynamic loader: no build tree to look in
        return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(path))), "python", "hpml",
                         "_fast" + suffix)
        if os.path.isfile(p):
            spec = importlib.util.spec_from_file_location("hpml._fast", p)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    return None


fast = _load_fast()


def address(p):
    """The address of a libhpml function or a cffi pointer, as an integer (for
    hpml._fast)."""
    return int(ffi.cast("uintptr_t", p))


def mpi_comm(comm):
    """The C MPI_Comm of an mpi4py communicator, as this MPI represents it."""
    return _abi.c_comm(ffi, MPI._handleof(comm))


def raise_error(rc, what=None):
    """Raise the hpml.Error for a negative return code, with hpml's message."""
    detail = ffi.string(lib.hpml_last_error()).decode(errors="replace")
    text = ffi.string(lib.hpml_strerror(rc)).decode()
    msg = "hpml: %s%s%s" % (what + ": " if what else "", text, ": " + detail if detail else "")
    lib.hpml_clear_error()
    raise errors.BY_CODE.get(rc, errors.Error)(msg, rc)


def check(rc, what=None):
    if rc != 0:
        raise_error(rc, what)


def capture(fn):
    """Call fn(FILE *) and return what it wrote there (through open_memstream)."""
    ptr = ffi.new("char **")
    size = ffi.new("size_t *")
    f = libc.open_memstream(ptr, size)
    if f == ffi.NULL:
        raise errors.OutOfMemory("hpml: open_memstream failed")
    try:
        rc = fn(f)
    finally:
        libc.fclose(f)
        text = ffi.string(ptr[0], size[0]).decode(errors="replace")
        libc.free(ptr[0])
    check(rc)
    return text
