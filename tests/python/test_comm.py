"""hpml.Comm's collectives against NumPy references (every rank can make every rank's
data, so each rank computes the expected result itself)."""

import gc

import numpy as np
import pytest
from mpi4py import MPI

import hpml
from conftest import all_data, from_bf16, rank_data, to_bf16

NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64]
OPS = ["sum", "prod", "min", "max", "avg"]


def reference(op, data):
    """NumPy's reduction over axis 0 with hpml's semantics (AVG: integers truncate)."""
    if op == "sum":
        return data.sum(axis=0, dtype=data.dtype)
    if op == "prod":
        return data.prod(axis=0, dtype=data.dtype)
    if op == "min":
        return data.min(axis=0)
    if op == "max":
        return data.max(axis=0)
    s = data.astype(np.float64).sum(axis=0)
    if data.dtype.kind in "iu":
        return np.trunc(s / len(data)).astype(data.dtype)
    return (s / len(data)).astype(data.dtype)


def data_for(dt, op, n, rank):
    lo, hi = (0, 8) if np.dtype(dt).kind == "u" else (-4, 5)
    if op == "prod":
        lo, hi = (1, 3) if np.dtype(dt).kind == "u" else (-2, 3)
    return rank_data(dt, n, rank, lo, hi)


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OPS)
def test_allreduce_dtypes_ops(comm, dt, op):
    n = 37
    x = data_for(dt, op, n, comm.rank)
    want = reference(op, np.stack([data_for(dt, op, n, r) for r in range(comm.size)]))
    got = comm.allreduce(x, op=op)
    assert got.dtype == np.dtype(dt) and got.shape == x.shape
    np.testing.assert_array_equal(got, want)
    # In place gives the same bits (mpi4py's MPI.IN_PLACE is hpml.IN_PLACE).
    y = x.copy()
    assert comm.allreduce(hpml.IN_PLACE, y, op=op) is y
    np.testing.assert_array_equal(y, want)
    y = x.copy()
    comm.allreduce(MPI.IN_PLACE, y, op=op)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op", OPS)
def test_allreduce_bf16(comm, op):
    n = 29
    vals = [data_for(np.float32, op, n, r) for r in range(comm.size)]
    got = comm.allreduce(to_bf16(vals[comm.rank]), op=op, dtype="bf16")
    assert got.dtype == np.uint16
    want = reference(op, np.stack(vals))
    np.testing.assert_allclose(from_bf16(got), want, rtol=2 ** -8)
    if op != "avg":  # integer-valued, exact in bf16
        np.testing.assert_array_equal(from_bf16(got), want)


def test_f16_bits_as_uint16(comm):
    x = rank_data(np.float16, 16, comm.rank)
    got = comm.allreduce(x.view(np.uint16), dtype="f16")
    np.testing.assert_array_equal(got.view(np.float16), all_data(np.float16, 16, comm.size).sum(0))


@pytest.mark.parametrize("algo", sorted(hpml.ALGOS["allreduce"]))
@pytest.mark.parametrize("n", [0, 1, 5, 3000, 70000])
def test_allreduce_algorithms(comm, algo, n):
    x = rank_data(np.float32, n, comm.rank)
    want = all_data(np.float32, n, comm.size).sum(0)
    np.testing.assert_array_equal(comm.allreduce(x, algo=algo), want)
    y = np.empty_like(x)
    assert comm.allreduce(x, y, op=MPI.SUM, algo=algo) is y
    np.testing.assert_array_equal(y, want)


def test_allreduce_buffer_kinds(comm):
    # bytearray (u8), memoryview of an array, a 2-d array keeping its shape.
    b = bytearray([comm.rank + 1] * 10)
    got = comm.allreduce(b)
    assert isinstance(got, bytearray)
    assert list(got) == [comm.size * (comm.size + 1) // 2] * 10
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = comm.allreduce(memoryview(a))
    np.testing.assert_array_equal(np.asarray(got).reshape(3, 4), a * comm.size)
    got = comm.allreduce(a, op="max")
    assert got.shape == (3, 4)
    # bytes reinterpreted as another dtype with dtype=.
    raw = bytearray(np.full(4, comm.rank, np.float32).tobytes())
    out = comm.allreduce(raw, dtype="f32")
    np.testing.assert_array_equal(np.frombuffer(out, np.float32),
                                  np.full(4, sum(range(comm.size)), np.float32))


def test_allreduce_float_repeatable(comm):
    # Float data that rounds: each algorithm gives the same bits run to run, close to
    # NumPy's sum.
    rng = np.random.default_rng(comm.rank)
    x = rng.standard_normal(4099).astype(np.float32)
    for algo in hpml.ALGOS["allreduce"]:
        a = comm.allreduce(x, algo=algo)
        b = comm.allreduce(x, algo=algo)
        assert a.tobytes() == b.tobytes()
        np.testing.assert_allclose(a, sum(np.random.default_rng(r).standard_normal(4099)
                                          .astype(np.float32) for r in range(comm.size)),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("algo", sorted(hpml.ALGOS["bcast"]))
def test_bcast(comm, algo):
    for root in sorted({0, comm.size - 1}):
        for n in (0, 3, 50000):
            x = rank_data(np.float64, n, comm.rank)
            assert comm.bcast(x, root=root, algo=algo) is x
            np.testing.assert_array_equal(x, rank_data(np.float64, n, root))
    b = bytearray(b"hello" if comm.rank == 0 else b"xxxxx")
    comm.bcast(b, algo=algo)
    assert b == bytearray(b"hello")
    h = to_bf16(rank_data(np.float32, 9, comm.rank))
    comm.bcast(h, root=comm.size - 1, dtype="bf16", algo=algo)
    np.testing.assert_array_equal(h, to_bf16(rank_data(np.float32, 9, comm.size - 1)))


@pytest.mark.parametrize("algo", sorted(hpml.ALGOS["reduce"]))
@pytest.mark.parametrize("op", ["sum", "min", "avg"])
def test_reduce(comm, algo, op):
    n = 1001
    x = rank_data(np.int32, n, comm.rank)
    want = reference(op, all_data(np.int32, n, comm.size))
    for root in sorted({0, comm.size - 1}):
        got = comm.reduce(x, op=op, root=root, algo=algo)
        if comm.rank == root:
            np.testing.assert_array_equal(got, want)
        else:
            assert got is None
        y = x.copy()
        r = comm.reduce(hpml.IN_PLACE, y, op=op, root=root, algo=algo)
        if comm.rank == root:
            assert r is y
            np.testing.assert_array_equal(y, want)
        else:
            np.testing.assert_array_equal(y, x)  # left unchanged


@pytest.mark.parametrize("algo", sorted(hpml.ALGOS["allgather"]))
def test_allgather(comm, algo):
    for n in (0, 1, 7, 5000):
        x = rank_data(np.int64, n, comm.rank)
        got = comm.allgather(x, algo=algo)
        assert got.shape == (comm.size, n)
        np.testing.assert_array_equal(got, all_data(np.int64, n, comm.size))
        buf = np.zeros((comm.size, n), np.int64)
        buf[comm.rank] = x
        assert comm.allgather(hpml.IN_PLACE, buf, algo=algo) is buf
        np.testing.assert_array_equal(buf, all_data(np.int64, n, comm.size))
    got = comm.allgather(bytearray([comm.rank]), algo=algo)
    assert got == bytearray(range(comm.size))


@pytest.mark.parametrize("algo", sorted(hpml.ALGOS["reduce_scatter"]))
@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int8])
def test_reduce_scatter(comm, algo, dt):
    n = 11
    x = rank_data(dt, comm.size * n, comm.rank).reshape(comm.size, n)
    total = all_data(dt, comm.size * n, comm.size).sum(0, dtype=dt).reshape(comm.size, n)
    got = comm.reduce_scatter(x, algo=algo)
    assert got.shape == (n,)
    np.testing.assert_array_equal(got, total[comm.rank])
    y = x.copy()
    comm.reduce_scatter(hpml.IN_PLACE, y, algo=algo)
    np.testing.assert_array_equal(y[0], total[comm.rank])
    h = to_bf16(x.astype(np.float32))
    got = comm.reduce_scatter(h, dtype="bf16", op="max", algo=algo)
    want = all_data(dt, comm.size * n, comm.size).max(0).reshape(comm.size, n)[comm.rank]
    np.testing.assert_array_equal(from_bf16(got), want.astype(np.float32))


def test_alltoallv(comm):
    p, me = comm.size, comm.rank
    # Rank a sends (a + b) % 3 + 1 values a*100 + b + i/8 to rank b.
    scounts = [(me + q) % 3 + 1 for q in range(p)]
    rcounts = [(q + me) % 3 + 1 for q in range(p)]
    send = np.concatenate([me * 100 + q + np.arange(scounts[q]) / 8 for q in range(p)])
    recv = np.full(sum(rcounts), -1.0)
    assert comm.alltoallv(send, scounts, recv, rcounts) is recv
    want = np.concatenate([q * 100 + me + np.arange(rcounts[q]) / 8 for q in range(p)])
    np.testing.assert_array_equal(recv, want)
    # Explicit displacements: blocks in reverse order with gaps.
    rd = [sum(rcounts[q + 1:]) + 2 * (p - 1 - q) for q in range(p)]
    recv2 = np.full(sum(rcounts) + 2 * p, -1.0)
    comm.alltoallv(send, scounts, recv2, rcounts, rdispls=rd)
    for q in range(p):
        np.testing.assert_array_equal(recv2[rd[q]:rd[q] + rcounts[q]],
                                      q * 100 + me + np.arange(rcounts[q]) / 8)


def test_iallreduce_and_ibcast(comm):
    reqs = []
    for k in range(4):
        # Temporaries only the request references: it must keep them alive.
        reqs.append(comm.iallreduce(np.full(5000, comm.rank + k, np.float32)))
    b = np.full(7, comm.rank, np.int64)
    rb = comm.ibcast(b, root=comm.size - 1)
    h = to_bf16(np.full(8, comm.rank + 1, np.float32))
    rh = comm.iallreduce(hpml.IN_PLACE, h, op="max", dtype="bf16")
    gc.collect()
    junk = [np.full(5000, -7, np.float32) for _ in range(20)]  # reuse freed memory
    done = reqs[0].test()
    assert done in (True, False)
    for k, r in enumerate(reqs):
        r.wait()
        assert r.done
        np.testing.assert_array_equal(r.result, np.full(5000, sum(range(comm.size)) +
                                                        k * comm.size, np.float32))
    rb.wait()
    rb.wait()  # a second wait is a no-op
    np.testing.assert_array_equal(b, np.full(7, comm.size - 1))
    while not rh.test():
        pass
    np.testing.assert_array_equal(from_bf16(h), np.full(8, comm.size, np.float32))
    assert len(junk) == 20


def test_dropped_request_completes_at_free():
    c = hpml.Comm(MPI.COMM_WORLD)
    c.iallreduce(np.ones(100, np.float64))  # dropped unfinished
    gc.collect()
    c.free()  # waits for it; nothing freed under it
    c.free()  # a second free is a no-op


def test_alloc_shared(comm):
    a = comm.alloc_shared((4, 250), "f32")
    assert a.shape == (4, 250) and a.dtype == np.float32 and not a.any()
    a[...] = comm.rank + 1
    out = comm.allreduce(a)
    np.testing.assert_array_equal(out, np.full((4, 250), comm.size * (comm.size + 1) / 2))
    h = comm.alloc_shared(10, "bf16")
    assert h.dtype == np.uint16 and h.shape == (10,)
    h[:] = to_bf16(np.full(10, 2.0, np.float32))
    comm.allreduce(hpml.IN_PLACE, h, dtype="bf16")
    np.testing.assert_array_equal(from_bf16(h), np.full(10, 2.0 * comm.size, np.float32))
    z = comm.alloc_shared((0, 3), "f64")
    assert z.shape == (0, 3) and comm.allreduce(z).shape == (0, 3)
    comm.free_shared(z)
    comm.free_shared(a)
    comm.free_shared(h)
    with pytest.raises(hpml.ArgumentError):
        comm.free_shared(a)


def test_split_communicator():
    world = MPI.COMM_WORLD
    sub = world.Split(world.Get_rank() % 2, world.Get_rank())
    with hpml.Comm(sub) as c:
        assert (c.rank, c.size) == (sub.Get_rank(), sub.Get_size())
        members = [r for r in range(world.Get_size()) if r % 2 == world.Get_rank() % 2]
        got = c.allreduce(np.array([world.Get_rank()], np.int64))
        assert got[0] == sum(members)
    sub.Free()


def test_info(comm):
    d = hpml.info(comm)
    assert d["hpml"]["version"] == hpml.version()
    assert d["hpml"]["mpi"] == "openmpi"
    assert d["job"]["ranks"] == comm.size
    assert sum(n["ranks"] for n in d["job"]["nodes"]) == comm.size
    assert d["mpi"]["library"] == MPI.Get_library_version().rstrip("\n").split("\n")[0] or \
        d["mpi"]["library"].startswith("Open MPI")
    assert set(d["selection"]["collectives"]) == set(hpml.ALGOS)
    names = [s["name"] for s in d["settings"]]
    assert "HPML_CHECK" in names
    # The same dict on every rank.
    assert MPI.COMM_WORLD.allgather(repr(sorted(d["job"].items()))) == \
        [repr(sorted(d["job"].items()))] * comm.size
    assert comm.algorithm("allreduce", 8) in hpml.ALGOS["allreduce"]


def test_prepared_collectives(comm):
    x = rank_data(np.float32, 300, comm.rank)
    y = np.empty_like(x)
    run = comm.allreduce_init(x, y, algo="ring")
    for k in range(3):
        x[:] = rank_data(np.float32, 300, comm.rank, seed=k)
        run()
        np.testing.assert_array_equal(y, sum(rank_data(np.float32, 300, r, seed=k)
                                             for r in range(comm.size)))
    h = to_bf16(np.full(6, comm.rank + 1.0, np.float32))
    comm.allreduce_init(hpml.IN_PLACE, h, op="max", dtype="bf16")()
    np.testing.assert_array_equal(from_bf16(h), np.full(6, comm.size, np.float32))
    b = bytearray(b"xyz" if comm.rank == comm.size - 1 else b"...")
    comm.bcast_init(b, root=comm.size - 1)()
    assert b == bytearray(b"xyz")
    msg = "recvbuf holds 5 f32 elements, sendbuf's needs 300"
    with pytest.raises(hpml.ArgumentError, match=msg):
        comm.allreduce_init(x, np.empty(5, np.float32))
    c = hpml.Comm(MPI.COMM_WORLD)
    stale = c.allreduce_init(x, y)
    c.free()
    with pytest.raises(hpml.MPIError, match="freed"):
        stale()
