"""hpml.info(): the facts `hpml info --json` prints, as a dict (same keys)."""

import json
import os

from mpi4py import MPI

from . import _lib
from ._lib import capture, check, ffi, lib, mpi_comm


def version():
    """The version of the libhpml loaded."""
    return ffi.string(lib.hpml_version()).decode()


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _text(p):
    return ffi.string(p).decode(errors="replace") if p != ffi.NULL else ""


def _settings():
    out = []
    kinds = ("size", "count", "choice", "text")
    for i in range(lib.hpml_settings_count()):
        s = lib.hpml_setting_at(i)
        name = _text(s.name)
        value = os.environ.get(name)
        out.append({
            "name": name,
            "value": value if value else None,
            "default": _text(s.def_),
            "kind": kinds[s.kind] if 0 <= s.kind < 4 else "text",
            "agreed": bool(s.agreed),
            "doc": _text(s.doc),
        })
    return out


def info(comm=None):
    """Facts about this build and job, as `hpml info --json` gives them: hpml (version,
    MPI it is built for, library path), mpi, job (ranks, nodes with host names, whether
    node shared memory works), blas, cpu, selection (the algorithm table in force) and
    settings. Collective over `comm` (an hpml.Comm; default: one made over
    MPI.COMM_WORLD for the call); every rank gets the same dict."""
    from .comm import Comm

    own = comm is None
    if own:
        comm = Comm(MPI.COMM_WORLD)
    try:
        si = ffi.new("hpml_sysinfo_t *")
        check(lib.hpml_sysinfo_gather(mpi_comm(comm.mpi), si), "info")
        try:
            nodes = None
            if comm.mpi.Get_rank() == 0:
                nodes = [
                    {"host": ffi.string(si.hostnames[i]).decode(errors="replace"),
                     "ranks": si.node_ranks[i]}
                    for i in range(si.nodes)
                ]
            nodes = comm.mpi.bcast(nodes, root=0)
            d = {
                "hpml": {"version": version(), "mpi": _lib.family, "library": _lib.path},
                "mpi": {
                    "library": ffi.string(si.mpi_library).decode(errors="replace"),
                    "standard": "%d.%d" % (si.mpi_version, si.mpi_subversion),
                    "thread_level": _text(lib.hpml_thread_level_name(si.thread_provided)),
                },
                "job": {
                    "ranks": si.ranks,
                    "nodes": nodes,
                    "shared_memory": bool(si.shm_works),
                    "shared_memory_detail": ffi.string(si.shm_detail).decode(errors="replace"),
                },
            }
        finally:
            lib.hpml_sysinfo_free(si)
        d["blas"] = {"library": _text(lib.hpml_blas_config()), "threads": lib.hpml_blas_threads()}
        d["cpu"] = {
            "model": _cpu_model(),
            "cores": os.cpu_count(),
            "avx2": bool(lib.hpml_cpu_has_avx2()),
            "f16c": bool(lib.hpml_cpu_has_f16c()),
            "fma": bool(lib.hpml_cpu_has_fma()),
            "kernels": "avx2+f16c+fma" if lib.hpml_simd_active() == 2 else "portable",
            "llc_bytes": lib.hpml_cpu_llc_bytes(),
        }
        h = comm._handle()
        d["selection"] = json.loads(capture(lambda f: lib.hpml_select_describe(h, f, 1)))
        d["settings"] = _settings()
        return d
    finally:
        if own:
            comm.free()
