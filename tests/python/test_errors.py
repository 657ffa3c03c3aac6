"""Every bad input raises hpml.Error, also the fitting built-in exception, with a message
naming what is wrong; nothing is sent, so the ranks stay in step."""

import builtins
import os

import numpy as np
import pytest
from mpi4py import MPI

import hpml


def raises(exc, builtin, match):
    """pytest.raises for an hpml error that is also `builtin`."""
    assert issubclass(exc, hpml.Error) and issubclass(exc, builtin)
    return pytest.raises(exc, match=match)


def test_non_contiguous(comm):
    x = np.zeros(10, np.float32)
    with raises(hpml.BufferError, builtins.BufferError, "sendbuf is not C-contiguous"):
        comm.allreduce(x[::2])
    with raises(hpml.BufferError, builtins.BufferError, "recvbuf is not C-contiguous"):
        comm.allreduce(x[:5], np.zeros((5, 2), np.float32)[:, 0])
    with raises(hpml.BufferError, builtins.BufferError, "buf is not C-contiguous"):
        comm.bcast(np.zeros((4, 4), np.float64).T)


def test_read_only(comm):
    x = np.zeros(4, np.float32)
    x.flags.writeable = False
    comm.allreduce(x)  # a read-only input is fine
    with raises(hpml.BufferError, builtins.BufferError, "recvbuf is read-only"):
        comm.allreduce(np.zeros(4, np.float32), x)
    with raises(hpml.BufferError, builtins.BufferError, "read-only"):
        comm.allreduce(hpml.IN_PLACE, x)
    with raises(hpml.BufferError, builtins.BufferError, "buf is read-only"):
        comm.bcast(b"abc")
    with raises(hpml.BufferError, builtins.BufferError, "read-only"):
        comm.iallreduce(hpml.IN_PLACE, x)


def test_size_mismatch(comm):
    x = np.zeros(8, np.float32)
    with raises(hpml.ArgumentError, ValueError, "recvbuf holds 7 f32 elements"):
        comm.allreduce(x, np.zeros(7, np.float32))
    with raises(hpml.ArgumentError, ValueError, "recvbuf holds"):
        comm.allgather(x, np.zeros(8 * comm.size + 1, np.float32))
    if comm.size > 1:
        with raises(hpml.ArgumentError, ValueError, "multiple of 2 ranks|multiple of 3 ranks"):
            comm.reduce_scatter(np.zeros(comm.size * 3 + 1, np.float32))
    with raises(hpml.ArgumentError, ValueError, "not a whole number of f32"):
        comm.allreduce(bytearray(6), dtype="f32")
    with raises(hpml.ArgumentError, ValueError, "ends past"):
        comm.alltoallv(x, [9] * comm.size, np.zeros(8, np.float32), [1] * comm.size)
    with raises(hpml.ArgumentError, ValueError, "entries"):
        comm.alltoallv(x, [1] * (comm.size + 1), np.zeros(8, np.float32), [1] * comm.size)
    with raises(hpml.ArgumentError, ValueError, "negative"):
        comm.alltoallv(x, [-1] * comm.size, np.zeros(8, np.float32), [1] * comm.size)
    with raises(hpml.DtypeError, TypeError, "cannot hold f32"):
        comm.allreduce(x, np.zeros(8, np.float64))


def test_unsupported_dtypes(comm):
    for dt in (np.uint32, np.uint64, np.complex64, np.bool_, np.int16):
        with raises(hpml.DtypeError, TypeError, "not an hpml dtype"):
            comm.allreduce(np.zeros(4, dt))
    with raises(hpml.DtypeError, TypeError, "dtype='bf16' or dtype='f16'"):
        comm.allreduce(np.zeros(4, np.uint16))
    with raises(hpml.DtypeError, TypeError, "unsupported dtype 'bogus'"):
        comm.allreduce(np.zeros(4, np.float32), dtype="bogus")
    with raises(hpml.DtypeError, TypeError, "cannot hold bf16"):
        comm.allreduce(np.zeros(4, np.float32), dtype="bf16")
    with raises(hpml.DtypeError, TypeError, "cannot hold i32"):
        comm.allreduce(np.zeros(4, np.float32), dtype="i32")
    with raises(hpml.DtypeError, TypeError, "machine's own byte order"):
        comm.allreduce(np.zeros(4, ">f4"))
    with raises(hpml.DtypeError, TypeError, "buffer protocol"):
        comm.allreduce([1.0, 2.0])


class CudaArray:
    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False),
                                "version": 3}


class DLPackDevice:
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, stream=None):
        raise AssertionError("must not be asked for its data")


class DLPackCPU:
    """A CPU array reachable only through DLPack."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()


def test_device_memory(comm):
    with raises(hpml.DtypeError, TypeError, "CUDA.*CPU-only"):
        comm.allreduce(CudaArray())
    with raises(hpml.DtypeError, TypeError, "DLPack device memory.*CPU-only"):
        comm.allreduce(DLPackDevice())
    got = comm.allreduce(DLPackCPU(np.full(3, 2.0)))
    np.testing.assert_array_equal(got, np.full(3, 2.0 * comm.size))


def test_bad_arguments(comm):
    x = np.zeros(4, np.float32)
    with raises(hpml.ArgumentError, ValueError, "unknown op 'median'"):
        comm.allreduce(x, op="median")
    with raises(hpml.ArgumentError, ValueError, "allreduce has no algorithm 'bruck'"):
        comm.allreduce(x, algo="bruck")
    with raises(hpml.ArgumentError, ValueError, "bcast has no algorithm 'ring'"):
        comm.bcast(x, algo="ring")
    with raises(hpml.ArgumentError, ValueError, "root 99 outside"):
        comm.bcast(x, root=99)
    with raises(hpml.ArgumentError, ValueError, "root -1 outside"):
        comm.reduce(x, root=-1)
    with raises(hpml.ArgumentError, ValueError, "IN_PLACE needs a recvbuf"):
        comm.allreduce(hpml.IN_PLACE)
    with raises(hpml.ArgumentError, ValueError, "sendbuf cannot be IN_PLACE here"):
        comm.alltoallv(hpml.IN_PLACE, [1] * comm.size, x, [1] * comm.size)
    with raises(hpml.ArgumentError, ValueError, "recvbuf cannot be IN_PLACE here"):
        comm.allreduce(x, MPI.IN_PLACE)
    with raises(hpml.ArgumentError, ValueError, "mpi4py communicator"):
        hpml.Comm(42)
    with raises(hpml.ArgumentError, ValueError, "COMM_NULL"):
        hpml.Comm(MPI.COMM_NULL)
    with raises(hpml.ArgumentError, ValueError, "unknown collective"):
        comm.algorithm("gather", 8)
    with raises(hpml.ArgumentError, ValueError, "negative dimension"):
        comm.alloc_shared((-1,), "f32")


def test_freed_comm():
    c = hpml.Comm(MPI.COMM_WORLD)
    c.free()
    with raises(hpml.MPIError, RuntimeError, "freed"):
        c.allreduce(np.zeros(2))


def test_library_mismatch_across_ranks_reports_hpml_message():
    """A collective the ranks call with different counts fails on every rank with the
    library's own message (checking mode), as an hpml.MPIError carrying its code."""
    if MPI.COMM_WORLD.Get_size() == 1:
        pytest.skip("needs two ranks to disagree")
    old = os.environ.get("HPML_CHECK")
    os.environ["HPML_CHECK"] = "1"
    try:
        with hpml.Comm(MPI.COMM_WORLD) as c:
            msg = "hpml: allreduce: ranks disagree.*count=3.*count=4"
            with pytest.raises(hpml.MPIError, match=msg) as e:
                c.allreduce(np.zeros(3 + c.rank, np.float32))
            assert e.value.code == -7
            c.allreduce(np.zeros(3, np.float32))  # and the communicator still works
    finally:
        if old is None:
            del os.environ["HPML_CHECK"]
        else:
            os.environ["HPML_CHECK"] = old


def test_intercommunicator_refused():
    world = MPI.COMM_WORLD
    if world.Get_size() < 2:
        pytest.skip("needs two ranks for two groups")
    color = world.Get_rank() % 2
    local = world.Split(color, world.Get_rank())
    inter = local.Create_intercomm(0, world, 1 - color)
    with raises(hpml.ArgumentError, ValueError, "intercommunicator"):
        hpml.Comm(inter)
    inter.Free()
    local.Free()


def test_bad_setting_fails_comm_on_every_rank(monkeypatch):
    monkeypatch.setenv("HPML_SHM_CHUNK", "0")
    with raises(hpml.ArgumentError, ValueError, "hpml: Comm: invalid argument: "
                "HPML_SHM_CHUNK='0' is not a size"):
        hpml.Comm(MPI.COMM_WORLD)
