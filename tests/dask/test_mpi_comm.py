"""The mpi:// comm (python/hpml/dask_comm.py) in the style of distributed's
comm/tests/test_comms.py: every endpoint in this one process, so that each message goes
through MPI to this same rank (tests/cli/dask.sh runs it under mpirun -np 1; the
cross-process path is checked by tests/dask/cluster_check.py at 4 ranks).

The engine runs with a 64 KiB shard size so that frames above the shard size are cheap
to test; the comm's own limits (MAX_SIZES frame sizes in the head, INLINE bytes inline)
are crossed on purpose.
"""

import asyncio

import numpy as np
import pytest
from distributed.comm import CommClosedError, connect, listen
from distributed.protocol import to_serialize

from hpml import dask_comm

SHARD = 64 << 10
ENGINE = dask_comm.start(shard_size=SHARD)
dask_comm.register()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def echo_server(log=None):
    """A listener that echoes every message back, and notes how each comm ended."""

    async def handle(comm):
        while True:
            try:
                msg = await comm.read()
            except CommClosedError as e:
                if log is not None:
                    log.append(("closed", str(e)))
                return
            await comm.write(msg)

    server = listen("mpi://", handle, deserialize=False)
    await server.start()
    return server


async def roundtrip(comm, msg):
    await comm.write(msg)
    return await comm.read()


def test_address_and_listener():
    async def main():
        server = await echo_server()
        addr = server.contact_address
        assert addr.startswith("mpi://0/")
        assert server.listen_address == addr
        comm = await connect(addr)
        assert comm.peer_address == addr
        assert comm.local_address.startswith("mpi://0/c")
        assert not comm.closed()
        await comm.close()
        server.stop()

    run(main())


@pytest.mark.parametrize("n", [0, 1, 100, dask_comm.INLINE - 200, dask_comm.INLINE + 1,
                               SHARD - 1, SHARD, 3 * SHARD + 17, 5 << 20])
def test_ping_pong_sizes(n):
    """Small (inline in the head), medium, and frames of one, several and many shards."""
    async def main():
        server = await echo_server()
        comm = await connect(server.contact_address)
        data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
        got = await roundtrip(comm, {"op": "ping", "x": to_serialize(data)})
        assert got["op"] == "ping"
        assert np.array_equal(np.asarray(got["x"]), data)
        # and plain bytes, which go as their own frame
        raw = data.tobytes()
        got = await roundtrip(comm, {"b": raw})
        assert got["b"] == raw
        await comm.close()
        server.stop()

    run(main())


def test_many_frames():
    """More frames than the head carries sizes for: their sizes follow in a message."""
    async def main():
        server = await echo_server()
        comm = await connect(server.contact_address)
        arrays = [np.full(i % 7 + (SHARD if i % 50 == 0 else 0), i % 251, np.uint8)
                  for i in range(dask_comm.MAX_SIZES + 40)]
        got = await roundtrip(comm, {"xs": [to_serialize(a) for a in arrays]})
        assert len(got["xs"]) == len(arrays)
        for a, b in zip(arrays, got["xs"]):
            assert np.array_equal(np.asarray(b), a)
        await comm.close()
        server.stop()

    run(main())


def test_ordering_and_pipelining():
    """Many writes before any read arrive whole and in order."""
    async def main():
        server = await echo_server()
        comm = await connect(server.contact_address)
        sizes = [3, SHARD + 5, 0, 10, 2 * SHARD, 1, 5 << 20, 2, 5 << 20, 1, 4]
        for i, s in enumerate(sizes):
            await comm.write({"i": i, "x": to_serialize(np.full(s, i, np.uint8))})
        for i, s in enumerate(sizes):
            got = await comm.read()
            assert got["i"] == i
            assert np.array_equal(np.asarray(got["x"]), np.full(s, i, np.uint8))
        await comm.close()
        server.stop()

    run(main())


def test_many_concurrent_comms():
    async def main():
        server = await echo_server()
        n = 40

        async def client(i):
            comm = await connect(server.contact_address)
            for j in range(5):
                size = (i * 997 + j * SHARD // 3) % (2 * SHARD)
                x = np.full(size, (i + j) % 256, np.uint8)
                got = await roundtrip(comm, {"i": i, "j": j, "x": to_serialize(x)})
                assert (got["i"], got["j"]) == (i, j)
                assert np.array_equal(np.asarray(got["x"]), x)
            await comm.close()
            return i

        assert sorted(await asyncio.gather(*[client(i) for i in range(n)])) == list(range(n))
        server.stop()

    run(main())


async def pair():
    """(listener, connecting comm, accepted comm): a connected pair."""
    accepted = asyncio.Queue()

    async def handle(comm):
        await accepted.put(comm)

    server = listen("mpi://", handle)
    await server.start()
    comm = await connect(server.contact_address)
    return server, comm, await accepted.get()


@pytest.mark.parametrize("how", ["close", "abort"])
@pytest.mark.parametrize("side", ["connector", "listener"])
def test_close_abort_either_side(how, side):
    async def main():
        server, a, b = await pair()
        closer, other = (a, b) if side == "connector" else (b, a)
        await closer.write({"last": 1})
        if how == "close":
            await closer.close()
        else:
            closer.abort()
        assert closer.closed()
        # what was sent before the close is still read, then the close is seen
        assert (await other.read()) == {"last": 1}
        with pytest.raises(CommClosedError):
            await other.read()
        assert other.closed()
        with pytest.raises(CommClosedError):
            await other.write({"x": 1})
        with pytest.raises(CommClosedError):
            await closer.write({"x": 1})
        with pytest.raises(CommClosedError):
            await closer.read()
        other.abort()  # a second close is harmless
        await closer.close()
        server.stop()

    run(main())


def test_close_wakes_a_waiting_reader():
    async def main():
        server, a, b = await pair()
        reader = asyncio.ensure_future(b.read())
        await asyncio.sleep(0.05)
        assert not reader.done()
        a.abort()
        with pytest.raises(CommClosedError):
            await reader
        # and a reader on the side that closes
        reader = asyncio.ensure_future(a.read())
        with pytest.raises(CommClosedError):
            await reader
        server.stop()

    run(main())


def test_every_comm_finishes():
    """After both sides closed, no comm is left receiving and no send is pending."""
    async def main():
        server = await echo_server()
        comms = [await connect(server.contact_address) for _ in range(5)]
        for c in comms:
            assert (await roundtrip(c, {"x": 1})) == {"x": 1}
            await c.close()
        server.stop()
        for _ in range(200):
            if not ENGINE.comms and ENGINE.sends == 0:
                break
            await asyncio.sleep(0.01)
        assert not ENGINE.comms and ENGINE.sends == 0

    run(main())


def test_no_mpi_call_after_shutdown():
    """At exit the engine shuts down before MPI is finalised, while distributed's threads
    may still close or write to comms: after the shutdown no request is posted (an MPI
    call after MPI_Finalize aborts the process), a write raises CommClosedError."""
    async def main():
        eng = dask_comm.Engine(dask_comm.MPI.COMM_SELF, "poll", SHARD)
        loop = asyncio.get_running_loop()
        a = dask_comm.MPIComm(eng, 0, 101, 100, loop, "mpi://0/c100", "mpi://0/c101")
        b = dask_comm.MPIComm(eng, 0, 100, 101, loop, "mpi://0/c101", "mpi://0/c100")
        await a.write({"x": 1})
        while not b._inbox:
            eng.step()
            await asyncio.sleep(0)
        assert (await b.read()) == {"x": 1}
        eng.shutdown()
        assert not eng.reqs
        with pytest.raises(CommClosedError, match="engine has shut down"):
            await b.write({"x": 2})
        a.abort()
        b.abort()
        assert not eng.reqs, "%d MPI requests posted after the shutdown" % len(eng.reqs)
        c = dask_comm.MPIComm(eng, 0, 103, 102, loop, "mpi://0/c102", "mpi://0/c103")
        assert not eng.reqs
        c.abort()
        with pytest.raises(CommClosedError, match="engine has shut down"):
            eng.send_ctrl(0, dask_comm.CONNECT, 0, 5)
        eng.comm.Free()

    run(main())


def test_quiet_closed_tasks(caplog):
    """hpml.dask's loops report a task that ended with CommClosedError without its
    traceback (asyncio.run reports so the tasks it cancels at the end of a scheduler's
    or worker's loop: a handshake's read cancelled there), other exceptions as before."""
    import logging

    import hpml.dask

    async def main():
        hpml.dask._quiet_closed_tasks()
        loop = asyncio.get_running_loop()
        for message, exc in (("closed", CommClosedError("gone")), ("other", ValueError("v"))):
            loop.call_exception_handler({"message": message, "exception": exc})

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    shown = [(r.name, r.getMessage(), r.exc_info is not None) for r in caplog.records
             if r.name in ("asyncio", "hpml.dask") and r.levelno >= logging.INFO]
    assert shown == [("hpml.dask", "hpml.dask: closed: gone", False),
                     ("asyncio", "other", True)], shown


def test_connect_refused_and_bad_addresses():
    async def main():
        with pytest.raises(OSError, match="Timed out trying to connect"):
            await connect("mpi://0/999", timeout=0.3)
        with pytest.raises(ValueError, match="the job has 1 ranks"):
            await connect("mpi://5/0", timeout=0.3)
        with pytest.raises(ValueError, match="not an mpi:// address"):
            await connect("mpi://zero/1", timeout=0.3)
        server = await echo_server()
        taken = listen(server.listen_address, None)
        with pytest.raises(OSError, match="already in use"):
            await taken.start()
        other = listen("mpi://3/0", None)
        with pytest.raises(ValueError, match="names the rank it is on"):
            await other.start()
        server.stop()

    run(main())


def test_cluster_and_a_worker_that_dies():
    """A scheduler and two workers over mpi://; one worker's link to the scheduler is
    aborted while it holds tasks: the scheduler removes it and the other worker
    computes everything."""
    from distributed import Client, Scheduler, Worker

    def slow_square(i):
        import time
        time.sleep(0.02)
        return i * i

    async def main():
        async with Scheduler(protocol="mpi", dashboard_address=None) as s:
            assert s.address.startswith("mpi://0/")
            async with Worker(s.address, nthreads=1, dashboard=False) as w1, \
                    Worker(s.address, nthreads=1, dashboard=False) as w2:
                async with Client(s.address, asynchronous=True) as c:
                    futs = c.map(slow_square, range(40))
                    while not w2.state.tasks:
                        await asyncio.sleep(0.01)
                    w2.batched_stream.comm.abort()  # the worker "dies"
                    assert sum(await c.gather(futs)) == sum(i * i for i in range(40))
                    while w2.address in s.workers:
                        await asyncio.sleep(0.01)
                    assert list(s.workers) == [w1.address]

    run(main())


def test_awkward_frames():
    """Frames that are not flat C-contiguous byte buffers (distributed hands such frames
    to a comm, e.g. from pandas): a memoryview with a zero in its shape, a Fortran-order
    one, one of several dimensions above the shard size."""
    from distributed.protocol.serialize import Serialized, serialize

    def as_frame(a):
        header, frames = serialize(a)
        assert len(frames) == 1
        return Serialized(header, [memoryview(a)])

    async def main():
        server = await echo_server()
        comm = await connect(server.contact_address)
        arrays = [np.empty((0, 3)), np.asfortranarray(np.arange(12.0).reshape(3, 4)),
                  np.asfortranarray(np.ones((SHARD // 8 + 3, 2))),
                  np.arange(6.0).reshape(2, 3)]
        got = await roundtrip(comm, {"xs": [as_frame(a) for a in arrays]})
        for a, b in zip(arrays, got["xs"]):
            b = np.asarray(b)
            assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
        await comm.close()
        server.stop()

    run(main())


def test_cancelled_read_aborts():
    """As distributed's UCX comm: a read cancelled ends the comm with CommClosedError,
    and the peer sees the comm closed."""
    async def main():
        server, a, b = await pair()
        reader = asyncio.ensure_future(a.read())
        await asyncio.sleep(0.02)
        reader.cancel()
        with pytest.raises(CommClosedError, match="read cancelled"):
            await reader
        assert a.closed()
        with pytest.raises(CommClosedError):
            await b.read()
        server.stop()

    run(main())


def test_refusals():
    import dask

    import hpml.dask

    with dask.config.set({"distributed.comm.mpi.progress": "spin"}):
        with pytest.raises(ValueError, match="progress is 'spin': use 'thread' or 'poll'"):
            dask_comm.Engine(dask_comm.MPI.COMM_SELF)
    with dask.config.set({"distributed.comm.mpi.shard-size": "0"}):
        with pytest.raises(ValueError, match="shard-size is '0': use a byte count"):
            dask_comm.Engine(dask_comm.MPI.COMM_SELF)
    with dask.config.set({"distributed.comm.mpi.spin": "fast"}):
        with pytest.raises(ValueError, match="spin is 'fast': use seconds from 0 to 1"):
            dask_comm.Engine(dask_comm.MPI.COMM_SELF)
    with pytest.raises(ValueError, match="protocol 'ucx': use 'mpi' or 'tcp'"):
        hpml.dask.initialize(protocol="ucx")
    with pytest.raises(ValueError, match="initialize needs at least 3 ranks .* this job has 1"):
        hpml.dask.initialize()
