"""hpml.Comm: hpml's collectives on any contiguous buffer-protocol object (NumPy arrays,
bytearray, memoryview), over an mpi4py communicator. No copies: libhpml reads and writes
the caller's memory through the buffer protocol.
"""

import atexit
import sys
import weakref

import numpy as np
from mpi4py import MPI

from . import _lib, errors
from ._lib import check, ffi, lib, mpi_comm, raise_error

_fast = _lib.fast

# hpml_dtype_t, hpml_op_t, hpml_coll_t (include/hpml/core.h, comm.h).
F32, F64, F16, BF16, I8, U8, I32, I64 = range(8)
DTYPE_NAMES = ("f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64")
DTYPE_SIZE = (4, 8, 2, 2, 1, 1, 4, 8)
# The NumPy dtype that holds each hpml dtype (bf16 has none: its bits go in uint16).
NUMPY_DTYPE = (np.float32, np.float64, np.float16, np.uint16, np.int8, np.uint8, np.int32,
               np.int64)

# Buffer-protocol format characters (native byte order) -> hpml dtype. uint16 ('H') is
# missing on purpose: it holds f16 or bf16 bits only when the caller says which.
_FORMAT = {"f": F32, "d": F64, "e": F16, "b": I8, "B": U8, "i": I32, "l": I64, "q": I64}
# Formats that may hold each dtype when dtype= names it; bytes ('B', 'c') hold anything.
_HOLDS = {
    F32: "f", F64: "d", F16: "eH", BF16: "H", I8: "b", U8: "B", I32: "i", I64: "lq",
}
_DTYPE_BY_NAME = {}
for _i, _n in enumerate(DTYPE_NAMES):
    _DTYPE_BY_NAME[_n] = _i
_DTYPE_BY_NAME.update(
    float32=F32, float=F32, float64=F64, double=F64, float16=F16, half=F16, bfloat16=BF16,
    int8=I8, uint8=U8, char=I8, int32=I32, int=I32, int64=I64,
)

SUM, PROD, MIN, MAX, AVG = range(5)
OP_NAMES = ("sum", "prod", "min", "max", "avg")
_OP_BY_NAME = {n: i for i, n in enumerate(OP_NAMES)}
_MPI_OPS = ((MPI.SUM, SUM), (MPI.PROD, PROD), (MPI.MIN, MIN), (MPI.MAX, MAX))

ALLREDUCE, BCAST, REDUCE, ALLGATHER, REDUCE_SCATTER = range(5)
_COLL_NAMES = ("allreduce", "bcast", "reduce", "allgather", "reduce_scatter")


def _algo_table(coll):
    algos = ffi.new("const int **")
    n = ffi.new("size_t *")
    check(lib.hpml_algo_list(coll, algos, n))
    table = {"auto": 0}
    for i in range(n[0]):
        a = algos[0][i]
        table[ffi.string(lib.hpml_algo_name(a)).decode()] = a
    return table


ALGOS = {name: _algo_table(c) for c, name in enumerate(_COLL_NAMES)}


# mpi4py's own marker, so MPI.IN_PLACE and hpml.IN_PLACE are the same thing.
IN_PLACE = MPI.IN_PLACE
_IN_PLACE_C = ffi.cast("const void *", 1)

_from_buffer = ffi.from_buffer
_NULL = ffi.NULL


def _op(op):
    code = _OP_BY_NAME.get(op) if isinstance(op, str) else None
    if code is None:
        for mop, c in _MPI_OPS:
            if op == mop:
                return c
        raise errors.ArgumentError(
            "hpml: unknown op %r (one of %s, or MPI.SUM/PROD/MIN/MAX)" % (op, ", ".join(OP_NAMES))
        )
    return code


def _algo(coll, algo):
    code = ALGOS[_COLL_NAMES[coll]].get(algo)
    if code is None:
        raise errors.ArgumentError(
            "hpml: %s has no algorithm %r (one of %s)"
            % (_COLL_NAMES[coll], algo, ", ".join(ALGOS[_COLL_NAMES[coll]]))
        )
    return code


def dtype_code(dtype):
    """hpml dtype code for a name ("f32", "bf16", "float32", ...) or a NumPy dtype."""
    if isinstance(dtype, int) and 0 <= dtype < len(DTYPE_NAMES):
        return dtype
    key = dtype if isinstance(dtype, str) else None
    if key is None:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = repr(dtype)
    code = _DTYPE_BY_NAME.get(key)
    if code is None:
        raise errors.DtypeError(
            "hpml: unsupported dtype %r: hpml has %s (bf16 as uint16 arrays with dtype='bf16')"
            % (dtype, " ".join(DTYPE_NAMES))
        )
    return code


def _not_a_buffer(obj, name):
    """Raise the error for an object that does not export a CPU buffer."""
    if hasattr(obj, "__cuda_array_interface__"):
        raise errors.DtypeError(
            "hpml: %s is device (CUDA) memory (__cuda_array_interface__): hpml is CPU-only, "
            "copy it to host memory first" % name
        )
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        kind = dev()[0]
        if kind != 1:  # kDLCPU
            raise errors.DtypeError(
                "hpml: %s is DLPack device memory (device type %d): hpml is CPU-only, copy it "
                "to host memory first" % (name, kind)
            )
        return None
    raise errors.DtypeError(
        "hpml: %s (%s) does not support the buffer protocol" % (name, type(obj).__name__)
    )


def _view(obj, name):
    if obj is IN_PLACE:
        raise errors.ArgumentError("hpml: %s cannot be IN_PLACE here" % name)
    try:
        return memoryview(obj)
    except TypeError:
        if _not_a_buffer(obj, name) is None:  # a CPU DLPack object: view it through NumPy
            return memoryview(np.from_dlpack(obj))
        raise


def _bad_format(m, name, dtype):
    fmt = m.format
    if dtype is None and fmt == "H":
        raise errors.DtypeError(
            "hpml: %s holds 16-bit integers: pass dtype='bf16' or dtype='f16' to say which "
            "format its bits are" % name
        )
    if fmt[:1] in "<>!=" and fmt[1:] in _FORMAT:
        raise errors.DtypeError(
            "hpml: %s has element format %r: hpml needs the machine's own byte order "
            "(numpy: x.astype(x.dtype.newbyteorder('=')))" % (name, fmt)
        )
    if dtype is None:
        raise errors.DtypeError(
            "hpml: %s has element format %r, which is not an hpml dtype (%s)"
            % (name, fmt, " ".join(DTYPE_NAMES))
        )
    raise errors.DtypeError(
        "hpml: %s has element format %r (%d bytes), which cannot hold %s"
        % (name, fmt, m.itemsize, DTYPE_NAMES[dtype])
    )


def _buffer(obj, name, writable, dtype):
    """(memoryview, hpml dtype, element count) of a buffer argument, checked."""
    m = _view(obj, name)
    if not m.c_contiguous:
        raise errors.BufferError(
            "hpml: %s is not C-contiguous (strides %s): pass a contiguous copy, e.g. "
            "numpy.ascontiguousarray" % (name, m.strides)
        )
    if writable and m.readonly:
        raise errors.BufferError("hpml: %s is read-only, and hpml must write into it" % name)
    fmt = m.format
    if dtype is None:
        dt = _FORMAT.get(fmt)
        if dt is None or m.itemsize != DTYPE_SIZE[dt]:
            _bad_format(m, name, None)
    else:
        dt = dtype
        if fmt not in _HOLDS[dt] and fmt not in ("B", "c"):
            _bad_format(m, name, dt)
        if fmt not in ("B", "c") and m.itemsize != DTYPE_SIZE[dt]:
            _bad_format(m, name, dt)
    n = m.nbytes
    size = DTYPE_SIZE[dt]
    if n % size:
        raise errors.ArgumentError(
            "hpml: %s holds %d bytes, not a whole number of %s elements"
            % (name, n, DTYPE_NAMES[dt])
        )
    return m, dt, n // size


def _like(obj, m, count_elems, dt, shape=None):
    """A new output buffer for count_elems elements of dt, of obj's kind."""
    if isinstance(obj, bytearray):
        return bytearray(count_elems * DTYPE_SIZE[dt])
    if isinstance(obj, np.ndarray) and shape is not None:
        return np.empty(shape, dtype=obj.dtype)
    if isinstance(obj, np.ndarray):
        return np.empty(count_elems, dtype=obj.dtype)
    if m.format in _FORMAT or m.format in ("H", "h"):
        return np.empty(count_elems, dtype=np.dtype(m.format))
    return np.empty(count_elems, dtype=NUMPY_DTYPE[dt])


def _mismatch(what, name_a, n_a, name_b, n_b, dt):
    raise errors.ArgumentError(
        "hpml: %s: %s holds %d %s elements, %s needs %d"
        % (what, name_a, n_a, DTYPE_NAMES[dt], name_b, n_b)
    )


def _reduction_args(sendbuf, recvbuf, dtype, what):
    """(send pointer, recv pointer, count, dtype, recvbuf, what to keep alive) of an
    allreduce-shaped call, checked; recvbuf None allocates one like sendbuf."""
    if sendbuf is IN_PLACE:
        if recvbuf is None:
            raise errors.ArgumentError("hpml: %s: IN_PLACE needs a recvbuf" % what)
        rm, dt, n = _buffer(recvbuf, "recvbuf", True, dtype)
        rp = _from_buffer(rm)
        return _IN_PLACE_C, rp, n, dt, recvbuf, (recvbuf, rp)
    sm, dt, n = _buffer(sendbuf, "sendbuf", False, dtype)
    if recvbuf is None:
        recvbuf = _like(sendbuf, sm, n, dt, getattr(sendbuf, "shape", None))
    rm, _, rn = _buffer(recvbuf, "recvbuf", True, dt)
    if rn != n:
        _mismatch(what, "recvbuf", rn, "sendbuf's", n, dt)
    sp, rp = _from_buffer(sm), _from_buffer(rm)
    return sp, rp, n, dt, recvbuf, (sendbuf, recvbuf, sp, rp)


class Request:
    """A nonblocking operation. The buffers stay referenced (and exported, so a bytearray
    cannot be resized) until wait() returns or test() reports completion."""

    __slots__ = ("_req", "_keep", "_comm", "result", "__weakref__")

    def __init__(self, req, keep, comm, result):
        self._req = req
        self._keep = keep
        self._comm = comm
        self.result = result  # the buffer that holds the result once complete

    @property
    def done(self):
        return self._req is None

    def wait(self):
        """Wait for completion; raises hpml.Error if the operation failed."""
        req = self._req
        if req is None:
            return
        self._req = None
        rc = lib.hpml_wait(req)
        self._keep = None
        if rc != 0:
            raise_error(rc, "wait")

    def test(self):
        """True once the operation has completed (then it is finished and freed)."""
        req = self._req
        if req is None:
            return True
        done = ffi.new("int *")
        rc = lib.hpml_test(req, done)
        if rc != 0:
            self._req = None
            self._keep = None
            raise_error(rc, "test")
        if done[0]:
            self._req = None
            self._keep = None
            return True
        return False

    def __del__(self):
        # Dropped before completion: the communicator waits for it when it is freed, so
        # the buffers it uses must outlive it until then.
        if self._req is not None and self._comm is not None:
            self._comm._orphans.append((self._req, self._keep))


class Prepared:
    """A collective bound to its buffers by Comm.allreduce_init / bcast_init: each call
    runs it once, blocking, on every rank (collective). hpml._fast.Bound is its compiled
    form, returned instead when hpml._fast is built."""

    __slots__ = ("_fn", "_args", "_keep", "_comm", "_what", "result")

    def __init__(self, fn, args, keep, comm, what, result):
        self._fn, self._args, self._keep, self._comm, self._what = fn, args, keep, comm, what
        self.result = result  # the buffer the result goes to

    def __call__(self):
        if self._comm._c is None:
            raise errors.MPIError("hpml: this Comm was freed")
        rc = self._fn(*self._args)
        if rc:
            raise_error(rc, self._what)


_live = []  # weak references to every Comm not yet freed, in creation order
_uncaught = []  # set when the program ends with an uncaught exception
_excepthook = sys.excepthook


def _note_uncaught(*exc):
    _uncaught.append(True)
    _excepthook(*exc)


sys.excepthook = _note_uncaught


@atexit.register
def _free_all():
    # Every rank created its communicators in the same order, so freeing them in that
    # order (collective) matches across ranks; before mpi4py finalises MPI. Not after an
    # uncaught exception: the other ranks may never come, and a leak at exit is harmless.
    if _uncaught:
        return
    for ref in list(_live):
        c = ref()
        if c is not None:
            c.free()


class Comm(_fast.CommBase if _fast is not None else object):
    """hpml's communicator over an mpi4py communicator (default MPI.COMM_WORLD).

    Creating one is collective (hpml duplicates the communicator, finds the node's ranks
    and reads every HPML_* setting). Free it with free() (collective) or a `with` block;
    those not freed are freed at exit. Every method that communicates is collective
    over the communicator and all ranks must call it with matching arguments.
    """

    def __init__(self, comm=None):
        if comm is None:
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Comm):
            raise errors.ArgumentError(
                "hpml: Comm() takes an mpi4py communicator, not %s" % type(comm).__name__
            )
        if comm == MPI.COMM_NULL:
            raise errors.ArgumentError("hpml: Comm(): the communicator is MPI.COMM_NULL")
        if comm.Is_inter():
            raise errors.ArgumentError(
                "hpml: Comm(): an intercommunicator; hpml needs an intracommunicator "
                "(Intercomm.Merge gives one)"
            )
        out = ffi.new("hpml_comm_t **")
        check(lib.hpml_comm_create(mpi_comm(comm), _NULL, out), "Comm")
        self._c = out[0]
        self.mpi = comm
        self._orphans = []
        self.rank = lib.hpml_comm_rank(self._c)
        self.size = lib.hpml_comm_size(self._c)
        self.nodes = lib.hpml_comm_nodes(self._c)
        self.node = lib.hpml_comm_node(self._c)
        self.local_rank = lib.hpml_comm_local_rank(self._c)
        self.local_size = lib.hpml_comm_local_size(self._c)
        self._shared = {}
        if _fast is not None:
            self._set_c(_lib.address(self._c), self.size)
        _live.append(weakref.ref(self))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def free(self):
        """Collective: wait for outstanding nonblocking operations, free everything."""
        c = self._c
        if c is None:
            return
        if _fast is not None:
            self._set_c(0, 0)
        if MPI.Is_finalized():  # nothing can be freed collectively any more
            self._c = None
            return
        for req, _keep in self._orphans:
            lib.hpml_wait(req)
        self._orphans = []
        self._shared.clear()
        self._c = None
        lib.hpml_comm_destroy(c)
        for ref in list(_live):
            if ref() is self or ref() is None:
                _live.remove(ref)

    def _handle(self):
        if self._c is None:
            raise errors.MPIError("hpml: this Comm was freed")
        return self._c

    def __repr__(self):
        state = "freed" if self._c is None else "rank %d of %d" % (self.rank, self.size)
        return "<hpml.Comm %s>" % state

    # ---- collectives -------------------------------------------------------------

    def barrier(self):
        check(lib.hpml_barrier(self._handle()), "barrier")

    # allreduce and bcast: hpml._fast (compiled, the base class) takes plain buffers and
    # hands everything else, arguments unchanged, to these checked versions; without it
    # (not built) they are Comm.allreduce and Comm.bcast themselves (end of this file).

    def _allreduce_checked(self, sendbuf, recvbuf=None, op="sum", algo="auto", dtype=None):
        """Reduce sendbuf over the ranks into recvbuf on every rank and return recvbuf.
        sendbuf=hpml.IN_PLACE reduces recvbuf in place; recvbuf=None allocates one like
        sendbuf. op: sum prod min max avg (or MPI.SUM...), algo: auto or an algorithm of
        hpml.ALGOS['allreduce'], dtype: overrides the buffers' element type (needed for
        bf16/f16 bits in uint16 arrays)."""
        c = self._handle()
        opc, a = _op(op), _algo(ALLREDUCE, algo)
        if dtype is not None:
            dtype = dtype_code(dtype)
        sp, rp, n, dt, recvbuf, _ = _reduction_args(sendbuf, recvbuf, dtype, "allreduce")
        rc = lib.hpml_allreduce_algo(a, sp, rp, n, dt, opc, c)
        if rc:
            raise_error(rc, "allreduce")
        return recvbuf

    def _bcast_checked(self, buf, root=0, algo="auto", dtype=None):
        """Broadcast root's buf into buf on every rank (in place); returns buf."""
        self.bcast_init(buf, root, algo, dtype)()
        return buf

    def reduce(self, sendbuf, recvbuf=None, op="sum", root=0, algo="auto", dtype=None):
        """Reduce sendbuf over the ranks into recvbuf at root. Returns recvbuf at root
        (allocated when None), None elsewhere. sendbuf=IN_PLACE: every rank's input is in
        its recvbuf, replaced by the result at root."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        opc = _op(op)
        a = _algo(REDUCE, algo)
        self._check_root(root, "reduce")
        at_root = self.rank == root
        if sendbuf is IN_PLACE:
            if recvbuf is None:
                raise errors.ArgumentError("hpml: reduce: IN_PLACE needs a recvbuf")
            rm, dt, n = _buffer(recvbuf, "recvbuf", at_root, dtype)
            rc = lib.hpml_reduce_algo(a, _IN_PLACE_C, _from_buffer(rm), n, dt, opc, root, c)
            if rc:
                raise_error(rc, "reduce")
            return recvbuf if at_root else None
        sm, dt, n = _buffer(sendbuf, "sendbuf", False, dtype)
        rp = _NULL
        if at_root:
            if recvbuf is None:
                recvbuf = _like(sendbuf, sm, n, dt, getattr(sendbuf, "shape", None))
            rm, _, rn = _buffer(recvbuf, "recvbuf", True, dt)
            if rn != n:
                _mismatch("reduce", "recvbuf", rn, "sendbuf's", n, dt)
            rp = _from_buffer(rm)
        rc = lib.hpml_reduce_algo(a, _from_buffer(sm), rp, n, dt, opc, root, c)
        if rc:
            raise_error(rc, "reduce")
        return recvbuf if at_root else None

    def allgather(self, sendbuf, recvbuf=None, algo="auto", dtype=None):
        """Gather every rank's sendbuf into recvbuf (size blocks in rank order) and return
        it; recvbuf=None allocates one (a NumPy sendbuf of shape s gives (size,) + s).
        sendbuf=IN_PLACE: this rank's block is already in recvbuf."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        a = _algo(ALLGATHER, algo)
        p = self.size
        if sendbuf is IN_PLACE:
            rm, dt, blk = self._blocks_in_place(recvbuf, dtype, "allgather")
            check(lib.hpml_allgather_algo(a, _IN_PLACE_C, _from_buffer(rm), blk, dt, c),
                  "allgather")
            return recvbuf
        sm, dt, n = _buffer(sendbuf, "sendbuf", False, dtype)
        if recvbuf is None:
            shape = getattr(sendbuf, "shape", None)
            recvbuf = _like(sendbuf, sm, n * p, dt, None if shape is None else (p,) + shape)
        rm, _, rn = _buffer(recvbuf, "recvbuf", True, dt)
        if rn != n * p:
            _mismatch("allgather", "recvbuf", rn, "size x sendbuf's", n * p, dt)
        check(lib.hpml_allgather_algo(a, _from_buffer(sm), _from_buffer(rm), n, dt, c),
              "allgather")
        return recvbuf

    def reduce_scatter(self, sendbuf, recvbuf=None, op="sum", algo="auto", dtype=None):
        """Reduce sendbuf (size blocks of equal length) over the ranks and leave block
        `rank` of the result in recvbuf; returns recvbuf (allocated when None: a NumPy
        sendbuf of shape (size,) + s gives shape s). sendbuf=IN_PLACE: the input is
        recvbuf, whose first block receives the result."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        opc = _op(op)
        a = _algo(REDUCE_SCATTER, algo)
        p = self.size
        if sendbuf is IN_PLACE:
            rm, dt, blk = self._blocks_in_place(recvbuf, dtype, "reduce_scatter")
            check(lib.hpml_reduce_scatter_algo(a, _IN_PLACE_C, _from_buffer(rm), blk, dt, opc,
                                               c), "reduce_scatter")
            return recvbuf
        sm, dt, n = _buffer(sendbuf, "sendbuf", False, dtype)
        if n % p:
            raise errors.ArgumentError(
                "hpml: reduce_scatter: sendbuf holds %d elements, not a multiple of %d ranks"
                % (n, p)
            )
        if recvbuf is None:
            shape = getattr(sendbuf, "shape", None)
            recvbuf = _like(sendbuf, sm, n // p, dt,
                            shape[1:] if shape and shape[0] == p else None)
        rm, _, rn = _buffer(recvbuf, "recvbuf", True, dt)
        if rn != n // p:
            _mismatch("reduce_scatter", "recvbuf", rn, "sendbuf's block", n // p, dt)
        check(lib.hpml_reduce_scatter_algo(a, _from_buffer(sm), _from_buffer(rm), n // p, dt,
                                           opc, c), "reduce_scatter")
        return recvbuf

    def alltoallv(self, sendbuf, scounts, recvbuf, rcounts, sdispls=None, rdispls=None,
                  dtype=None):
        """Send scounts[q] elements at sdispls[q] of sendbuf to rank q and receive rank q's
        rcounts[q] elements at rdispls[q] of recvbuf (displacements in elements; None:
        blocks packed in rank order). What p sends to q must be what q expects from p.
        Returns recvbuf."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        sm, dt, sn = _buffer(sendbuf, "sendbuf", False, dtype)
        rm, _, rn = _buffer(recvbuf, "recvbuf", True, dt)
        arrays = []
        for name, counts, displs, total in (
            ("send", scounts, sdispls, sn),
            ("recv", rcounts, rdispls, rn),
        ):
            counts = self._counts(counts, name + "counts")
            if displs is None:
                displs = [sum(counts[:q]) for q in range(self.size)]
            else:
                displs = self._counts(displs, name + "displs")
            for q in range(self.size):
                if counts[q] and counts[q] + displs[q] > total:
                    raise errors.ArgumentError(
                        "hpml: alltoallv: %s block %d (%d elements at %d) ends past the "
                        "%d elements of %sbuf" % (name, q, counts[q], displs[q], total, name)
                    )
            arrays.append((ffi.new("size_t[]", counts), ffi.new("size_t[]", displs)))
        (sc, sd), (rc_, rd) = arrays
        check(lib.hpml_alltoallv(_from_buffer(sm), sc, sd, _from_buffer(rm), rc_, rd, dt, c),
              "alltoallv")
        return recvbuf

    def _counts(self, values, name):
        try:
            values = [int(v) for v in values]
        except (TypeError, ValueError):
            raise errors.ArgumentError("hpml: alltoallv: %s must be integers" % name) from None
        if len(values) != self.size:
            raise errors.ArgumentError(
                "hpml: alltoallv: %s has %d entries, the communicator %d ranks"
                % (name, len(values), self.size)
            )
        if min(values) < 0:
            raise errors.ArgumentError("hpml: alltoallv: %s has a negative entry" % name)
        return values

    def _blocks_in_place(self, recvbuf, dtype, what):
        """(view, dtype, block count) of an in-place recvbuf holding size equal blocks."""
        if recvbuf is None:
            raise errors.ArgumentError("hpml: %s: IN_PLACE needs a recvbuf" % what)
        rm, dt, rn = _buffer(recvbuf, "recvbuf", True, dtype)
        if rn % self.size:
            raise errors.ArgumentError(
                "hpml: %s: recvbuf holds %d elements, not a multiple of %d ranks"
                % (what, rn, self.size)
            )
        return rm, dt, rn // self.size

    def _check_root(self, root, what):
        if not isinstance(root, int) or not 0 <= root < self.size:
            raise errors.ArgumentError(
                "hpml: %s: root %r outside [0, %d)" % (what, root, self.size)
            )

    # ---- prepared (bound) collectives ------------------------------------------------

    def allreduce_init(self, sendbuf, recvbuf=None, op="sum", algo="auto", dtype=None):
        """An allreduce bound to its buffers, checked once: calling the result runs it
        (blocking) with no per-call argument handling, for a loop that reduces the same
        buffers again and again (gradients). The buffers stay referenced and exported
        while it lives. sendbuf may be IN_PLACE; recvbuf=None allocates one (it is then
        the result's `result`)."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        opc, a = _op(op), _algo(ALLREDUCE, algo)
        sp, rp, n, dt, recvbuf, keep = _reduction_args(sendbuf, recvbuf, dtype, "allreduce")
        if _fast is not None:
            return _fast.bound(self, 0, a, _lib.address(sp), _lib.address(rp), n, dt, opc, 0,
                               keep, recvbuf, "allreduce")
        return Prepared(lib.hpml_allreduce_algo, (a, sp, rp, n, dt, opc, c), keep, self,
                        "allreduce", recvbuf)

    def bcast_init(self, buf, root=0, algo="auto", dtype=None):
        """A broadcast bound to its buffer (see allreduce_init)."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        a = _algo(BCAST, algo)
        self._check_root(root, "bcast")
        m, dt, n = _buffer(buf, "buf", True, dtype)
        p = _from_buffer(m)
        if _fast is not None:
            return _fast.bound(self, 1, a, 0, _lib.address(p), n, dt, 0, root, (buf, p), buf,
                               "bcast")
        return Prepared(lib.hpml_bcast_algo, (a, p, n, dt, root, c), (buf, p), self, "bcast",
                        buf)

    # ---- nonblocking -------------------------------------------------------------

    def iallreduce(self, sendbuf, recvbuf=None, op="sum", dtype=None):
        """Start an allreduce; returns a Request whose wait()/test() completes it and
        whose `result` is recvbuf (allocated when None). Operations complete in
        submission order; every rank submits the same ones in the same order."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        opc = _op(op)
        out = ffi.new("hpml_request_t **")
        sp, rp, n, dt, recvbuf, keep = _reduction_args(sendbuf, recvbuf, dtype, "iallreduce")
        rc = lib.hpml_iallreduce(sp, rp, n, dt, opc, c, out)
        if rc:
            raise_error(rc, "iallreduce")
        return Request(out[0], keep, self, recvbuf)

    def ibcast(self, buf, root=0, dtype=None):
        """Start a broadcast of root's buf; returns a Request."""
        c = self._handle()
        if dtype is not None:
            dtype = dtype_code(dtype)
        self._check_root(root, "ibcast")
        m, dt, n = _buffer(buf, "buf", True, dtype)
        p = _from_buffer(m)
        out = ffi.new("hpml_request_t **")
        check(lib.hpml_ibcast(p, n, dt, root, c, out), "ibcast")
        return Request(out[0], (buf, p), self, buf)

    # ---- registered memory -------------------------------------------------------

    def alloc_shared(self, shape, dtype="f32"):
        """A zero-filled NumPy array in the node's registered memory (collective: every
        rank asks for the same shape and dtype). An allreduce whose input lives there
        skips the copy into shared memory. The memory is valid until free_shared(array)
        or free() (both collective); bf16 arrays are uint16."""
        c = self._handle()
        dt = dtype_code(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise errors.ArgumentError("hpml: alloc_shared: negative dimension in %r" % (shape,))
        count = 1
        for s in shape:
            count *= s
        nbytes = count * DTYPE_SIZE[dt]
        p = lib.hpml_comm_alloc_shared(c, nbytes)
        if p == _NULL:
            detail = ffi.string(lib.hpml_last_error()).decode(errors="replace")
            raise errors.OutOfMemory(
                "hpml: alloc_shared: could not allocate %d bytes of registered memory%s"
                % (nbytes, ": " + detail if detail else "")
            )
        # (hpml gives even 0 bytes a cache line of its own, so one element always fits.)
        arr = np.frombuffer(ffi.buffer(p, max(nbytes, DTYPE_SIZE[dt])), dtype=NUMPY_DTYPE[dt])
        arr = arr[:count].reshape(shape)
        arr[...] = 0
        self._shared[arr.__array_interface__["data"][0]] = p
        return arr

    def free_shared(self, array):
        """Collective: free an array from alloc_shared (do not use it afterwards)."""
        c = self._handle()
        addr = array.__array_interface__["data"][0] if isinstance(array, np.ndarray) else None
        p = self._shared.pop(addr, None)
        if p is None:
            raise errors.ArgumentError("hpml: free_shared: not an array from alloc_shared")
        lib.hpml_comm_free_shared(c, p)

    # ---- introspection -------------------------------------------------------------

    def algorithm(self, coll, nbytes):
        """The algorithm the selection table picks for `coll` with `nbytes` of payload."""
        try:
            k = _COLL_NAMES.index(coll)
        except ValueError:
            raise errors.ArgumentError(
                "hpml: unknown collective %r (one of %s)" % (coll, ", ".join(_COLL_NAMES))
            ) from None
        algo = lib.hpml_algo_selected(self._handle(), k, nbytes)
        return ffi.string(lib.hpml_algo_name(algo)).decode()

# TypeErrors for bad arguments name the public method.
Comm._allreduce_checked.__qualname__ = "Comm.allreduce"
Comm._bcast_checked.__qualname__ = "Comm.bcast"
if _fast is None:
    Comm.allreduce = Comm._allreduce_checked
    Comm.bcast = Comm._bcast_checked
else:
    _fast.setup(_lib.address(lib.hpml_allreduce_algo), _lib.address(lib.hpml_bcast_algo),
                IN_PLACE, _OP_BY_NAME, _DTYPE_BY_NAME, ALGOS["allreduce"], ALGOS["bcast"],
                Comm._allreduce_checked, Comm._bcast_checked, raise_error)
