"""OMB-Py-compatible micro-benchmarks: `mpirun -np N python3 -m hpml.bench <benchmark>`.

OMB-Py's benchmark names (osu_allreduce and collective/osu_allreduce also work), options
(--buffer, --pickle, --min, --max, --iterations, --skip) and output (its two header
lines, then size and average latency or bandwidth), plus hpml's additions: --impl
mpi4py|hpml|hpml:<algorithm>|all side by side, -c validation, -f min/max/iterations,
-z percentiles, -T element type, and --csv/--json in the schema of `hpml bench`.
One harness; each benchmark is a small case (a Case filled with its functions).
See docs/python.md.
"""

import argparse
import json
import platform
import sys
import time

import numpy as np
from mpi4py import MPI

from . import bench_ml
from . import comm as hc
from . import errors

LARGE = 8192  # OMB: sizes above this use fewer iterations

# ---- data and types ---------------------------------------------------------------------


def _bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x):
    """Round to nearest even, NaN kept quiet (as hpml's kernels do)."""
    b = np.asarray(x, np.float32).view(np.uint32)
    nan = np.isnan(np.asarray(x, np.float32))
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((b >> 16) | 0x0040).astype(np.uint16), r)


def _sum_f16(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, np.float16)
    b = np.frombuffer(inoutbuf, np.float16)
    b += a


def _sum_bf16(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, np.uint16)
    b = np.frombuffer(inoutbuf, np.uint16)
    b[:] = _f32_to_bf16(_bf16_to_f32(a) + _bf16_to_f32(b))


# i8 goes to MPI as the C bench passes it (src/bench/data.c) for OMB's mpi_char: MPI_CHAR
# where C's char is signed (the x86 ABIs), MPI_SIGNED_CHAR where it is unsigned (Arm,
# POWER, s390x, RISC-V), so the two benchmarks reduce the same MPI datatype. (OMB-Py has
# no char type: its reductions are MPI.FLOAT.)
_CHAR_SIGNED = platform.machine().lower() in ("x86_64", "amd64", "i386", "i486", "i586",
                                              "i686", "x86")
_I8_TYPE = (MPI.CHAR, "MPI.CHAR") if _CHAR_SIGNED else (MPI.SIGNED_CHAR, "MPI.SIGNED_CHAR")

# hpml dtype -> (mpi4py datatype, its label). MPI has no fp16/bf16: they travel as 16-bit
# words and reduce with a user op (what an mpi4py program would have to write).
_MPI_TYPES = {
    hc.F32: (MPI.FLOAT, "MPI.FLOAT"), hc.F64: (MPI.DOUBLE, "MPI.DOUBLE"),
    hc.F16: (MPI.UINT16_T, "MPI.UINT16_T"), hc.BF16: (MPI.UINT16_T, "MPI.UINT16_T"),
    hc.I8: _I8_TYPE, hc.U8: (MPI.UNSIGNED_CHAR, "MPI.UNSIGNED_CHAR"),
    hc.I32: (MPI.INT, "MPI.INT"), hc.I64: (MPI.INT64_T, "MPI.INT64_T"),
}
_USER_SUM = {}


def _mpi_sum(dt):
    if dt == hc.F16 or dt == hc.BF16:
        if dt not in _USER_SUM:
            _USER_SUM[dt] = MPI.Op.Create(_sum_f16 if dt == hc.F16 else _sum_bf16, commute=True)
        return _USER_SUM[dt]
    return MPI.SUM


def value(rank, i):
    """Validation data of `rank` at element i: small non-negative integers, so sums over
    up to 15 ranks are exact in every dtype (bf16 included) and never wrap."""
    return (np.asarray(i) * 7 + rank * 3) % 9


def _encode(values, dt):
    if dt == hc.BF16:
        return _f32_to_bf16(values.astype(np.float32))
    return values.astype(hc.NUMPY_DTYPE[dt])


def _decode(arr, dt):
    return _bf16_to_f32(arr) if dt == hc.BF16 else arr.astype(np.float64)


# ---- the context each case works in ----------------------------------------------------


def time_coll(mpi, op, iters, skip):
    """The blocking loop of `hpml bench` (hpml_bench_time_blocking) in Python: a barrier
    on the mpi4py communicator, then per iteration MPI.Wtime, op(), MPI.Wtime, a barrier;
    this rank's `iters` timed iterations after `skip` untimed ones, in microseconds."""
    wt, bar = MPI.Wtime, mpi.Barrier
    t = np.empty(iters)
    bar()
    for i in range(skip + iters):
        t0 = wt()
        op()
        t1 = wt()
        if i >= skip:
            t[i - skip] = (t1 - t0) * 1e6
        bar()
    return t


class Ctx:
    """One (implementation, size) run: buffers as the chosen --buffer kind, with NumPy
    views of the same memory for filling and checking."""

    def __init__(self, bench, case, impl, size):
        self.mpi = bench.mpi
        self.hcomm = bench.hcomm
        self.p, self.rank = self.mpi.Get_size(), self.mpi.Get_rank()
        self.dt = bench.dt
        self.es = hc.DTYPE_SIZE[self.dt]
        self.mdt = _MPI_TYPES[self.dt][0]
        self.impl = impl
        self.algo = impl.split(":", 1)[1] if ":" in impl else "auto"
        self.pickle = bench.args.pickle
        self.bind = bench.args.bind
        self.size = size
        self.count = size // self.es
        self.root = 0
        scount, rcount = case.counts(self)
        self.sbuf, self.s = bench.alloc(scount, self.dt)
        self.rbuf, self.r = bench.alloc(rcount, self.dt)
        # What a user would write: NumPy arrays of a NumPy dtype carry it (dtype=None, the
        # allreduce's fast path); bytearrays and bf16 bits in uint16 need dtype=.
        numpy_typed = bench.args.buffer == "numpy" and self.dt != hc.BF16
        self.dtype_name = None if numpy_typed else hc.DTYPE_NAMES[self.dt]


class Case:
    """A benchmark: counts(ctx) -> (send, recv) elements; mpi4py(ctx)/hpml(ctx) -> the
    operation to time; fill(ctx) the inputs; expect(ctx) -> (result view, expected values)
    for validation. kind: coll, barrier, lat, bw; bus: nccl-tests' bus-bandwidth factor."""

    def __init__(self, name, title, kind="coll", counts=None, mpi4py=None, hpml=None,
                 fill=None, expect=None, reduction=False, total_mult=1, bus=lambda p: 1.0,
                 coll=None, ranks=None):
        self.name, self.title, self.kind = name, title, kind
        self.counts = counts or (lambda c: (0, 0))
        self.mpi4py, self.hpml = mpi4py, hpml
        self.fill, self.expect = fill, expect
        self.reduction = reduction
        self.total_mult = total_mult
        self.bus = bus
        self.coll = coll or name
        self.ranks = ranks


def _fill_own(c):
    """Rank r's send buffer holds value(r, i) (alltoall: block q is elements q*n ...)."""
    c.s[:] = _encode(value(c.rank, np.arange(len(c.s))), c.dt)


def _sum_of(c, idx):
    return sum(value(r, idx) for r in range(c.p)).astype(np.float64)


def _ring(p):
    return (p - 1) / p


# allreduce
def _allreduce_mpi(c):
    if c.pickle:
        return lambda: c.mpi.allreduce(c.sbuf, op=MPI.SUM)
    op = _mpi_sum(c.dt)
    s, r, m = [c.sbuf, c.count, c.mdt], [c.rbuf, c.count, c.mdt], c.mpi
    return lambda: m.Allreduce(s, r, op)


def _allreduce_hpml(c):
    if c.bind:
        return c.hcomm.allreduce_init(c.sbuf, c.rbuf, "sum", c.algo, c.dtype_name)
    f, s, r, a, dt = c.hcomm.allreduce, c.sbuf, c.rbuf, c.algo, c.dtype_name
    return lambda: f(s, r, "sum", a, dt)


def _allreduce_expect(c):
    return c.r, _sum_of(c, np.arange(c.count))


# bcast
def _bcast_fill(c):
    c.r[:] = _encode(value(c.rank, np.arange(len(c.r))), c.dt)


def _bcast_mpi(c):
    if c.pickle:
        return lambda: c.mpi.bcast(c.rbuf, root=c.root)
    b, m, root = [c.rbuf, c.count, c.mdt], c.mpi, c.root
    return lambda: m.Bcast(b, root)


def _bcast_hpml(c):
    if c.bind:
        return c.hcomm.bcast_init(c.rbuf, c.root, c.algo, c.dtype_name)
    f, b, root, a, dt = c.hcomm.bcast, c.rbuf, c.root, c.algo, c.dtype_name
    return lambda: f(b, root, a, dt)


def _bcast_expect(c):
    return c.r, value(c.root, np.arange(c.count)).astype(np.float64)


# reduce
def _reduce_mpi(c):
    if c.pickle:
        return lambda: c.mpi.reduce(c.sbuf, op=MPI.SUM, root=c.root)
    op = _mpi_sum(c.dt)
    s, r, m, root = [c.sbuf, c.count, c.mdt], [c.rbuf, c.count, c.mdt], c.mpi, c.root
    return lambda: m.Reduce(s, r, op, root)


def _reduce_hpml(c):
    f, s, r, root, a, dt = c.hcomm.reduce, c.sbuf, c.rbuf, c.root, c.algo, c.dtype_name
    return lambda: f(s, r, "sum", root, a, dt)


def _reduce_expect(c):
    if c.rank != c.root:
        return None
    return c.r, _sum_of(c, np.arange(c.count))


# allgather (size: each rank's block)
def _allgather_mpi(c):
    if c.pickle:
        return lambda: c.mpi.allgather(c.sbuf)
    s, r, m = [c.sbuf, c.count, c.mdt], [c.rbuf, c.count, c.mdt], c.mpi
    return lambda: m.Allgather(s, r)


def _allgather_hpml(c):
    f, s, r, a, dt = c.hcomm.allgather, c.sbuf, c.rbuf, c.algo, c.dtype_name
    return lambda: f(s, r, a, dt)


def _gathered(c):
    n = c.count
    return np.concatenate([value(q, np.arange(n)) for q in range(c.p)]).astype(np.float64)


def _allgather_expect(c):
    return c.r, _gathered(c)


# reduce_scatter (size: the whole vector; each rank keeps size/p)
def _rs_counts(c):
    blk = c.count // c.p
    return blk * c.p, blk


def _rs_mpi(c):
    blk = c.count // c.p
    op = _mpi_sum(c.dt)
    # mpi4py 3.1 reads an explicit send count as the per-rank block: give none (the
    # buffer holds exactly p blocks).
    s, r, m = [c.sbuf, c.mdt], [c.rbuf, blk, c.mdt], c.mpi
    return lambda: m.Reduce_scatter_block(s, r, op)


def _rs_hpml(c):
    f, s, r, a, dt = c.hcomm.reduce_scatter, c.sbuf, c.rbuf, c.algo, c.dtype_name
    return lambda: f(s, r, "sum", a, dt)


def _rs_expect(c):
    blk = c.count // c.p
    return c.r, _sum_of(c, c.rank * blk + np.arange(blk))


# alltoall (size: each block)
def _a2a_mpi(c):
    if c.pickle:
        return lambda: c.mpi.alltoall([c.sbuf] * c.p)
    s, r, m = [c.sbuf, c.count, c.mdt], [c.rbuf, c.count, c.mdt], c.mpi
    return lambda: m.Alltoall(s, r)


def _a2a_hpml(c):
    n = c.count
    counts = [n] * c.p
    f, s, r, dt = c.hcomm.alltoallv, c.sbuf, c.rbuf, c.dtype_name
    return lambda: f(s, counts, r, counts, None, None, dt)


def _a2a_expect(c):
    n = c.count
    return c.r, np.concatenate([value(q, c.rank * n + np.arange(n)) for q in range(c.p)]) \
        .astype(np.float64)


# gather / scatter (size: each block; mpi4py only: hpml has no gather or scatter)
def _gather_mpi(c):
    if c.pickle:
        return lambda: c.mpi.gather(c.sbuf, root=c.root)
    s, r, m, root = [c.sbuf, c.count, c.mdt], [c.rbuf, c.count, c.mdt], c.mpi, c.root
    return lambda: m.Gather(s, r, root)


def _gather_expect(c):
    return (c.r, _gathered(c)) if c.rank == c.root else None


def _scatter_mpi(c):
    if c.pickle:
        return lambda: c.mpi.scatter([c.sbuf] * c.p if c.rank == c.root else None, root=c.root)
    s, r, m, root = [c.sbuf, c.count, c.mdt], [c.rbuf, c.count, c.mdt], c.mpi, c.root
    return lambda: m.Scatter(s, r, root)


def _scatter_expect(c):
    n = c.count
    return c.r, value(c.root, c.rank * n + np.arange(n)).astype(np.float64)


# barrier
def _barrier_mpi(c):
    return c.mpi.barrier if c.pickle else c.mpi.Barrier


def _barrier_hpml(c):
    return c.hcomm.barrier


CASES = {
    c.name: c
    for c in [
        Case("allreduce", "Allreduce", counts=lambda c: (c.count, c.count), mpi4py=_allreduce_mpi,
             hpml=_allreduce_hpml, fill=_fill_own, expect=_allreduce_expect, reduction=True,
             bus=lambda p: 2 * (p - 1) / p),
        Case("bcast", "Bcast", counts=lambda c: (0, c.count), mpi4py=_bcast_mpi,
             hpml=_bcast_hpml, fill=_bcast_fill, expect=_bcast_expect),
        Case("reduce", "Reduce", counts=lambda c: (c.count, c.count), mpi4py=_reduce_mpi,
             hpml=_reduce_hpml, fill=_fill_own, expect=_reduce_expect, reduction=True),
        Case("allgather", "Allgather", counts=lambda c: (c.count, c.count * c.p),
             mpi4py=_allgather_mpi, hpml=_allgather_hpml, fill=_fill_own,
             expect=_allgather_expect, total_mult=0, bus=_ring),
        Case("reduce_scatter", "Reduce_scatter", counts=_rs_counts, mpi4py=_rs_mpi,
             hpml=_rs_hpml, fill=_fill_own, expect=_rs_expect, reduction=True, bus=_ring),
        Case("alltoall", "Alltoall", counts=lambda c: (c.count * c.p, c.count * c.p),
             mpi4py=_a2a_mpi, hpml=_a2a_hpml, fill=_fill_own, expect=_a2a_expect, total_mult=0,
             bus=_ring, coll=None),
        Case("gather", "Gather", counts=lambda c: (c.count, c.count * c.p), mpi4py=_gather_mpi,
             fill=_fill_own, expect=_gather_expect, total_mult=0, bus=_ring),
        Case("scatter", "Scatter", counts=lambda c: (c.count * c.p, c.count),
             mpi4py=_scatter_mpi, fill=_fill_own, expect=_scatter_expect, total_mult=0,
             bus=_ring),
        Case("barrier", "Barrier", kind="barrier", mpi4py=_barrier_mpi, hpml=_barrier_hpml),
        Case("latency", "Latency", kind="lat", counts=lambda c: (c.count, c.count), ranks=2),
        Case("multi_lat", "Multi Latency", kind="lat", counts=lambda c: (c.count, c.count)),
        Case("bw", "Bandwidth", kind="bw", counts=lambda c: (c.count, c.count), ranks=2),
        Case("bibw", "Bi-Directional Bandwidth", kind="bw", counts=lambda c: (c.count, c.count),
             ranks=2),
    ]
}
P2P = ("latency", "multi_lat", "bw", "bibw")

# ---- the harness -----------------------------------------------------------------------


class Row:
    def __init__(self, size, iters, warmup=0):
        self.size, self.iters, self.warmup = size, iters, warmup
        self.avg = self.min = self.max = self.maxrank = float("nan")
        self.bw = self.algbw = self.busbw = float("nan")
        self.pct = []
        self.valid = -1  # -1 not checked, 0 failed, 1 passed
        self.note = ""


class Bench:
    def __init__(self, args, mpi, case):
        self.args, self.mpi, self.case = args, mpi, case
        self.dt = args.dtype
        self.hcomm = None
        if any(i.startswith("hpml") for i in args.impls):
            self.hcomm = hc.Comm(mpi)

    def alloc(self, count, dt):
        """A buffer of `count` elements of the --buffer kind and a NumPy view of it; with
        --align A, a slice of a larger one that starts at a multiple of A bytes (a
        memoryview for bytearray)."""
        nbytes = count * hc.DTYPE_SIZE[dt]
        align = self.args.align
        if self.args.buffer == "bytearray":
            b = bytearray(nbytes + align)
            if align:
                off = (-np.frombuffer(b, np.uint8).ctypes.data) % align
                b = memoryview(b)[off:off + nbytes]
            view = np.frombuffer(b, hc.NUMPY_DTYPE[dt]) if nbytes else \
                np.empty(0, hc.NUMPY_DTYPE[dt])
            return b, view
        if not align:
            a = np.zeros(count, hc.NUMPY_DTYPE[dt])
            return a, a
        raw = np.zeros(nbytes + align, np.uint8)
        off = (-raw.ctypes.data) % align
        a = raw[off:off + nbytes].view(hc.NUMPY_DTYPE[dt])
        return a, a

    def iterations(self, size):
        a = self.args
        bw = self.case.kind == "bw"
        iters = a.iterations if a.iterations is not None else (100 if bw else 10000)
        skip = a.skip if a.skip is not None else (10 if bw else 1000)
        if size > LARGE:
            if bw:
                iters = 30 if a.iterations is None else a.iterations * 30 // 100 + 1
                skip = 3 if a.skip is None else a.skip * 3 // 10 + 1
            else:
                iters, skip = iters // 100 + 1, skip // 100 + 1
        return max(iters, 1), skip

    def sizes(self):
        if self.case.kind == "barrier":
            return [0]
        lo, hi, s, out = self.args.min, self.args.max, 1, []
        if lo == 0:
            out.append(0)
        while s <= hi:
            if s >= lo:
                out.append(s)
            s *= 2
        es = hc.DTYPE_SIZE[self.dt]
        out = [s for s in out if s % es == 0]
        if self.case.name == "reduce_scatter":
            out = [s for s in out if s // es >= self.mpi.Get_size() or s == 0]
        return out

    # -- timing --

    def time_p2p(self, ctx, iters, skip):
        """OMB-Py's point-to-point loops (mpi4py): per-rank microseconds per message (lat)
        or MB/s (bw), as one-element arrays."""
        m, rank, p = self.mpi, ctx.rank, ctx.p
        name = self.case.name
        s, r, n, mdt = ctx.sbuf, ctx.rbuf, ctx.count, ctx.mdt
        if name in ("latency", "multi_lat"):
            half = p // 2
            peer = rank + half if rank < half else rank - half
            first = rank < half
            if self.args.pickle:
                def step():
                    if first:
                        m.send(s, dest=peer, tag=1)
                        m.recv(source=peer, tag=1)
                    else:
                        m.recv(source=peer, tag=1)
                        m.send(s, dest=peer, tag=1)
            else:
                sb, rb = [s, n, mdt], [r, n, mdt]

                def step():
                    if first:
                        m.Send(sb, peer, 1)
                        m.Recv(rb, peer, 1)
                    else:
                        m.Recv(rb, peer, 1)
                        m.Send(sb, peer, 1)
            m.Barrier()
            for i in range(skip + iters):
                if i == skip:
                    t0 = MPI.Wtime()
                step()
            return np.array([(MPI.Wtime() - t0) * 1e6 / (2 * iters)])
        window = self.args.window
        ack = bytearray(4)
        sb, rb = [s, n, mdt], [r, n, mdt]
        bi = name == "bibw"
        m.Barrier()
        # Rank 0 sends a window to rank 1 (bibw: and receives one back), rank 1 acks.
        peer = 1 - rank
        fwd, back = (m.Isend, m.Irecv) if rank == 0 else (m.Irecv, m.Isend)
        fbuf, bbuf = (sb, rb) if rank == 0 else (rb, sb)
        for i in range(skip + iters):
            if i == skip:
                t0 = MPI.Wtime()
            reqs = [fwd(fbuf, peer, 100) for _ in range(window)]
            if bi:
                reqs += [back(bbuf, peer, 10) for _ in range(window)]
            MPI.Request.Waitall(reqs)
            if rank == 0:
                m.Recv(ack, 1, 101)
            else:
                m.Send(ack, 0, 101)
        el = MPI.Wtime() - t0
        moved = ctx.size * window * iters * (2 if bi else 1)
        return np.array([moved / el / 1e6 if el > 0 else 0.0])

    def validate(self, ctx, op, row):
        ctx.r[:] = 0  # a result left from the timing loop must not pass
        self.case.fill(ctx)
        op()
        got = self.case.expect(ctx)
        bad, note = 0, ""
        if got is not None:
            view, want = got
            have = _decode(view, ctx.dt)
            wrong = np.nonzero(have != want)[0]
            bad = len(wrong)
            if bad:
                i = wrong[0]
                note = "rank %d element %d: got %g, expected %g" % (ctx.rank, i, have[i], want[i])
        total = self.mpi.allreduce(bad)
        notes = [x for x in self.mpi.allgather(note) if x]
        row.valid = 1 if total == 0 else 0
        row.note = notes[0] if notes else ""

    def run_one(self, impl, size):
        case = self.case
        ctx = Ctx(self, case, impl, size)
        iters, skip = self.iterations(size)
        row = Row(size, iters, skip)
        p = ctx.p
        if case.kind in ("lat", "bw"):
            mine = self.time_p2p(ctx, iters, skip)
            if case.kind == "bw":
                row.bw = float(self.mpi.allreduce(mine[0] if ctx.rank == 0 else 0.0))
                return row
            t = mine
        else:
            op = (case.mpi4py if impl == "mpi4py" else case.hpml)(ctx)
            if case.fill is not None:
                case.fill(ctx)
            t = time_coll(self.mpi, op, iters, skip)
        avg = float(t.mean())
        row.avg = self.mpi.allreduce(avg) / p
        row.min = self.mpi.allreduce(avg, op=MPI.MIN)
        row.max = self.mpi.allreduce(avg, op=MPI.MAX)
        if case.kind in ("coll", "barrier"):
            mx = np.empty_like(t)
            self.mpi.Allreduce(t, mx, MPI.MAX)
            row.maxrank = float(mx.mean())
            if self.args.percentiles:
                sm = np.empty_like(t)
                self.mpi.Allreduce(t, sm, MPI.SUM)
                sm.sort()
                for q in self.args.percentiles:
                    k = min(max(int(round(len(sm) * q / 100.0)) - 1, 0), len(sm) - 1)
                    row.pct.append(float(sm[k] / p))
        if case.kind == "coll" and row.avg > 0:
            mult = p if case.total_mult == 0 else 1
            row.algbw = size * mult / row.avg
            row.busbw = row.algbw * case.bus(p)
        if self.args.validate and case.kind == "coll" and not self.args.pickle:
            self.validate(ctx, op, row)
        return row

    def run(self):
        results = {}
        for impl in self.args.impls:
            results[impl] = [self.run_one(impl, s) for s in self.sizes()]
        if self.hcomm is not None:
            self.hcomm.free()
        return results


# ---- output ------------------------------------------------------------------------------

def _fmt_title(case):
    if case.kind == "bw":
        return "# OMB-Py MPI %s Test" % case.title
    return "# OMB Python MPI %s Test" % case.title


def print_text(out, case, args, results, note):
    impls = args.impls
    metric = "Bandwidth (MB/s)" if case.kind == "bw" else "Latency (us)"
    print(_fmt_title(case), file=out)
    plain = len(impls) == 1 and not (args.full or args.validate or args.percentiles)
    if plain:
        print("# %-8s%18s" % ("Size (B)", metric), file=out)
        if note:  # OMB-Py's two header lines stay as they are
            print("hpml.bench: %s" % note, file=sys.stderr)
    else:
        if note:
            print("# %s" % note, file=out)
        cols = []
        for i in impls:
            cols.append("%s %s" % (i, metric))
            if args.full and case.kind != "bw":
                cols += ["%s Min (us)" % i, "%s Max (us)" % i, "%s Iterations" % i]
            for q in args.percentiles if case.kind != "bw" else []:
                cols.append("%s P%g (us)" % (i, q))
            if args.validate and case.kind == "coll":
                cols.append("%s Validation" % i)
        widths = [max(18, len(c) + 2) for c in cols]
        print("# %-8s" % "Size (B)" + "".join("%*s" % (w, c) for w, c in zip(widths, cols)),
              file=out)
    for k, size in enumerate(results[impls[0]]):
        if plain:
            r = results[impls[0]][k]
            print("%-10d%18.2f" % (r.size, r.bw if case.kind == "bw" else r.avg), file=out)
            continue
        cells = []
        for i in impls:
            r = results[i][k]
            cells.append("%.2f" % (r.bw if case.kind == "bw" else r.avg))
            if args.full and case.kind != "bw":
                cells += ["%.2f" % r.min, "%.2f" % r.max, "%d" % r.iters]
            if case.kind != "bw":
                cells += ["%.2f" % v for v in r.pct]
            if args.validate and case.kind == "coll":
                cells.append({1: "Pass", 0: "Fail"}.get(r.valid, "-"))
        print("%-10d" % results[impls[0]][k].size +
              "".join("%*s" % (w, c) for w, c in zip(widths, cells)), file=out)


def _num(v):
    return "" if v != v else "%.4f" % v


def print_csv(out, case, args, results, ranks):
    head = ("case,impl,dtype,ranks,size,iterations,avg_us,min_us,max_us,maxrank_us,bw_MBps,"
            "msg_rate,algbw_MBps,busbw_MBps,overall_us,compute_us,pure_us,overlap_pct,"
            "validation")
    head += "".join(",p%g_us" % q for q in args.percentiles)
    print(head, file=out)
    dt = hc.DTYPE_NAMES[args.dtype]
    for impl in args.impls:
        for r in results[impl]:
            cells = [case.name, impl, dt, str(ranks), str(r.size), str(r.iters), _num(r.avg),
                     _num(r.min), _num(r.max), _num(r.maxrank), _num(r.bw), "",
                     _num(r.algbw), _num(r.busbw), "", "", "", "",
                     {1: "pass", 0: "fail"}.get(r.valid, "")]
            cells += [_num(v) for v in r.pct] or [""] * len(args.percentiles)
            print(",".join(cells), file=out)


def provenance(world):
    """Where and with what the run happened, as `hpml bench --json` records it: hosts in
    order of their first rank, with their rank counts. Collective over world."""
    names = world.allgather(MPI.Get_processor_name())
    hosts = []
    for n in names:
        if hosts and any(h["host"] == n for h in hosts):
            next(h for h in hosts if h["host"] == n)["ranks"] += 1
        else:
            hosts.append({"host": n, "ranks": 1})
    major, minor = MPI.Get_version()
    return {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
            "mpi_standard": "%d.%d" % (major, minor), "nodes": len(hosts), "hosts": hosts}


_ROOTED = ("bcast", "reduce", "gather", "scatter")


def print_json(out, case, args, results, ranks, note, prov):
    from .info import version
    from . import _lib

    rows = []
    for impl in args.impls:
        for r in results[impl]:
            d = {"impl": impl, "size": r.size, "iterations": r.iters, "warmup": r.warmup}
            for key, v in (("avg_us", r.avg), ("min_us", r.min), ("max_us", r.max),
                           ("maxrank_us", r.maxrank), ("bw_MBps", r.bw),
                           ("algbw_MBps", r.algbw), ("busbw_MBps", r.busbw)):
                if v == v:
                    d[key] = round(v, 4)
            if r.pct:
                d["percentiles_us"] = {"p%g" % q: round(v, 4)
                                       for q, v in zip(args.percentiles, r.pct)}
            if r.valid >= 0:
                d["validation"] = "pass" if r.valid else "fail"
                if not r.valid:
                    d["validation_detail"] = r.note
            rows.append(d)
    rooted = case.name in _ROOTED
    doc = {"schema_version": _lib.JSON_SCHEMA_VERSION, "command": "bench",
           "benchmark": case.name, "title": _fmt_title(case)[2:],
           "timestamp": prov["timestamp"], "hpml_version": version(),
           "hpml_commit": _lib.ffi.string(_lib.lib.hpml_build_commit()).decode(),
           "mpi_library": prov["mpi_library"], "mpi_standard": prov["mpi_standard"],
           "ranks": ranks, "nodes": prov["nodes"], "hosts": prov["hosts"],
           "dtype": hc.DTYPE_NAMES[args.dtype], "mpi_datatype": _MPI_TYPES[args.dtype][1],
           "op": "sum" if case.reduction else None, "in_place": False,
           "root_mode": "fixed" if rooted else None, "root": 0 if rooted else None,
           "iterations_requested": args.iterations, "warmup_requested": args.skip,
           "implementations": list(args.impls), "note": note, "results": rows}
    json.dump(doc, out)
    out.write("\n")


# ---- command line --------------------------------------------------------------------------


def _usage_error(parser, msg):
    if MPI.COMM_WORLD.Get_rank() == 0:
        print("hpml.bench: %s (python3 -m hpml.bench --help)" % msg, file=sys.stderr)
    sys.exit(2)


def _parser():
    ap = argparse.ArgumentParser(
        prog="python3 -m hpml.bench",
        description="OMB-Py-compatible benchmarks: mpi4py and hpml side by side. "
        "Benchmarks: " + " ".join(CASES) + "; ML workloads against scikit-learn: " +
        " ".join(bench_ml.ML_CASES),
        epilog="Exit status: 0 ok, 1 a validation failure or error, 2 bad options. "
        "See docs/python.md.",
    )
    ap.add_argument("benchmark", nargs="?", help="benchmark name (or --benchmark)")
    ap.add_argument("--benchmark", dest="benchmark_opt", metavar="NAME",
                    help="benchmark name, as OMB-Py's run.py takes it")
    ap.add_argument("--buffer", default="bytearray",
                    help="bytearray (default) or numpy; cupy, numba and pycuda are GPU "
                    "buffers, which hpml does not support")
    ap.add_argument("--pickle", action="store_true",
                    help="mpi4py's lowercase (pickling) methods (mpi4py only)")
    ap.add_argument("--min", type=int, default=None, help="smallest message size in bytes")
    ap.add_argument("--max", type=int, default=None, help="largest message size in bytes")
    ap.add_argument("--iterations", type=int, default=None,
                    help="timed iterations (default 10000, bw/bibw 100); above 8 KiB "
                    "N/100+1 (bw/bibw: 30 by default)")
    ap.add_argument("--skip", type=int, default=None,
                    help="warm-up iterations (default 1000, bw/bibw 10); above 8 KiB N/100+1")
    ap.add_argument("--bind", action="store_true",
                    help="hpml's allreduce and bcast bound to their buffers once "
                    "(Comm.allreduce_init, bcast_init) instead of a call with arguments")
    ap.add_argument("--window", type=int, default=64, help="bw/bibw window (default 64)")
    ap.add_argument("--align", type=int, default=0, metavar="BYTES",
                    help="buffers start at a multiple of BYTES (a power of two; default 0: "
                    "where NumPy or bytearray puts them)")
    ap.add_argument("--impl", default="mpi4py",
                    help="comma list: mpi4py (default), hpml, hpml:<algorithm>, all")
    ap.add_argument("-T", "--type", default=None,
                    help="element type: f32 (default for reductions) f64 f16 bf16 i8 u8 "
                    "(default otherwise) i32 i64")
    ap.add_argument("-c", "--validation", dest="validate", action="store_true",
                    help="check every result exactly after timing; add a Validation column")
    ap.add_argument("-f", "--full", action="store_true", help="add Min, Max, Iterations")
    ap.add_argument("-z", "--percentiles", nargs="?", const="50,90,99", default="",
                    help="tail-latency percentiles (default 50,90,99)")
    mlg = ap.add_argument_group("ML workloads (%s)" % " ".join(bench_ml.ML_CASES))
    mlg.add_argument("--rows", type=int, default=20000, help="rows over all ranks (20000)")
    mlg.add_argument("--cols", type=int, default=32, help="features (32)")
    mlg.add_argument("-k", type=int, default=None,
                     help="clusters (kmeans 8), neighbours (knn 5), components (pca 4), "
                     "classes (logreg 3)")
    mlg.add_argument("--repeat", type=int, default=3, help="timed fits, the best kept (3)")
    mlg.add_argument("--seed", type=int, default=1, help="data seed (1)")
    mlg.add_argument("--sk-threads", type=int, default=0,
                     help="scikit-learn's threads (default: as many as ranks)")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="CSV in `hpml bench --csv`'s columns")
    out.add_argument("--json", action="store_true", help="JSON in `hpml bench --json`'s schema")
    return ap


def _resolve(ap, args, world):
    name = args.benchmark_opt or args.benchmark
    if name is None:
        _usage_error(ap, "which benchmark? (one of %s)" % " ".join(CASES))
    name = name.rsplit("/", 1)[-1]
    if name.endswith(".py"):
        name = name[:-3]
    if name.startswith("osu_"):
        name = name[4:]
    if name in bench_ml.ML_CASES:
        if args.rows < world.Get_size() or args.cols < 1 or args.repeat < 1 or \
                (args.k is not None and args.k < 1) or args.sk_threads < 0:
            _usage_error(ap, "%s: need --rows >= ranks, --cols >= 1, --repeat >= 1, -k >= 1, "
                         "--sk-threads >= 0" % name)
        return name, None
    if name not in CASES:
        _usage_error(ap, "unknown benchmark '%s' (one of %s)"
                     % (name, " ".join(list(CASES) + list(bench_ml.ML_CASES))))
    case = CASES[name]
    if args.buffer in ("cupy", "numba", "pycuda"):
        _usage_error(ap, "--buffer %s is GPU memory: hpml is CPU-only (bytearray or numpy)"
                     % args.buffer)
    if args.align < 0 or args.align & (args.align - 1):
        _usage_error(ap, "--align must be a power of two (or 0), not %d" % args.align)
    if args.buffer not in ("bytearray", "numpy"):
        _usage_error(ap, "--buffer must be bytearray or numpy, not '%s'" % args.buffer)
    try:
        args.dtype = hc.dtype_code(args.type or ("f32" if case.reduction else "u8"))
    except errors.Error as e:
        _usage_error(ap, "-T: %s" % str(e)[6:])
    try:
        args.percentiles = [float(q) for q in args.percentiles.split(",") if q]
    except ValueError:
        _usage_error(ap, "-z takes percentiles like 50,90,99")
    if any(not 0 < q <= 100 for q in args.percentiles):
        _usage_error(ap, "-z: percentiles must be in (0, 100]")
    p = world.Get_size()
    default_min = 0 if case.kind == "lat" else (4 if case.reduction else 1)
    args.min = default_min if args.min is None else args.min
    args.max = (4 << 20 if case.kind in ("lat", "bw") else 1 << 20) if args.max is None \
        else args.max
    if args.min < 0 or args.max < 1 or args.min > args.max:
        _usage_error(ap, "sizes: need 0 <= --min <= --max and --max >= 1")
    for opt in ("iterations", "skip"):
        v = getattr(args, opt)
        if v is not None and v < (1 if opt == "iterations" else 0):
            _usage_error(ap, "--%s must be %s" % (opt, ">= 1" if opt == "iterations" else ">= 0"))
    if args.window < 1:
        _usage_error(ap, "--window must be >= 1")
    # --impl
    note = ""
    has_hpml = case.hpml is not None
    algos = sorted(a for a in hc.ALGOS.get(case.coll or "", {}) if a != "auto")
    impls = []
    for item in args.impl.split(","):
        if item == "all":
            impls += ["mpi4py"]
            if has_hpml:
                impls += ["hpml"] + ["hpml:" + a for a in algos]
            else:
                note = "hpml has no %s: mpi4py only" % name
        elif item == "mpi4py" or (item == "hpml" and has_hpml):
            impls.append(item)
        elif item.startswith("hpml:") and has_hpml and item[5:] in algos:
            impls.append(item)
        elif item.startswith("hpml") and not has_hpml:
            _usage_error(ap, "--impl %s: hpml has no %s benchmark (mpi4py only)" % (item, name))
        else:
            _usage_error(ap, "--impl: '%s' is not mpi4py, hpml, all or hpml:<algorithm> (%s)"
                         % (item, ", ".join(algos) or "none for %s" % name))
    args.impls = list(dict.fromkeys(impls))
    if args.pickle and any(i != "mpi4py" for i in args.impls):
        _usage_error(ap, "--pickle is for mpi4py's methods: use --impl mpi4py")
    if args.bind and name not in ("allreduce", "bcast"):
        _usage_error(ap, "--bind: only allreduce and bcast have a bound form")
    if args.pickle and name == "reduce_scatter":
        _usage_error(ap, "--pickle: mpi4py has no pickling reduce_scatter")
    if args.pickle and args.validate:
        _usage_error(ap, "-c checks buffers: not with --pickle")
    if case.ranks is not None and p != case.ranks:
        _usage_error(ap, "%s needs exactly %d ranks (this job has %d)" % (name, case.ranks, p))
    if p < 2:
        _usage_error(ap, "%s needs at least 2 ranks" % name)
    if name == "multi_lat" and p % 2:
        _usage_error(ap, "multi_lat needs an even number of ranks")
    if args.validate and case.reduction and p > 15:
        _usage_error(ap, "-c: validation data sums exactly over at most 15 ranks")
    return case, note


def main(argv=None):
    world = MPI.COMM_WORLD
    ap = _parser()
    ap.error = lambda msg: _usage_error(ap, msg)  # argparse's errors: rank 0 says them once
    args = ap.parse_args(argv)
    case, note = _resolve(ap, args, world)
    if note is None:  # an ML workload
        return bench_ml.run(case, args)
    try:
        results = Bench(args, world, case).run()
    except errors.Error as e:
        if world.Get_rank() == 0:
            print("hpml.bench: %s" % e, file=sys.stderr)
        return 1
    failures = sum(1 for rows in results.values() for r in rows if r.valid == 0)
    prov = provenance(world) if args.json else None
    if world.Get_rank() == 0:
        out = sys.stdout
        if args.csv:
            print_csv(out, case, args, results, world.Get_size())
        elif args.json:
            print_json(out, case, args, results, world.Get_size(), note, prov)
        else:
            print_text(out, case, args, results, note)
        out.flush()
        if failures:
            print("hpml.bench: validation failed in %d measurement(s)" % failures, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
