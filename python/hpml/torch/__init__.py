"""hpml.torch: Horovod's PyTorch API over hpml's collectives (CPU tensors, in place).

    import hpml.torch as hvd               # was: import horovod.torch as hvd
    hvd.init()
    model = ...; opt = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    for x, y in batches:                   # this rank's shard
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()

Collectives read and write the tensors' own memory (data_ptr()): tensors must be
contiguous CPU tensors of an hpml dtype (float32/64, float16, bfloat16, int8, uint8,
int32, int64). DistributedOptimizer keeps every gradient in a per-bucket flat buffer
(p.grad is a view into it), starts a nonblocking allreduce of a bucket as soon as the
backward pass has produced all of its gradients, and waits in step(). Every rank must
call every collective in the same order (as in Horovod); ranks whose models differ get
an error naming the parameter and the ranks. See docs/torch.md.
"""

import atexit
import hashlib
import itertools

import numpy as np
import torch
from mpi4py import MPI

import hpml
from hpml import errors

from . import _native

__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "mpi_threads_supported", "comm",
    "Average", "Sum", "Min", "Max", "Product", "Compression",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "synchronize", "poll",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "broadcast_object",
    "broadcast_parameters", "broadcast_optimizer_state", "DistributedOptimizer",
    "allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "destroy_process_group",
]

# Reduction ops: hpml's codes (hpml_op_t).
Sum, Product, Min, Max, Average = 0, 1, 2, 3, 4
_OP_NAMES = {Sum: "Sum", Product: "Product", Min: "Min", Max: "Max", Average: "Average"}

# torch dtype -> hpml dtype code (hpml_dtype_t).
_DTYPES = {
    torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
    torch.int8: 4, torch.uint8: 5, torch.int32: 6, torch.int64: 7,
}

_state = {"comm": None, "atexit": False}


# ---- initialisation and job facts ----------------------------------------------------

def init(comm=None):
    """Start hpml.torch on an mpi4py communicator (default MPI.COMM_WORLD); collective.
    Calling it again while initialised does nothing."""
    if _state["comm"] is None:
        _state["comm"] = hpml.Comm(comm)
    if not _state["atexit"]:
        # PyTorch's process-group teardown at exit busy-waits in one thread for another:
        # off real-time policies first (destroy_process_group in _ddp.py says why).
        atexit.register(_ddp._leave_realtime)
        _state["atexit"] = True


def shutdown():
    """Free the communicator (collective); init() may be called again afterwards."""
    c = _state["comm"]
    _state["comm"] = None
    _handles.clear()
    if c is not None:
        c.free()


def is_initialized():
    return _state["comm"] is not None


def comm():
    """The hpml.Comm that hpml.torch uses."""
    c = _state["comm"]
    if c is None:
        raise errors.ArgumentError("hpml.torch: not initialised: call hpml.torch.init() first")
    return c


def rank():
    return comm().rank


def size():
    return comm().size


def local_rank():
    return comm().local_rank


def local_size():
    return comm().local_size


def cross_rank():
    """This rank's node index."""
    return comm().node


def cross_size():
    """The number of nodes."""
    return comm().nodes


def mpi_threads_supported():
    return MPI.Query_thread() == MPI.THREAD_MULTIPLE


# ---- tensors ----------------------------------------------------------------------

def _label(what, name):
    return "%s: %s" % (what, "tensor %r" % name if name else "the tensor")


def _check(t, what, name=None):
    """hpml dtype code of t; a clear error unless t is a contiguous CPU tensor of one."""
    if not isinstance(t, torch.Tensor):
        raise errors.ArgumentError(
            "hpml.torch: %s is a %s, not a torch.Tensor" % (_label(what, name), type(t).__name__))
    if t.device.type != "cpu":
        raise errors.DtypeError(
            "hpml.torch: %s is on device '%s': hpml is CPU-only, move it with .cpu() first"
            % (_label(what, name), t.device))
    if t.layout != torch.strided:
        raise errors.DtypeError(
            "hpml.torch: %s has layout %s: hpml reduces dense (strided) tensors only, "
            "use .to_dense()" % (_label(what, name), t.layout))
    dt = _DTYPES.get(t.dtype)
    if dt is None:
        raise errors.DtypeError(
            "hpml.torch: %s has dtype %s: hpml has float32 float64 float16 bfloat16 int8 uint8 "
            "int32 int64" % (_label(what, name), t.dtype))
    if not t.is_contiguous():
        raise errors.BufferError(
            "hpml.torch: %s is not contiguous (shape %s, strides %s): pass tensor.contiguous()"
            % (_label(what, name), tuple(t.shape), t.stride()))
    return dt


def _op(op, average, what):
    if average is not None:
        if op is not None:
            raise errors.ArgumentError("hpml.torch: %s: give op or average, not both" % what)
        return Average if average else Sum
    if op is None:
        return Average
    if op not in _OP_NAMES:
        raise errors.ArgumentError(
            "hpml.torch: %s: unknown op %r (Average, Sum, Min, Max or Product)" % (what, op))
    return op


# ---- compression --------------------------------------------------------------------

class Compressor:
    """Horovod's interface: compress(tensor) -> (tensor, ctx); decompress(tensor, ctx).
    wire_dtype: the dtype a floating-point tensor travels as (None: unchanged)."""

    wire_dtype = None

    @classmethod
    def compress(cls, tensor):
        if cls.wire_dtype is None or not tensor.dtype.is_floating_point:
            return tensor, None
        return tensor.to(cls.wire_dtype), tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class NoneCompressor(Compressor):
    pass


class FP16Compressor(Compressor):
    wire_dtype = torch.float16


class BF16Compressor(Compressor):
    wire_dtype = torch.bfloat16


class Compression:
    """Compression.none, Compression.fp16 (IEEE half) and Compression.bf16 (bfloat16):
    floating-point gradients travel in 16 bits and are summed by hpml in float32."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor


# ---- allreduce and broadcast ---------------------------------------------------------

_handles = {}
_next_handle = itertools.count(1)


class _Pending:
    __slots__ = ("req", "output", "ctx", "compression")

    def __init__(self, req, output, ctx, compression):
        self.req, self.output, self.ctx, self.compression = req, output, ctx, compression


def _start_allreduce(tensor, output, op, name, compression, what):
    c = comm()
    wire, ctx = compression.compress(tensor)
    dt = _check(wire, what, name)
    if output is tensor and wire is tensor:
        req = _native.iallreduce(c, None, tensor, tensor.numel(), dt, op, tensor, what)
    else:
        out = wire if wire is not tensor else output
        send = None if out is wire else wire
        req = _native.iallreduce(c, send, out, wire.numel(), dt, op, (wire, out), what)
    h = next(_next_handle)
    _handles[h] = _Pending(req, output, ctx, compression)
    return h


def allreduce_async(tensor, average=None, name=None, op=None, compression=Compression.none):
    """Start an allreduce of tensor into a new tensor; returns a handle for synchronize()
    or poll(). op: Average (default), Sum, Min, Max, Product."""
    op = _op(op, average, "allreduce_async")
    _check(tensor, "allreduce_async", name)
    return _start_allreduce(tensor, torch.empty_like(tensor), op, name, compression,
                            "allreduce_async")


def allreduce_async_(tensor, average=None, name=None, op=None, compression=Compression.none):
    """Start an in-place allreduce of tensor; returns a handle."""
    op = _op(op, average, "allreduce_async_")
    _check(tensor, "allreduce_async_", name)
    return _start_allreduce(tensor, tensor, op, name, compression, "allreduce_async_")


def poll(handle):
    """True once the operation of handle has completed (synchronize() then returns at once)."""
    p = _handles.get(handle)
    if p is None:
        raise errors.ArgumentError("hpml.torch: poll: unknown handle %r (already synchronized?)"
                                   % (handle,))
    return p.req.test()


def synchronize(handle):
    """Wait for the operation of handle and return its output tensor."""
    p = _handles.pop(handle, None)
    if p is None:
        raise errors.ArgumentError(
            "hpml.torch: synchronize: unknown handle %r (already synchronized?)" % (handle,))
    p.req.wait()
    out = p.req.result
    if p.ctx is not None or out is not p.output:
        with torch.no_grad():
            p.output.copy_(p.compression.decompress(out, p.ctx))
    return p.output


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None):
    """A new tensor: op (default Average) of tensor over the ranks."""
    op = _op(op, average, "allreduce")
    _check(tensor, "allreduce", name)
    if compression is Compression.none:
        out = torch.empty_like(tensor)
        _native.allreduce(comm(), tensor, out, tensor.numel(), _DTYPES[tensor.dtype], op)
        return out
    return synchronize(_start_allreduce(tensor, torch.empty_like(tensor), op, name, compression,
                                        "allreduce"))


def allreduce_(tensor, average=None, name=None, op=None, compression=Compression.none):
    """Allreduce tensor in place and return it."""
    op = _op(op, average, "allreduce_")
    dt = _check(tensor, "allreduce_", name)
    if compression is Compression.none:
        _native.allreduce(comm(), None, tensor, tensor.numel(), dt, op, "allreduce_")
        return tensor
    return synchronize(_start_allreduce(tensor, tensor, op, name, compression, "allreduce_"))


def _root(root_rank, what):
    n = size()
    if not isinstance(root_rank, int) or not 0 <= root_rank < n:
        raise errors.ArgumentError("hpml.torch: %s: root_rank %r outside [0, %d)"
                                   % (what, root_rank, n))
    return root_rank


def broadcast_async_(tensor, root_rank, name=None):
    dt = _check(tensor, "broadcast_async_", name)
    req = _native.ibcast(comm(), tensor, tensor.numel(), dt, _root(root_rank, "broadcast"))
    h = next(_next_handle)
    _handles[h] = _Pending(req, tensor, None, Compression.none)
    return h


def broadcast_async(tensor, root_rank, name=None):
    _check(tensor, "broadcast_async", name)
    return broadcast_async_(tensor.clone(), root_rank, name)


def broadcast_(tensor, root_rank, name=None):
    """Overwrite tensor with root_rank's (in place) and return it."""
    dt = _check(tensor, "broadcast_", name)
    _native.bcast(comm(), tensor, tensor.numel(), dt, _root(root_rank, "broadcast_"))
    return tensor


def broadcast(tensor, root_rank, name=None):
    """A new tensor holding root_rank's tensor."""
    _check(tensor, "broadcast", name)
    return broadcast_(tensor.clone(), root_rank, name)


def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's obj (pickled) on every rank."""
    return comm().mpi.bcast(obj, root=_root(root_rank, "broadcast_object"))


# ---- agreement across ranks ----------------------------------------------------------

def _describe(items):
    return [(n, tuple(t.shape), str(t.dtype).replace("torch.", "")) for n, t in items]


def _show(d):
    return "%s %s" % (d[2], "(" + ", ".join(map(str, d[1])) + ")")


def _disagreement(descs):
    """One sentence on where the ranks' parameter lists first differ from rank 0's."""
    ref = descs[0]
    for r, d in enumerate(descs[1:], 1):
        if d == ref:
            continue
        for i, (a, b) in enumerate(zip(ref, d)):
            if a[0] != b[0]:
                return ("parameter #%d is %r on rank 0 but %r on rank %d (the ranks must "
                        "list the same parameters in the same order)" % (i, a[0], b[0], r))
            if a != b:
                return ("parameter %r is %s on rank 0 but %s on rank %d"
                        % (a[0], _show(a), _show(b), r))
        n = min(len(ref), len(d))
        longer, short_r = (ref, r) if len(ref) > len(d) else (d, 0)
        return ("rank 0 has %d parameters, rank %d has %d: %r (#%d) is missing on rank %d"
                % (len(ref), r, len(d), longer[n][0], n, short_r))
    return None


def _agree(items, what):
    """Raise the same error on every rank unless every rank has the same (name, shape,
    dtype) list: one 8-byte digest per rank through hpml's allgather, the lists themselves
    only when the digests differ."""
    c = comm()
    desc = _describe(items)
    if c.size == 1:
        return
    digest = np.frombuffer(hashlib.sha256(repr(desc).encode()).digest()[:8], np.int64).copy()
    every = c.allgather(digest)
    if (every == every[0]).all():
        return
    msg = _disagreement(c.mpi.allgather(desc)) or "the ranks' parameter lists differ"
    raise errors.ArgumentError("hpml.torch: %s: ranks disagree: %s" % (what, msg))


def _named(params, what):
    if isinstance(params, dict):
        return sorted(params.items())
    try:
        items = list(params)
    except TypeError:
        raise errors.ArgumentError(
            "hpml.torch: %s: expected a state_dict or (name, tensor) pairs, not %s"
            % (what, type(params).__name__)) from None
    for it in items:
        if not (isinstance(it, tuple) and len(it) == 2 and isinstance(it[1], torch.Tensor)):
            raise errors.ArgumentError(
                "hpml.torch: %s: expected a state_dict or (name, tensor) pairs, got an item %s"
                % (what, type(it).__name__))
    return items


def broadcast_parameters(params, root_rank=0):
    """Overwrite every tensor of params (model.state_dict() or model.named_parameters())
    with root_rank's, in place. Collective; the ranks must have the same names, shapes
    and dtypes (or every rank gets an error naming the first parameter that differs)."""
    what = "broadcast_parameters"
    items = _named(params, what)
    root = _root(root_rank, what)
    dts = [_check(t, what, n) for n, t in items]
    _agree(items, what)
    c = comm()
    reqs = [_native.ibcast(c, t.data if t.requires_grad else t, t.numel(), dt, root, what)
            for (n, t), dt in zip(items, dts)]
    for r in reqs:
        r.wait()


def _skeleton(obj, tensors):
    """obj with its tensors replaced by ("__hpml_tensor__", index, shape, dtype)."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return ("__hpml_tensor__", len(tensors) - 1, tuple(obj.shape), obj.dtype)
    if isinstance(obj, dict):
        return {k: _skeleton(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_skeleton(v, tensors) for v in obj)
    return obj


def _fill(obj, tensors):
    if isinstance(obj, tuple) and len(obj) == 4 and obj[0] == "__hpml_tensor__":
        return tensors[obj[1]]
    if isinstance(obj, dict):
        return {k: _fill(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_fill(v, tensors) for v in obj)
    return obj


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Give every rank root_rank's optimizer state (hyper-parameters of every group and
    per-parameter state such as momentum buffers), also to ranks whose optimizer has not
    taken a step yet. The structure goes pickled, the state tensors by hpml's broadcast."""
    what = "broadcast_optimizer_state"
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise errors.ArgumentError("hpml.torch: %s: %s is not a torch.optim.Optimizer"
                                   % (what, type(optimizer).__name__))
    root = _root(root_rank, what)
    c = comm()
    mine = optimizer.state_dict()
    tensors = []
    skel = _skeleton(mine, tensors) if c.rank == root else None
    skel = c.mpi.bcast(skel, root=root)
    if c.rank != root:
        tensors = []
        _collect_shapes(skel, tensors)
    reqs = []
    for i, t in enumerate(tensors):
        t = t.contiguous() if c.rank == root else t
        tensors[i] = t
        reqs.append(_native.ibcast(c, t, t.numel(), _check(t, what, "state #%d" % i), root, what))
    for r in reqs:
        r.wait()
    if c.rank != root:
        ids = [p for g in mine["param_groups"] for p in g["params"]]
        theirs = [p for g in skel["param_groups"] for p in g["params"]]
        if len(ids) != len(theirs):
            raise errors.ArgumentError(
                "hpml.torch: %s: rank %d's optimizer has %d parameters, rank %d's %d"
                % (what, c.rank, len(ids), root, len(theirs)))
        optimizer.load_state_dict(_fill(skel, tensors))


def _collect_shapes(obj, out):
    """Allocate, in index order, the tensors a skeleton refers to."""
    if isinstance(obj, tuple) and len(obj) == 4 and obj[0] == "__hpml_tensor__":
        while len(out) <= obj[1]:
            out.append(None)
        out[obj[1]] = torch.empty(obj[2], dtype=obj[3])
    elif isinstance(obj, dict):
        for v in obj.values():
            _collect_shapes(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _collect_shapes(v, out)


# ---- DistributedOptimizer -------------------------------------------------------------

from ._optimizer import DistributedOptimizer  # noqa: E402
from . import _ddp  # noqa: E402
from ._ddp import (allreduce_hook, bf16_compress_hook, destroy_process_group,  # noqa: E402
                   fp16_compress_hook)
