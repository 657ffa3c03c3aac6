"""The `mpi://RANK/ID` communication backend for Dask distributed (docs/dask.md).

A Dask comm is a message channel between two endpoints; here both ends are ranks of one
MPI job and the bytes go by MPI point-to-point on a duplicate of the job's communicator.

Addresses: `mpi://RANK/ID` is listener ID on world rank RANK (the scheduler that
hpml.dask.initialize starts is mpi://0/0). Listening on `mpi://` or `mpi://RANK` takes the
next free ID on this rank.

Connecting: the connector posts the receive of its new comm's first message, then sends
CONNECT(listener ID, its comm tag) to the listener's rank on the control tag; that rank's
engine answers ACCEPT(its comm tag) or REFUSE (no such listener), and hands the new comm
to the listener. Each side sends to the peer's comm tag, so MPI's non-overtaking order
keeps each comm's messages in order.

Messages are framed as distributed's UCX comm frames them: a head (kind, frame count,
number of frames carried inline, every frame's size), small frames appended to the head
up to INLINE bytes, then each remaining frame as messages of at most the shard size.
The engine receives every message whole as soon as it arrives (a head receive is always
posted for a live comm) and queues it for read().

Closing: close() and abort() send a CLOSE head; the peer answers with its own CLOSE if it
has not sent one. A comm keeps receiving (and dropping) messages until it has seen the
peer's CLOSE, so no send is left unmatched when the processes finalise MPI. Once the
engine has shut down (at exit, before MPI is finalised) it makes no MPI call: a close
sends nothing, a write or connect raises CommClosedError.

Progress: one engine per process owns every request. Mode "poll" (the default) runs the
step that tests the requests as a task of each event loop that uses the comm, spinning
2 ms after the last completion, then sleeping 1 ms at a time; mode "thread" runs it in a
progress thread that spins 0.5 ms, then backs off to sleeping (a new request wakes it).
Select with `distributed.comm.mpi.progress` (DASK_DISTRIBUTED__COMM__MPI__PROGRESS); the
spin time is `distributed.comm.mpi.spin` (seconds); the shard size is `distributed.comm.mpi.shard-size` (bytes, default 64 MiB).
"""

import asyncio
import atexit
import collections
import inspect
import itertools
import logging
import os
import struct
import threading
import time

import dask
import numpy as np
from distributed.comm import registry
from distributed.comm.core import Comm, CommClosedError, Connector, Listener
from distributed.comm.registry import Backend
from distributed.comm.utils import from_frames, to_frames
from distributed.utils import ensure_memoryview, nbytes
from mpi4py import MPI

logger = logging.getLogger(__name__)

PREFIX = "mpi://"
CTRL_TAG = 1  # connect requests and answers
FIRST_COMM_TAG = 2
CONNECT, ACCEPT, REFUSE = 1, 2, 3
DATA, CLOSE = 0, 1
_CTRL = struct.Struct("<qqqq")  # kind, source rank, listener id or comm tag, comm tag
MAX_SIZES = 256  # frame sizes carried in the head; more follow in their own message
INLINE = 32 << 10  # bytes of small frames carried in the head
HEAD_CAP = 8 * (3 + MAX_SIZES) + INLINE
DEFAULT_SHARD = 64 << 20
DEFAULT_SPIN = {"poll": 2e-3, "thread": 5e-4}  # seconds of spinning after a completion

_THREAD_LEVELS = {
    MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
    MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
    MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED",
    MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE",
}


def _config_progress():
    mode = dask.config.get("distributed.comm.mpi.progress", "poll")
    if mode not in ("thread", "poll"):
        raise ValueError(
            "hpml.dask: distributed.comm.mpi.progress is %r: use 'thread' or 'poll'" % (mode,)
        )
    return mode


def _config_shard():
    raw = dask.config.get("distributed.comm.mpi.shard-size", DEFAULT_SHARD)
    try:
        shard = int(raw)
    except (TypeError, ValueError):
        shard = 0
    if shard < 1 or shard > (1 << 30):
        raise ValueError(
            "hpml.dask: distributed.comm.mpi.shard-size is %r: use a byte count from 1 to "
            "1073741824" % (raw,)
        )
    return shard


def _config_spin(mode):
    raw = dask.config.get("distributed.comm.mpi.spin", None)
    if raw is None:
        return DEFAULT_SPIN[mode]
    try:
        spin = float(raw)
    except (TypeError, ValueError):
        spin = -1.0
    if not 0 <= spin <= 1:
        raise ValueError(
            "hpml.dask: distributed.comm.mpi.spin is %r: use seconds from 0 to 1" % (raw,)
        )
    return spin


def check_thread_level(mode):
    """Raise a clear error when MPI's thread level cannot carry progress mode `mode`."""
    need = MPI.THREAD_MULTIPLE if mode == "thread" else MPI.THREAD_SERIALIZED
    have = MPI.Query_thread()
    if have < need:
        raise RuntimeError(
            "hpml.dask: the mpi:// comm with %s progress needs %s, but MPI was initialised "
            "with %s (set mpi4py.rc.thread_level = 'multiple' before importing mpi4py.MPI, "
            "or use an MPI built with thread support)"
            % (mode, _THREAD_LEVELS[need], _THREAD_LEVELS.get(have, str(have)))
        )


def _wake(fut, exc=None):
    """Complete an asyncio future (in its loop's thread) unless it is already done."""
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)


def _call_in(loop, fn, *args):
    """Run fn(*args) in loop's thread: now when this is that thread, else soon."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn(*args)
    elif not loop.is_closed():
        loop.call_soon_threadsafe(fn, *args)


class Engine:
    """Every MPI request of the mpi:// comms of this process, and their progress."""

    def __init__(self, comm, progress=None, shard_size=None):
        self.progress_mode = progress or _config_progress()
        check_thread_level(self.progress_mode)
        self.shard = shard_size or _config_shard()
        self.spin = _config_spin(self.progress_mode)
        self.comm = comm.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.hosts = self.comm.allgather(MPI.Get_processor_name())
        self.tag_ub = min(self.comm.Get_attr(MPI.TAG_UB) or 32767, (1 << 31) - 1)
        self.lock = threading.RLock()
        self.reqs = []  # MPI requests, and beside each the callback for its completion
        self.cbs = []
        self.bufs = []  # (buffer, is a send): kept alive until the request completes
        self.sends = 0
        self.bulk = 0
        self.listeners = {}  # id -> Listener
        self.comms = {}  # our comm tag -> MPIComm still receiving
        self.connecting = {}  # our comm tag -> (future, loop) of a connect waiting
        self._tags = itertools.count(FIRST_COMM_TAG)
        self._listener_ids = itertools.count(0)
        self.kick = threading.Event()
        self.stopping = False
        self.steps = 0
        self._post_ctrl_recv()
        self.thread = None
        self.poll_tasks = {}  # event loop -> its progress task (poll mode)
        if self.progress_mode == "thread":
            self.thread = threading.Thread(target=self._run_thread, name="hpml-mpi-progress",
                                           daemon=True)
            self.thread.start()

    # ---- requests ----------------------------------------------------------------------
    def post(self, req, cb, buf, send=False, bulk=False):
        """Add a request; send: a send (shutdown waits for those); bulk: a send or a
        frame's receive, during which progress does not back off (a transfer in flight
        moves only while its ranks test it)."""
        with self.lock:
            self.reqs.append(req)
            self.cbs.append(cb)
            self.bufs.append((buf, send, bulk or send))
            self.sends += send
            self.bulk += bulk or send
        self.kick.set()

    def step(self):
        """Test every request once; run the callbacks of those complete. Returns how many.
        The progress thread and the event loop's thread both step: the lock makes each
        step, callbacks included, one at a time, so that the callbacks of one comm run in
        the order its requests completed."""
        with self.lock:
            if not self.reqs:
                return 0
            done = MPI.Request.Testsome(self.reqs)
            if not done:
                return 0
            done = sorted(done)
            cbs = [self.cbs[i] for i in done]
            for i in reversed(done):
                self.sends -= self.bufs[i][1]
                self.bulk -= self.bufs[i][2]
                del self.reqs[i], self.cbs[i], self.bufs[i]
            for cb in cbs:
                if cb is not None:
                    try:
                        cb()
                    except Exception:  # a callback's failure must not stop progress
                        logger.exception("hpml.dask: mpi:// progress callback failed")
            return len(cbs)

    def _run_thread(self):
        busy_until = 0.0
        idle = 0
        while not self.stopping:
            self.kick.clear()
            n = self.step()
            self.steps += 1
            if n or self.bulk:
                busy_until = time.monotonic() + self.spin
                idle = 0
                if not n:
                    time.sleep(0)
                continue
            if time.monotonic() < busy_until:
                os.sched_yield()  # yield the GIL and the core, stay responsive
                continue
            idle += 1
            self.kick.wait(min(1e-3, 2e-5 * (1 << min(idle, 6))))

    def ensure_poll(self):
        """Poll mode: the progress task of the running loop (one per loop)."""
        if self.progress_mode != "poll":
            return
        loop = asyncio.get_running_loop()
        task = self.poll_tasks.get(loop)
        if task is None or task.done():
            for other in [l for l in self.poll_tasks if l.is_closed()]:
                del self.poll_tasks[other]
            self.poll_tasks[loop] = loop.create_task(self._run_poll())

    async def _run_poll(self):
        busy_until = 0.0
        while not self.stopping:
            n = self.step()
            self.steps += 1
            if n or self.bulk or self.kick.is_set():
                self.kick.clear()
                busy_until = time.monotonic() + self.spin
                await asyncio.sleep(0)
                continue
            # the same spin time as the thread, then the loop's timer granularity (1 ms)
            await asyncio.sleep(0 if time.monotonic() < busy_until else 1e-3)

    def new_tag(self):
        tag = next(self._tags)
        if tag > self.tag_ub:
            raise OSError("hpml.dask: mpi:// ran out of MPI tags (tag upper bound %d)"
                          % self.tag_ub)
        return tag

    # ---- control messages --------------------------------------------------------------
    def _post_ctrl_recv(self):
        buf = bytearray(_CTRL.size)
        req = self.comm.Irecv([buf, MPI.BYTE], MPI.ANY_SOURCE, CTRL_TAG)
        self.post(req, lambda: self._on_ctrl(buf), buf)

    def send_ctrl(self, dest, kind, a, b):
        buf = _CTRL.pack(kind, self.rank, a, b)
        with self.lock:
            if self.stopping:
                raise CommClosedError("hpml.dask: the mpi:// engine has shut down")
            self.post(self.comm.Isend([buf, MPI.BYTE], dest, CTRL_TAG), None, buf, True)

    def _on_ctrl(self, buf):
        if self.stopping:
            return
        kind, src, a, b = _CTRL.unpack(bytes(buf))
        self._post_ctrl_recv()
        if kind == CONNECT:
            listener = self.listeners.get(a)
            if listener is None:
                self.send_ctrl(src, REFUSE, b, 0)
                return
            tag = self.new_tag()
            comm = MPIComm(self, src, b, tag, listener.loop, listener.listen_address,
                           "%s%d/c%d" % (PREFIX, src, b), listener.deserialize)
            self.send_ctrl(src, ACCEPT, b, tag)
            _call_in(listener.loop, listener.accept, comm)
        elif kind in (ACCEPT, REFUSE):
            waiting = self.connecting.pop(a, None)
            if waiting is None:
                return
            fut, loop = waiting
            _call_in(loop, self._connected, fut, kind, b)

    @staticmethod
    def _connected(fut, kind, peer_tag):
        if not fut.done():
            fut.set_result(peer_tag if kind == ACCEPT else None)

    # ---- data --------------------------------------------------------------------------
    def send_message(self, comm, kind, frames, sizes, done):
        """Post the head and frames of one message to comm's peer; done() when all sent."""
        inline = 0
        used = 8 * (3 + min(len(sizes), MAX_SIZES))
        if len(sizes) <= MAX_SIZES:
            while inline < len(sizes) and used + sizes[inline] <= HEAD_CAP:
                used += sizes[inline]
                inline += 1
        head = bytearray(used)
        n = len(sizes)
        struct.pack_into("<3Q", head, 0, kind, n, inline)
        struct.pack_into("<%dQ" % min(n, MAX_SIZES), head, 24, *sizes[:MAX_SIZES])
        off = 8 * (3 + min(n, MAX_SIZES))
        for f, s in zip(frames[:inline], sizes[:inline]):
            head[off:off + s] = ensure_memoryview(f)
            off += s
        msgs = [head]
        if n > MAX_SIZES:
            msgs.append(struct.pack("<%dQ" % (n - MAX_SIZES), *sizes[MAX_SIZES:]))
        for f, s in zip(frames[inline:], sizes[inline:]):
            if s == 0:
                continue
            view = ensure_memoryview(f)
            for start in range(0, s, self.shard):
                msgs.append(view[start:start + self.shard])
        left = [len(msgs)]

        def one_sent():
            left[0] -= 1
            if left[0] == 0 and done is not None:
                done()

        dest, tag = comm.peer_rank, comm.peer_tag
        with self.lock:  # the messages of one comm go out in order
            if self.stopping:  # MPI may be finalised: nothing more goes out
                raise CommClosedError("hpml.dask: the mpi:// engine has shut down")
            for m in msgs:
                self.post(self.comm.Isend([m, MPI.BYTE], dest, tag), one_sent, m, True)

    def post_head_recv(self, comm):
        buf = np.empty(HEAD_CAP, np.uint8)
        with self.lock:
            if self.stopping:
                return
            req = self.comm.Irecv([buf, MPI.BYTE], comm.peer_rank, comm.tag)
            self.post(req, lambda: self._on_head(comm, buf), buf)

    def _on_head(self, comm, buf):
        if self.stopping or comm.tag not in self.comms:
            return
        kind, n, inline = struct.unpack_from("<3Q", buf, 0)
        if kind == CLOSE:
            self.comms.pop(comm.tag, None)
            comm.peer_sent_close()
            return
        sizes = list(struct.unpack_from("<%dQ" % min(n, MAX_SIZES), buf, 24))
        if n > MAX_SIZES:
            more = np.empty(8 * (n - MAX_SIZES), np.uint8)
            req = self.comm.Irecv([more, MPI.BYTE], comm.peer_rank, comm.tag)
            self.post(req, lambda: self._on_sizes(comm, buf, sizes, more), more)
        else:
            self._recv_frames(comm, buf, sizes, inline)

    def _on_sizes(self, comm, head, sizes, more):
        sizes += struct.unpack("<%dQ" % (len(more) // 8), more)
        self._recv_frames(comm, head, sizes, 0)

    def _recv_frames(self, comm, head, sizes, inline):
        frames = []
        off = 8 * (3 + min(len(sizes), MAX_SIZES))
        for s in sizes[:inline]:
            frames.append(memoryview(head[off:off + s]))
            off += s
        posted = []
        for s in sizes[inline:]:
            f = np.empty(s, np.uint8)
            frames.append(memoryview(f))
            for start in range(0, s, self.shard):
                posted.append(f[start:start + self.shard])
        # A message's frames may complete after a later, smaller message has: each
        # message waits in comm._pending until those before it are whole.
        slot = [frames, len(posted)]

        def one_received():
            slot[1] -= 1
            if slot[1] == 0:
                comm.flush()

        with self.lock:  # the frames' receives before the next head's
            comm._pending.append(slot)
            for piece in posted:
                req = self.comm.Irecv([piece, MPI.BYTE], comm.peer_rank, comm.tag)
                self.post(req, one_received, piece, bulk=True)
            self.post_head_recv(comm)
            if not posted:
                comm.flush()

    # ---- shutdown ----------------------------------------------------------------------
    def shutdown(self, timeout=1.0):
        """Stop progress; give sends up to `timeout` s to complete, cancel the receives."""
        if self.stopping:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._sends_pending():
            self.step()
            time.sleep(1e-4)
        with self.lock:  # from here on no MPI call is made (MPI may be finalised next)
            self.stopping = True
        self.kick.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(1.0)
        with self.lock:
            for req in self.reqs:
                try:
                    req.Cancel()
                except MPI.Exception:
                    pass
            for req in self.reqs:
                try:
                    if req.Test():
                        continue
                except MPI.Exception:
                    pass
            self.reqs, self.cbs, self.bufs, self.sends, self.bulk = [], [], [], 0, 0

    def _sends_pending(self):
        with self.lock:
            return self.sends > 0


_engine = None
_engine_lock = threading.Lock()


def start(comm=None, progress=None, shard_size=None):
    """Start this process's mpi:// engine on `comm` (default MPI.COMM_WORLD). Collective:
    every rank of comm calls it (it duplicates comm). Returns the engine."""
    global _engine
    with _engine_lock:
        if _engine is not None:
            return _engine
        _engine = Engine(comm if comm is not None else MPI.COMM_WORLD, progress, shard_size)
        atexit.register(_engine.shutdown)
        return _engine


def engine():
    if _engine is None:
        raise RuntimeError(
            "hpml.dask: the mpi:// comm is not started: call hpml.dask.initialize() (or "
            "hpml.dask_comm.start(), collectively on every rank) first"
        )
    return _engine


def _parse(loc):
    """(rank, id) of 'RANK/ID'; id None for 'RANK', '' or a comm's own end 'RANK/cTAG';
    rank None for ''."""
    rank_s, _, id_s = loc.partition("/")
    if id_s[:1] == "c" and id_s[1:].isdigit():
        id_s = ""
    try:
        rank = int(rank_s) if rank_s else None
        ident = int(id_s) if id_s else None
    except ValueError:
        raise ValueError("hpml.dask: %r is not an mpi:// address (mpi://RANK/ID)"
                         % (PREFIX + loc)) from None
    if (rank is not None and rank < 0) or (ident is not None and ident < 0):
        raise ValueError("hpml.dask: %r is not an mpi:// address (mpi://RANK/ID)"
                         % (PREFIX + loc))
    return rank, ident


def _retrieve_if_orphaned(task, fn):
    """When task runs only fn's coroutine (a write that distributed's BatchedSend yields
    from a tornado coroutine is wrapped in a task of its own), retrieve its exception when
    it ends. At shutdown the coroutine that yielded it can be dropped with the event loop
    before the task ends; a write on the closed comm then raises CommClosedError, as it
    must, and asyncio logged "Task exception was never retrieved" with a traceback. A
    caller that awaits the task still gets the exception."""
    if task is not None and getattr(task.get_coro(), "cr_code", None) is fn.__code__:
        task.add_done_callback(lambda t: t.cancelled() or t.exception())


class MPIComm(Comm):
    """One end of an mpi:// connection (see the module's text)."""

    def __init__(self, eng, peer_rank, peer_tag, tag, loop, local_addr, peer_addr,
                 deserialize=True):
        super().__init__(deserialize=deserialize)
        self.engine = eng
        self.peer_rank = peer_rank
        self.peer_tag = peer_tag
        self.tag = tag
        self.loop = loop
        self._local_addr = local_addr
        self._peer_addr = peer_addr
        self._inbox = collections.deque()  # whole messages (frame lists) for read()
        self._pending = collections.deque()  # [frames, receives left] in arrival order
        self._close_seen = False
        self._waiter = None
        self._closed = False  # this side closed or aborted
        self._peer_closed = False
        self._sent_close = False
        eng.comms[tag] = self
        eng.post_head_recv(self)

    @property
    def local_address(self):
        return self._local_addr

    @property
    def peer_address(self):
        return self._peer_addr

    @property
    def extra_info(self):
        return {"peer_rank": self.peer_rank}

    # called by the engine, from any thread
    # called by the engine, under its lock, from either thread
    def flush(self):
        """Move the whole messages at the front of _pending to the inbox, in order; after
        the peer's CLOSE, once nothing is pending, mark the peer closed."""
        moved = False
        while self._pending and self._pending[0][1] == 0:
            frames = self._pending.popleft()[0]
            if not self._closed:  # read after this side closed: dropped
                self._inbox.append(frames)
                moved = True
        if self._close_seen and not self._pending and not self._peer_closed:
            self._peer_closed = True
            moved = True
        if moved:
            _call_in(self.loop, self._wake_reader)

    def peer_sent_close(self):
        self._send_close()  # answered at once, even when no loop runs for this comm
        self._close_seen = True
        self.flush()

    def _wake_reader(self):
        if self._waiter is not None:
            _wake(self._waiter)

    def _send_close(self):
        with self.engine.lock:
            if self._sent_close or self.engine.stopping:
                return
            self._sent_close = True
            self.engine.send_message(self, CLOSE, [], [], None)

    # the Comm interface
    async def read(self, deserializers=None):
        while not self._inbox:
            if self._closed:
                raise CommClosedError("mpi:// comm %s was closed" % self._local_addr)
            if self._peer_closed:
                raise CommClosedError("mpi:// comm closed by its peer %s" % self._peer_addr)
            self.engine.ensure_poll()
            if self.engine.step():  # something completed: look again before waiting
                continue
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            except asyncio.CancelledError:
                # As distributed's UCX comm: a read cancelled (a client closing, a
                # handshake timing out) ends the comm, and says so as a closed comm.
                self.abort()
                raise CommClosedError("mpi:// comm %s: read cancelled, comm aborted"
                                      % self._local_addr) from None
            finally:
                self._waiter = None
        if self._closed:
            raise CommClosedError("mpi:// comm %s was closed" % self._local_addr)
        frames = self._inbox.popleft()
        try:
            return await from_frames(frames, deserialize=self.deserialize,
                                     deserializers=deserializers,
                                     allow_offload=self.allow_offload)
        except EOFError:
            self.abort()
            raise CommClosedError("mpi:// comm: truncated message, aborted") from None

    async def write(self, msg, serializers=None, on_error="message"):
        _retrieve_if_orphaned(asyncio.current_task(), MPIComm.write)
        if self.closed():
            raise CommClosedError("mpi:// comm %s is closed" % self._local_addr)
        frames = await to_frames(
            msg, allow_offload=self.allow_offload, serializers=serializers,
            on_error=on_error,
            context={"sender": self.local_info, "recipient": self.remote_info,
                     **self.handshake_options},
        )
        sizes = [nbytes(f) for f in frames]
        if self.closed():
            raise CommClosedError("mpi:// comm %s is closed" % self._local_addr)
        sent = self.loop.create_future()
        self.engine.ensure_poll()
        self.engine.send_message(self, DATA, frames, sizes,
                                 lambda: _call_in(self.loop, _wake, sent))
        self.engine.step()  # small sends complete at once: no wait for the progress thread
        await sent
        return sum(sizes)

    async def close(self):
        self.abort()

    def abort(self):
        if self._closed:
            return
        self._closed = True
        self._send_close()
        if self._waiter is not None:
            _wake(self._waiter)

    def closed(self):
        return self._closed or (self._peer_closed and not self._inbox)


class MPIConnector(Connector):
    async def connect(self, address, deserialize=True, **connection_args):
        eng = engine()
        rank, ident = _parse(address)
        if rank is None or ident is None:
            raise ValueError("hpml.dask: cannot connect to %r: needs mpi://RANK/ID"
                             % (PREFIX + address))
        if rank >= eng.size:
            raise ValueError("hpml.dask: cannot connect to %r: the job has %d ranks"
                             % (PREFIX + address, eng.size))
        loop = asyncio.get_running_loop()
        eng.ensure_poll()
        tag = eng.new_tag()
        fut = loop.create_future()
        eng.connecting[tag] = (fut, loop)
        eng.send_ctrl(rank, CONNECT, ident, tag)
        try:
            peer_tag = await fut
        finally:
            eng.connecting.pop(tag, None)
        if peer_tag is None:
            raise OSError("hpml.dask: nothing listens on %s%s" % (PREFIX, address))
        return MPIComm(eng, rank, peer_tag, tag, loop, "%s%d/c%d" % (PREFIX, eng.rank, tag),
                       PREFIX + address, deserialize)


class MPIListener(Listener):
    prefix = PREFIX

    def __init__(self, loc, handle_comm, deserialize=True, allow_offload=True,
                 **connection_args):
        rank, ident = _parse(loc)
        self._rank, self._id = rank, ident
        self.comm_handler = handle_comm
        self.deserialize = deserialize
        self.allow_offload = allow_offload
        self.loop = None
        self.eng = None

    async def start(self):
        eng = engine()
        if self._rank is not None and self._rank != eng.rank:
            raise ValueError("hpml.dask: rank %d cannot listen on %s%d/…: an mpi:// "
                             "address names the rank it is on" % (eng.rank, PREFIX, self._rank))
        self.loop = asyncio.get_running_loop()
        with eng.lock:
            if self._id is None:
                self._id = next(eng._listener_ids)
                while self._id in eng.listeners:
                    self._id = next(eng._listener_ids)
            elif self._id in eng.listeners:
                raise OSError("hpml.dask: %s%d/%d is already in use"
                              % (PREFIX, eng.rank, self._id))
            self._rank = eng.rank
            eng.listeners[self._id] = self
        self.eng = eng
        eng.ensure_poll()

    def stop(self):
        if self.eng is not None and self.eng.listeners.get(self._id) is self:
            del self.eng.listeners[self._id]

    def accept(self, comm):
        comm.allow_offload = self.allow_offload
        self.loop.create_task(self._accept(comm))

    async def _accept(self, comm):
        try:
            await self.on_connection(comm)
        except CommClosedError:
            logger.debug("hpml.dask: mpi:// connection closed before its handshake")
            return
        if self.comm_handler is not None:
            r = self.comm_handler(comm)
            if inspect.isawaitable(r):
                await r

    @property
    def listen_address(self):
        return "%s%d/%d" % (PREFIX, self._rank, self._id)

    @property
    def contact_address(self):
        return self.listen_address


class MPIBackend(Backend):
    """Backend for `mpi://` (the `distributed.comm.backends` entry point `mpi`)."""

    def get_connector(self):
        return MPIConnector()

    def get_listener(self, loc, handle_comm, deserialize, **connection_args):
        return MPIListener(loc, handle_comm, deserialize, **connection_args)

    def get_address_host(self, loc):
        rank, _ = _parse(loc)
        eng = engine()
        if rank is None:
            rank = eng.rank
        if rank >= eng.size:
            raise ValueError("hpml.dask: %s%s: the job has %d ranks" % (PREFIX, loc, eng.size))
        return eng.hosts[rank]

    def resolve_address(self, loc):
        rank, ident = _parse(loc)
        if rank is None:
            return loc
        return "%d/%d" % (rank, ident) if ident is not None else str(rank)

    def get_local_address_for(self, loc):
        return str(engine().rank)


def register():
    """Make `mpi://` usable by name in this process (done on import; the entry point
    finds the installed package without it)."""
    registry.backends.setdefault("mpi", MPIBackend())


register()
