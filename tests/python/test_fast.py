"""hpml._fast, the compiled Comm.allreduce/bcast: it is loaded from this build, gives the
bits of the checked Python path (Comm._allreduce_checked, the reference here, itself
checked against NumPy in test_comm.py) for every dtype, op and buffer kind it takes, hands
the calls it does not take to that path with their arguments unchanged, and releases the
GIL while it waits for the other ranks."""

import inspect
import os
import threading
import time

import numpy as np
import pytest
from mpi4py import MPI

import hpml
import hpml._lib
from conftest import rank_data

NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64]


def test_loaded_from_this_build():
    fast = hpml._lib.fast
    assert fast is not None, "hpml._fast not found beside %s" % hpml.library_path
    build = os.path.dirname(os.path.dirname(os.path.abspath(hpml.library_path)))
    assert os.path.dirname(fast.__file__) == os.path.join(build, "python", "hpml")
    with hpml.Comm(MPI.COMM_SELF) as c:
        assert isinstance(c, fast.CommBase)
    assert hpml.Comm.allreduce is fast.CommBase.allreduce
    # The compiled methods show the checked ones' signatures (help(), inspect).
    for name in ("allreduce", "bcast"):
        got = inspect.signature(getattr(hpml.Comm, name)).parameters
        want = inspect.signature(getattr(hpml.Comm, "_%s_checked" % name)).parameters
        assert [(p.name, p.default) for p in got.values()] == \
            [(p.name, p.default) for p in want.values()]


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "avg"])
def test_same_bits_as_checked_path(comm, dt, op):
    x = rank_data(dt, 41, comm.rank, *((-1, 3) if op == "prod" else ()))
    if np.dtype(dt).kind == "u":
        x = np.abs(x).astype(dt)
    want = comm._allreduce_checked(x, np.empty_like(x), op)
    for args, kw in (((x, np.empty_like(x), op), {}), ((x,), {"recvbuf": np.empty_like(x),
                     "op": op, "algo": "auto", "dtype": None})):
        got = comm.allreduce(*args, **kw)
        assert got.tobytes() == want.tobytes()
    y = x.copy()
    assert comm.allreduce(hpml.IN_PLACE, y, op=op) is y
    assert y.tobytes() == want.tobytes()
    # A memoryview as recvbuf, and bcast.
    m = memoryview(np.empty((41,), dt))
    assert comm.allreduce(x, m, op) is m
    assert bytes(m) == want.tobytes()
    b = rank_data(dt, 9, comm.rank)
    assert comm.bcast(b, comm.size - 1, "auto") is b
    assert b.tobytes() == rank_data(dt, 9, comm.size - 1).tobytes()


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32", "i64", "float64"])
def test_dtype_names(comm, dtype):
    # dtype= by name: the element type of bytes (bytearray) and of 16-bit words (uint16),
    # the same bits as the checked path, for allreduce, in place and bcast.
    dt = hpml.comm.dtype_code(dtype)
    vals = rank_data(hpml.comm.NUMPY_DTYPE[dt] if dt != 3 else np.float32, 13, comm.rank)
    raw = (vals.view(np.uint32) >> 16).astype(np.uint16) if dt == 3 else vals
    for make in (lambda a: bytearray(a.tobytes()), lambda a: a.view(np.uint16).copy()
                 if a.dtype.itemsize == 2 else np.frombuffer(bytearray(a.tobytes()), np.uint8)):
        s = make(raw)
        want = comm._allreduce_checked(s, make(raw), "max", "auto", dtype)
        r = make(np.zeros_like(raw))
        assert comm.allreduce(s, r, "max", "auto", dtype) is r
        assert bytes(r) == bytes(want)
        y = make(raw)
        comm.allreduce(hpml.IN_PLACE, y, op="max", dtype=dtype)
        assert bytes(y) == bytes(want)
        b = make(rank_data(raw.dtype, 13, comm.rank))
        assert comm.bcast(b, comm.size - 1, dtype=dtype) is b
        assert bytes(b) == bytes(make(rank_data(raw.dtype, 13, comm.size - 1)))


def test_bytearray_and_algorithms(comm):
    for algo in hpml.ALGOS["allreduce"]:
        s = bytearray([comm.rank + 1] * 7)
        r = bytearray(7)
        assert comm.allreduce(s, r, algo=algo) is r
        assert list(r) == [comm.size * (comm.size + 1) // 2] * 7
    for algo in hpml.ALGOS["bcast"]:
        b = bytearray(b"fast" if comm.rank == 0 else b"....")
        assert comm.bcast(b, algo=algo) is b and b == bytearray(b"fast")


def test_handed_to_checked_path(comm):
    x = np.ones(6, np.float32)
    # Errors the checked path raises, reached through the compiled method.
    with pytest.raises(hpml.ArgumentError, match="recvbuf holds 5 f32 elements"):
        comm.allreduce(x, np.empty(5, np.float32))
    with pytest.raises(hpml.DtypeError, match="element format 'd'"):
        comm.allreduce(x, np.empty(6, np.float64))
    with pytest.raises(hpml.BufferError, match="not C-contiguous"):
        comm.allreduce(np.ones(12, np.float32)[::2], np.empty(6, np.float32))
    with pytest.raises(hpml.BufferError, match="read-only"):
        ro = np.empty(6, np.float32)
        ro.flags.writeable = False
        comm.allreduce(x, ro)
    with pytest.raises(hpml.ArgumentError, match="unknown op 'nope'"):
        comm.allreduce(x, np.empty_like(x), "nope")
    with pytest.raises(hpml.ArgumentError, match="has no algorithm 'nope'"):
        comm.bcast(x, algo="nope")
    with pytest.raises(hpml.ArgumentError, match="root 9 outside"):
        comm.bcast(x, root=9)
    with pytest.raises(TypeError, match=r"Comm.allreduce\(\) got an unexpected keyword"):
        comm.allreduce(x, x.copy(), bogus=1)
    with pytest.raises(TypeError, match=r"Comm.bcast\(\) got multiple values"):
        comm.bcast(x, 0, root=0)
    with pytest.raises(hpml.DtypeError, match="element format 'H' .* cannot hold f32"):
        comm.allreduce(np.zeros(4, np.uint16), np.zeros(4, np.uint16), dtype="f32")
    with pytest.raises(hpml.ArgumentError, match="6 bytes, not a whole number of f32"):
        comm.allreduce(bytearray(6), bytearray(6), dtype="f32")
    with pytest.raises(hpml.DtypeError, match="unsupported dtype 'u32'"):
        comm.bcast(bytearray(8), dtype="u32")
    # Taken by the checked path and computed there: op as an mpi4py Op, dtype= as a NumPy
    # dtype, no recvbuf.
    y = comm.allreduce(x, np.empty_like(x), MPI.MAX)
    np.testing.assert_array_equal(y, x)
    z = comm.allreduce(x.view(np.uint8), np.empty(24, np.uint8), dtype=np.float32)
    np.testing.assert_array_equal(z.view(np.float32), x * comm.size)
    c = hpml.Comm(MPI.COMM_WORLD)
    c.free()
    with pytest.raises(hpml.MPIError, match="freed"):
        c.allreduce(x, np.empty_like(x))
    with pytest.raises(hpml.MPIError, match="freed"):
        c.bcast(x)


def test_gil_released_while_waiting(comm):
    # The last rank comes 0.5 s late; meanwhile the others' second thread keeps running:
    # its longest pause between two steps stays far below the wait (it would span the
    # whole wait with the GIL held).
    if comm.size < 2:
        pytest.skip("needs 2 ranks")
    state = {"last": None, "gap": 0.0}
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            now = time.monotonic()
            if state["last"] is not None:
                state["gap"] = max(state["gap"], now - state["last"])
            state["last"] = now

    t = threading.Thread(target=tick)
    t.start()
    try:
        comm.barrier()
        if comm.rank == comm.size - 1:
            time.sleep(0.5)
        state["gap"] = 0.0
        x = np.ones(4, np.float32)
        comm.allreduce(hpml.IN_PLACE, x)
        time.sleep(0.05)  # let the thread take its step after the call
        gap = state["gap"]
    finally:
        stop.set()
        t.join()
    np.testing.assert_array_equal(x, np.full(4, comm.size, np.float32))
    if comm.rank != comm.size - 1:
        assert gap < 0.25, "the other thread stood still %.3f s during allreduce" % gap


def test_bound_is_compiled(comm):
    # allreduce_init / bcast_init give hpml._fast.Bound (test_comm.py checks their
    # results); here its own behaviour: no arguments, `result`, the Comm kept alive.
    x = rank_data(np.int32, 5, comm.rank)
    run = comm.allreduce_init(x, op="max")
    assert isinstance(run, hpml._lib.fast.Bound)
    assert run() is None
    np.testing.assert_array_equal(run.result, np.max([rank_data(np.int32, 5, r)
                                                      for r in range(comm.size)], axis=0))
    with pytest.raises(TypeError, match="takes no arguments"):
        run(1)
    b = np.full(3, comm.rank, np.float64)
    bc = comm.bcast_init(b, root=comm.size - 1)
    bc()
    assert bc.result is b
    np.testing.assert_array_equal(b, np.full(3, comm.size - 1, np.float64))
    c = hpml.Comm(MPI.COMM_WORLD)
    y = np.ones(2, np.float32)
    run = c.allreduce_init(hpml.IN_PLACE, y)
    del c  # the Bound keeps the Comm
    run()
    np.testing.assert_array_equal(y, np.full(2, comm.size, np.float32))


def test_numpy_arrays_read_directly(comm):
    # NumPy arrays the compiled path reads without a buffer export (C-contiguous, native
    # byte order, any number of dimensions, views into a larger array) and those it hands
    # to the buffer protocol or the checked path (a subclass, another byte order, Fortran
    # order, bool), each against the checked path's bits or error.
    x = rank_data(np.float32, 24, comm.rank)
    want = comm._allreduce_checked(x, np.empty_like(x), "sum")
    for s, r in ((x.reshape(4, 6), np.empty((4, 6), np.float32)),
                 (x.reshape(2, 3, 4), np.empty(24, np.float32)),
                 (np.concatenate([x, x])[24:], np.empty(30, np.float32)[3:27]),
                 (x.view(_Sub), np.empty(24, np.float32).view(_Sub))):
        got = comm.allreduce(s, r)
        assert got is r and r.tobytes() == want.tobytes()
    with pytest.raises(hpml.DtypeError):
        comm.allreduce(x.astype(">f4"), np.empty(24, ">f4"))
    with pytest.raises(hpml.BufferError, match="not C-contiguous"):
        comm.allreduce(np.asfortranarray(x.reshape(4, 6)), np.empty((4, 6), np.float32))
    with pytest.raises(hpml.DtypeError):
        comm.allreduce(np.zeros(8, bool), np.zeros(8, bool))
    with pytest.raises(hpml.ArgumentError, match="recvbuf holds 23 f32 elements"):
        comm.allreduce(x, np.empty(23, np.float32))
    with pytest.raises(hpml.DtypeError, match="element format 'f' .* cannot hold f64"):
        comm.allreduce(x.astype(np.float64), np.empty(24, np.float32))


class _Sub(np.ndarray):
    pass


def test_names_looked_up_each_call(comm):
    # op, algo and dtype names change from call to call (the compiled path remembers the
    # last name it looked up): each call reduces with its own op, whichever str object
    # spells it.
    x = rank_data(np.float32, 5, comm.rank)
    for op in ("sum", "max", "".join(["s", "um"]), "min", "".join(["m", "ax"]), "prod"):
        want = comm._allreduce_checked(x, np.empty_like(x), op)
        assert comm.allreduce(x, np.empty_like(x), op, "auto", "f32").tobytes() == \
            want.tobytes()
    with pytest.raises(hpml.ArgumentError, match="unknown op 'nope'"):
        comm.allreduce(x, np.empty_like(x), "".join(["no", "pe"]))
