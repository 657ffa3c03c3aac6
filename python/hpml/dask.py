"""Dask over MPI (docs/dask.md): start a Dask cluster inside an MPI job, with the mpi://
comm (hpml.dask_comm) or TCP between its processes, and hand a Dask collection's
partitions to hpml's collectives and estimators on the workers.

    # mpirun -np 4 python3 script.py
    import hpml.dask
    from distributed import Client
    hpml.dask.initialize()          # rank 0: scheduler, ranks 2..: workers (never return)
    client = Client()               # rank 1 goes on: the client script
    ...                             # at exit, the scheduler and workers shut down

As dask-mpi's initialize: rank 0 runs the scheduler, rank 1 returns to run the client
script, the other ranks run one worker each. When the client script ends (normally or
by an exception), its clients are closed, the scheduler is told to terminate, the workers
close, and every rank leaves with exit status 0.
"""

import asyncio
import atexit
import logging
import os
import sys
import time

import dask
from dask.utils import stringify
from distributed.comm import CommClosedError
import numpy as np
from mpi4py import MPI

from .dask_comm import MPIBackend, register, start  # noqa: F401

logger = logging.getLogger(__name__)

__all__ = ["initialize", "mpi_run", "MPIBackend", "register", "start", "workers_comm"]

register()

_ADDR_BYTES = 512
_DONE_TAG = 1


class _State:
    world = None  # the communicator initialize() was given
    ctl = None  # a duplicate of it, for the scheduler's "finished" message to rank 1
    workers = None  # its workers (ranks 2..), MPI.COMM_NULL elsewhere
    hpml_comm = None  # hpml.Comm over `workers`, made by the first mpi_run
    address = None  # the scheduler's address


_state = _State()


def _wait_gently(req, comm):
    """Wait for a nonblocking MPI operation sleeping between tests: while the scheduler
    starts, the other ranks must not take the cores it needs."""
    while not req.Test():
        time.sleep(1e-3)


def _share_address(comm, address):
    """Broadcast the scheduler's address from rank 0 (a fixed-size buffer, waited for
    gently)."""
    buf = bytearray(_ADDR_BYTES)
    if address is not None:
        raw = address.encode()
        if len(raw) >= _ADDR_BYTES:
            raise ValueError("hpml.dask: scheduler address %r is too long" % address)
        buf[:len(raw)] = raw
    _wait_gently(comm.Ibcast([buf, MPI.BYTE], root=0), comm)
    return bytes(buf).rstrip(b"\0").decode()


async def _all_ready(comm):
    """The scheduler and each worker, once started (a worker is registered with the
    scheduler when it has started): enter the barrier that lets rank 1 go on, without
    blocking the event loop."""
    req = comm.Ibarrier()
    while not req.Test():
        await asyncio.sleep(1e-3)


def initialize(protocol="mpi", nthreads=1, memory_limit="auto", local_directory=None,
               host=None, dashboard=False, worker_options=None, scheduler_options=None,
               comm=None, exit=True):
    """Start a Dask cluster on the ranks of `comm` (default MPI.COMM_WORLD), which needs
    at least 3: rank 0 runs the scheduler, ranks 2 and up one worker each (nthreads
    threads); rank 1 returns True, once every worker has registered with the scheduler, and
    runs the client script. protocol: "mpi" (mpi://,
    the default) or "tcp" (host: the address to listen on; default 127.0.0.1 when every
    rank is on one node). With exit=False the scheduler's and workers' ranks return False
    when the cluster has shut down instead of exiting."""
    if protocol not in ("mpi", "tcp"):
        raise ValueError("hpml.dask: protocol %r: use 'mpi' or 'tcp'" % (protocol,))
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 3:
        raise ValueError(
            "hpml.dask: initialize needs at least 3 ranks (scheduler, client, one worker); "
            "this job has %d" % size
        )
    if _state.world is not None:
        raise RuntimeError("hpml.dask: initialize was already called in this process")
    _state.world = comm
    for name in ("distributed.batched", "distributed.worker", "tornado.application"):
        logging.getLogger(name).addFilter(_QuietClosedStream())
    _state.workers = comm.Split(0 if rank >= 2 else MPI.UNDEFINED, rank)
    _state.ctl = comm.Dup()  # rank 0 tells rank 1 there that the scheduler has finished
    if protocol == "mpi":
        start(comm)
    elif host is None:
        names = comm.allgather(MPI.Get_processor_name())
        host = "127.0.0.1" if len(set(names)) == 1 else None
    dask.config.set({"distributed.scheduler.work-stealing": True})

    if rank == 0:
        from distributed import Scheduler

        async def run_scheduler():
            _quiet_closed_tasks()
            opts = dict(scheduler_options or {})
            opts.setdefault("dashboard", dashboard)
            if not dashboard:
                opts.setdefault("dashboard_address", None)
            async with Scheduler(protocol=protocol, host=host, **opts) as scheduler:
                _share_address(comm, scheduler.address)
                await _all_ready(comm)
                await scheduler.finished()

        asyncio.run(run_scheduler())
        _wait_gently(_state.ctl.Isend([b"", MPI.BYTE], 1, _DONE_TAG), comm)
        return _leave(exit)

    address = _share_address(comm, None)
    _state.address = address
    dask.config.set(scheduler_address=address)
    if rank == 1:
        atexit.register(_shutdown_cluster, address, _state.ctl)
        _wait_gently(comm.Ibarrier(), comm)  # every worker has registered
        return True

    from distributed import Worker

    async def run_worker():
        _quiet_closed_tasks()
        opts = dict(worker_options or {})
        opts.setdefault("dashboard", False)
        async with Worker(address, nthreads=nthreads, memory_limit=memory_limit,
                          local_directory=local_directory, protocol=protocol, host=host,
                          name=rank, **opts) as worker:
            await _all_ready(comm)
            await worker.finished()

    asyncio.run(run_worker())
    return _leave(exit)


def _leave(exit):
    """The scheduler's and workers' ranks after the cluster shut down: with exit, run the
    exit handlers, finalise MPI and end the process at once with status 0 (tearing the
    interpreter down, dask's and pandas' modules included, takes seconds that a loaded
    machine cannot spare and that rank 1, in MPI_Finalize with the others, would wait)."""
    if not exit:
        return False
    atexit._run_exitfuncs()
    if MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.Finalize()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


async def _terminate(address):
    from distributed.core import rpc

    async with rpc(address) as scheduler:
        try:
            await scheduler.terminate()
        except OSError:  # closed while answering: it is terminating
            pass


async def _stop_scheduler(address, done):
    """Terminate the scheduler unless it has finished (the script shut it down): an
    attempt to connect to a scheduler that is gone would wait for its timeout."""
    task = asyncio.ensure_future(_terminate(address))
    while not task.done():
        if done.Test():
            task.cancel()
            break
        await asyncio.sleep(5e-3)
    try:
        await task
    except asyncio.CancelledError:
        pass


def _shutdown_cluster(address, ctl):
    """Rank 1 at exit: terminate the scheduler (which closes the workers) through a client
    of the script still open (so that it does not try to reconnect), else directly
    unless rank 0 says the scheduler has finished; then close the clients. When the script
    shut the scheduler down itself (a client "closing"), nothing is sent: a terminate sent
    to the closing scheduler could be accepted, and its handler wait for the close in
    progress, which waited for that handler (over tcp://, 3 runs in 144 ended 30 s late,
    at this handler's time limit)."""
    from distributed import Client

    def close(clients):
        for client in clients:
            try:
                client.close(timeout=5)
            except Exception as e:  # closing a client of a terminated scheduler: go on
                logger.debug("hpml.dask: closing a client at exit: %r", e)

    done = ctl.Irecv([bytearray(1), MPI.BYTE], 0, _DONE_TAG)
    clients = [c for c in list(Client._instances) if c.status not in ("closed",)]
    running = [c for c in clients if c.status == "running"]
    shut = [c for c in clients if c.status == "closing"]  # client.shutdown() was called
    try:
        if running:
            running[0].shutdown()
        elif shut:  # the scheduler is closing: wait for its rank's message below
            close(clients)
            clients = []
        else:
            asyncio.run(asyncio.wait_for(_stop_scheduler(address, done), 30))
    except Exception as e:
        sys.stderr.write("hpml.dask: could not terminate the scheduler at %s: %r\n"
                         % (address, e))
    close(clients)
    deadline = time.monotonic() + 10
    while not done.Test():  # the scheduler's rank has finished: its message is matched
        if time.monotonic() > deadline:
            done.Cancel()
            done.Wait()
            break
        time.sleep(1e-3)


def _quiet_closed_tasks():
    """The running loop's exception handler reports a task that ended with a CommClosedError
    in one line at INFO (hpml.dask's logger), not as an error with its traceback:
    asyncio.run, ending the scheduler's or a worker's
    loop, reports the tasks it cancels that end with an exception, and a comm's read
    cancelled there ends with CommClosedError (as in distributed's UCX comm)."""
    loop = asyncio.get_running_loop()

    def handler(loop, context):
        if isinstance(context.get("exception"), CommClosedError):
            logger.info("hpml.dask: %s: %s", context.get("message"), context["exception"])
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


class _QuietClosedStream(logging.Filter):
    """Records of distributed carry the traceback of a CommClosedError that a cluster
    shutdown causes: a batched stream whose peer closed first (at INFO, every shutdown:
    distributed #7192), a worker's heartbeat in flight when the scheduler closes (at
    ERROR, now and then), a client's heartbeat after the scheduler closed (tornado's
    ERROR "Exception in callback", seen once over tcp://). In an MPI job the scheduler
    cannot die alone (mpirun ends the job), so a closed comm there means a shutdown: keep
    the line, drop the traceback."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, CommClosedError) or \
                record.getMessage().startswith("Batched Comm Closed"):
            record.exc_info = None
            record.exc_text = None
        return True


def workers_comm():
    """The MPI communicator of the workers' ranks (MPI.COMM_NULL on the scheduler and the
    client ranks); None before initialize()."""
    return _state.workers


class _Local:
    """An mpi_run argument that each worker replaces by its own partitions: the keys of
    the blocks each worker holds, and how to join them."""

    def __init__(self, kind, keys, meta, block_of):
        self.kind = kind  # "array" or "frame"
        self.keys = keys  # worker address -> keys it holds (in block order)
        self.meta = meta  # an empty block: dtype and trailing shape, or the columns
        self.block_of = block_of  # key -> block index


def _local(arg, client):
    """Persist a dask.array or dask.dataframe on the workers and note who holds what;
    other arguments pass unchanged."""
    import dask.array as da
    from distributed import wait

    try:
        import dask.dataframe as dd
    except ImportError:  # pandas missing: no dataframes
        dd = None
    if isinstance(arg, da.Array):
        if arg.ndim == 0 or any(len(c) != 1 for c in arg.chunks[1:]):
            arg = arg.rechunk({i: -1 for i in range(1, arg.ndim)})
        kind = "array"
        meta = np.empty((0,) + arg.shape[1:], arg.dtype)
    elif dd is not None and isinstance(arg, dd.DataFrame):
        kind = "frame"
        meta = arg._meta
    else:
        return arg, None
    persisted = client.persist(arg)
    wait(persisted)
    keys = [stringify(k) for k in dask.core.flatten(persisted.__dask_keys__())]
    who = client.who_has(persisted)
    by_worker = {}
    for k in keys:
        holders = sorted(who.get(k, ()))
        if not holders:
            raise RuntimeError("hpml.dask: mpi_run: no worker holds block %r" % (k,))
        by_worker.setdefault(holders[0], []).append(k)
    return _Local(kind, by_worker, meta, {k: i for i, k in enumerate(keys)}), persisted


def _resolve(arg, worker):
    if not isinstance(arg, _Local):
        return arg
    keys = arg.keys.get(worker.address, [])
    blocks = [worker.data[k] for k in keys]
    if arg.kind == "array":
        data = np.concatenate(blocks, axis=0) if blocks else arg.meta
    else:
        import pandas as pd

        data = pd.concat(blocks) if blocks else arg.meta
    return Partitions(data, [arg.block_of[k] for k in keys])


class Partitions:
    """What a worker's fn receives for a Dask collection argument of mpi_run: `data`, its
    blocks joined along the first axis (a NumPy array or a pandas DataFrame), and
    `blocks`, the index of each block in the collection (in the order joined)."""

    def __init__(self, data, blocks):
        self.data = data
        self.blocks = blocks


def _remote(fn, args, kwargs, dask_worker=None):
    if _state.workers is None or _state.workers == MPI.COMM_NULL:
        raise RuntimeError("hpml.dask: mpi_run needs workers started by hpml.dask.initialize")
    if _state.hpml_comm is None:
        from .comm import Comm

        _state.hpml_comm = Comm(_state.workers)
    args = [_resolve(a, dask_worker) for a in args]
    return fn(_state.hpml_comm, *args, **kwargs)


def mpi_run(client, fn, *args, **kwargs):
    """Run fn(comm, *args, **kwargs) on every worker at once, comm an hpml.Comm over the
    workers only (its rank order is the workers' MPI rank order), and return the results
    as a list in that order. A dask.array or dask.dataframe argument is persisted and
    each worker's fn gets a Partitions of the blocks that worker holds (no block moves);
    other arguments pass as they are. Every worker must take part: fn runs on the
    workers' event loops, and the collectives in it block until all workers call them."""
    if client.scheduler_info() is None:
        raise RuntimeError("hpml.dask: mpi_run: the client is not connected")
    local = [_local(a, client) for a in args]
    # The persisted collections stay here (the workers get only the keys): their
    # futures keep the blocks in the workers' memory until the run is over.
    results = client.run(_remote, fn, [a for a, _ in local], kwargs)
    del local
    info = client.scheduler_info()["workers"]
    order = sorted(results, key=lambda a: int(info[a]["name"]) if a in info else 0)
    return [results[a] for a in order]
