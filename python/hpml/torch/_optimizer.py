"""DistributedOptimizer: gradients averaged over the ranks in fused buckets, each bucket's
nonblocking allreduce started while the backward pass is still running.

Layout: the parameters are cut, in reverse order (the order backward produces their
gradients), into buckets of one dtype and at most bucket_bytes; each bucket owns one flat
tensor and every parameter's .grad is a view into it, so autograd accumulates gradients
straight into the buffer that hpml reduces (no packing copy). A hook on each parameter's
gradient accumulator counts the backward passes; when every parameter of a bucket has had
backward_passes_per_step of them, the bucket is ready, and ready buckets are started in
bucket order (a bucket that is ready early waits for the ones before it), so every rank
submits the same allreduces in the same order whatever order its hooks fire in. step()
(or synchronize()) starts the buckets not yet started and waits for all.
"""

import contextlib
import os

import torch

from hpml import errors

from . import _OP_NAMES, Average, Compression, Compressor, Sum, _agree, _check, _native, comm

DEFAULT_BUCKET_BYTES = 1 << 20


def _spare_core(c):
    """nonblocking=None: overlap (hpml's progress thread) only where that thread gets a core
    of its own: this rank may run on more CPUs than torch's threads, and the node has more
    CPUs than its ranks' torch threads. On 2 cores with 2 ranks of one thread each the
    blocking allreduce was faster (docs/torch.md)."""
    threads = torch.get_num_threads()
    try:
        mine = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        mine = os.cpu_count() or 1
    return mine > threads and (os.cpu_count() or 1) > c.local_size * threads


class _Slot:
    __slots__ = ("param", "name", "view", "ptr", "count", "bucket")


class _Bucket:
    __slots__ = ("index", "slots", "flat", "wire", "dt", "wire_dt", "pending", "ready", "req",
                 "ctx")


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the user's optimizer class by DistributedOptimizer()."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 bucket_bytes, nonblocking):
        super(self.__class__, self).__init__(params)
        self._hpml_init(named_parameters, compression, backward_passes_per_step, op,
                        bucket_bytes, nonblocking)

    def _hpml_init(self, named_parameters, compression, bpps, op, bucket_bytes, nonblocking):
        what = "DistributedOptimizer"
        c = comm()
        if not isinstance(bpps, int) or bpps < 1:
            raise errors.ArgumentError(
                "hpml.torch: %s: backward_passes_per_step must be a positive integer, not %r"
                % (what, bpps))
        if op not in (Average, Sum):  # the two that mean something for gradients
            raise errors.ArgumentError("hpml.torch: %s: op must be Average or Sum, not %s"
                                       % (what, _OP_NAMES.get(op, repr(op))))
        if not isinstance(bucket_bytes, int) or bucket_bytes < 1:
            raise errors.ArgumentError("hpml.torch: %s: bucket_bytes must be positive, not %r"
                                       % (what, bucket_bytes))
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            names = {}
            for n, p in named:
                if n in names:
                    raise errors.ArgumentError(
                        "hpml.torch: %s: parameter name %r appears twice in named_parameters"
                        % (what, n))
                names[n] = p
            by_id = {id(p): n for n, p in named}
            unnamed = [i for i, p in enumerate(all_params) if id(p) not in by_id]
            if unnamed:
                raise errors.ArgumentError(
                    "hpml.torch: %s: named_parameters does not name the optimizer's parameter "
                    "#%d (pass model.named_parameters() of the model the optimizer trains)"
                    % (what, unnamed[0]))
            named = [(by_id[id(p)], p) for p in all_params]
        else:
            named = [("param.%d" % i, p) for i, p in enumerate(all_params)]
        named = [(n, p) for n, p in named if p.requires_grad]
        for n, p in named:
            _check(p, what, n)
        _agree(named, what)
        self._hpml_comm = c
        self._hpml_nonblocking = _spare_core(c) if nonblocking is None else bool(nonblocking)
        self._hpml_alone = c.size == 1
        self._hpml_op = op
        self._hpml_bpps = bpps
        self._hpml_compression = compression
        self._hpml_skip_sync = False
        self._hpml_next = 0
        self._hpml_started = False
        # hpml's compressors convert into a preallocated wire buffer; another class with
        # Horovod's compress/decompress is called on each bucket.
        self._hpml_custom = not (isinstance(compression, type)
                                 and issubclass(compression, Compressor))
        wire_dtype = None if self._hpml_custom else compression.wire_dtype
        # Buckets: reverse parameter order, one dtype each, at most bucket_bytes.
        groups, cur, cur_bytes = [], [], 0
        for n, p in reversed(named):
            nb = p.numel() * p.element_size()
            if cur and (p.dtype != cur[0][1].dtype or cur_bytes + nb > bucket_bytes):
                groups.append(cur)
                cur, cur_bytes = [], 0
            cur.append((n, p))
            cur_bytes += nb
        if cur:
            groups.append(cur)
        self._hpml_buckets = []
        self._hpml_slots = []
        self._hpml_accs = []
        with torch.no_grad():
            for bi, members in enumerate(groups):
                b = _Bucket()
                b.index = bi
                total = sum(p.numel() for _, p in members)
                b.flat = torch.zeros(total, dtype=members[0][1].dtype)
                b.dt = _check(b.flat, what)
                b.wire = None
                b.wire_dt = b.dt
                if wire_dtype is not None and b.flat.dtype.is_floating_point \
                        and wire_dtype != b.flat.dtype and not self._hpml_custom:
                    b.wire = torch.zeros(total, dtype=wire_dtype)
                    b.wire_dt = _check(b.wire, what)
                b.slots = []
                b.req = None
                b.ready = False
                off = 0
                for n, p in members:
                    s = _Slot()
                    s.param, s.name, s.bucket, s.count = p, n, b, 0
                    s.view = b.flat[off:off + p.numel()].view_as(p)
                    off += p.numel()
                    if p.grad is not None:
                        s.view.copy_(p.grad)
                    p.grad = s.view
                    s.ptr = s.view.data_ptr()
                    b.slots.append(s)
                    self._hpml_slots.append(s)
                b.pending = len(b.slots)
                self._hpml_buckets.append(b)
        for s in self._hpml_slots:
            acc = s.param.expand_as(s.param).grad_fn.next_functions[0][0]
            acc.register_hook(self._hpml_hook(s))
            self._hpml_accs.append(acc)

    def _hpml_hook(self, s):
        bpps = self._hpml_bpps

        def hook(*_):
            p = s.param
            g = p.grad
            if g is not s.view:
                # The gradient is not our view (zero_grad(set_to_none=True) dropped it):
                # move it into the bucket and make the view the gradient again.
                with torch.no_grad():
                    s.view.copy_(g)
                p.grad = s.view
            s.count += 1
            if s.count < bpps:
                return
            if s.count > bpps:
                raise errors.ArgumentError(
                    "hpml.torch: DistributedOptimizer: parameter %r got a gradient more than "
                    "backward_passes_per_step=%d times before step() or synchronize()"
                    % (s.name, bpps))
            b = s.bucket
            b.pending -= 1
            if b.pending == 0:
                b.ready = True
                self._hpml_start_ready()

        return hook

    def _hpml_start_ready(self):
        buckets = self._hpml_buckets
        i = self._hpml_next
        while i < len(buckets) and buckets[i].ready:
            self._hpml_start(buckets[i])
            i += 1
        self._hpml_next = i

    def _hpml_start(self, b):
        self._hpml_started = True
        src = b.flat
        if self._hpml_custom:
            wire, ctx = self._hpml_compression.compress(src)
            b.wire = wire.contiguous()
            b.wire_dt = _check(b.wire, "DistributedOptimizer")
            b.ctx = ctx
        elif b.wire is not None:
            b.wire.copy_(src)
        buf = b.flat if b.wire is None else b.wire
        if self._hpml_alone:
            return  # one rank: the sum and the average over the ranks are the values
        if not self._hpml_nonblocking:
            _native.allreduce(self._hpml_comm, None, buf, buf.numel(), b.wire_dt, self._hpml_op,
                              "DistributedOptimizer")
            return
        b.req = _native.iallreduce(self._hpml_comm, None, buf, buf.numel(), b.wire_dt,
                                   self._hpml_op, buf, "DistributedOptimizer")

    def synchronize(self):
        """Start the buckets not yet started (parameters that got no gradient count as
        zero), wait for every bucket's allreduce; every p.grad then holds the average over
        the ranks (the sum with op=Sum)."""
        buckets = self._hpml_buckets
        with torch.no_grad():
            for b in buckets[self._hpml_next:]:
                for s in b.slots:
                    if s.count == 0:
                        g = s.param.grad
                        if g is None:
                            s.view.zero_()
                        elif g is not s.view:
                            s.view.copy_(g)
                self._hpml_start(b)
            self._hpml_next = len(buckets)
            for b in buckets:
                if b.req is not None:
                    b.req.wait()
                    b.req = None
                if self._hpml_custom:
                    b.flat.copy_(self._hpml_compression.decompress(b.wire, b.ctx))
                elif b.wire is not None:
                    b.flat.copy_(b.wire)
                b.ready = False
                b.pending = len(b.slots)
                for s in b.slots:
                    s.count = 0
                    if s.param.grad is not s.view:
                        s.param.grad = s.view
        self._hpml_next = 0
        self._hpml_started = False

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Within it step() does not synchronize: for calling synchronize() yourself
        first (to clip the averaged gradients, for example)."""
        self._hpml_skip_sync = True
        try:
            yield
        finally:
            self._hpml_skip_sync = False

    def step(self, closure=None):
        if not self._hpml_skip_sync:
            self.synchronize()
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        if self._hpml_started or any(s.count for s in self._hpml_slots):
            raise errors.ArgumentError(
                "hpml.torch: DistributedOptimizer: zero_grad() was called after backward() "
                "but before step() or synchronize(): the gradients being reduced would be lost")
        # The gradients stay views into the buckets: zeroed in place even when asked to drop
        # them (a dropped gradient would come back as a new tensor, copied into the bucket).
        with torch.no_grad():
            for b in self._hpml_buckets:
                b.flat.zero_()


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, bucket_bytes=None,
                         nonblocking=None):
    """Wrap a torch.optim optimizer (Horovod's signature): the result is an instance of a
    subclass of optimizer's class, with the same parameter groups and state, whose step()
    first averages the gradients over the ranks.

    compression: Compression.none, .fp16 or .bf16 (floating-point gradients travel in 16
    bits), or a class with Horovod's compress/decompress. backward_passes_per_step: the
    number of backward passes whose gradients are summed locally before one allreduce.
    op: Average (default) or Sum. bucket_bytes: the fusion buffers' size (default 1 MiB).
    nonblocking: True starts each bucket's allreduce with hpml's iallreduce and lets
    backward go on (overlap, in hpml's progress thread); False reduces each bucket with the
    blocking allreduce as soon as it is ready (inside the backward pass); None (default):
    True only where the progress thread gets a core of its own (more CPUs for this rank
    than torch threads, and more CPUs on the node than its ranks' torch threads).
    Collective: every rank wraps the same model's parameters.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise errors.ArgumentError(
            "hpml.torch: DistributedOptimizer: %s is not a torch.optim.Optimizer"
            % type(optimizer).__name__)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    opt = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
              op, DEFAULT_BUCKET_BYTES if bucket_bytes is None else bucket_bytes, nonblocking)
    opt.load_state_dict(optimizer.state_dict())
    return opt

