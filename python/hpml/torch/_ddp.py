"""DDP communication hooks that route DistributedDataParallel's gradient buckets through
hpml instead of the process group:

    ddp = torch.nn.parallel.DistributedDataParallel(model)   # gloo process group
    hpml.torch.init()
    ddp.register_comm_hook(None, hpml.torch.allreduce_hook)

The state argument is the hpml.Comm to use (None: hpml.torch's, from init()). Each hook
averages the bucket in place (fp16/bf16: through a 16-bit copy) and returns a completed
torch Future, which is what DDP waits for.
"""

import torch

from hpml import Comm, errors

from . import Average, _check, _native, comm


def _bucket_tensor(bucket):
    t = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
    return t


def _comm_of(state):
    if state is None:
        return comm()
    if not isinstance(state, Comm):
        raise errors.ArgumentError(
            "hpml.torch: DDP comm hook: state must be an hpml.Comm or None, not %s"
            % type(state).__name__)
    return state


def _done(t):
    fut = torch.futures.Future()
    fut.set_result(t)
    return fut


def allreduce_hook(state, bucket):
    """Average DDP's bucket over the ranks with hpml's allreduce, in place."""
    t = _bucket_tensor(bucket)
    dt = _check(t, "allreduce_hook", "DDP bucket")
    _native.allreduce(_comm_of(state), None, t, t.numel(), dt, Average, "allreduce_hook")
    return _done(t)


def _compressed(state, bucket, dtype, what):
    t = _bucket_tensor(bucket)
    _check(t, what, "DDP bucket")
    wire = t.to(dtype)
    _native.allreduce(_comm_of(state), None, wire, wire.numel(), _check(wire, what), Average,
                      what)
    with torch.no_grad():
        t.copy_(wire)
    return _done(t)


def fp16_compress_hook(state, bucket):
    """allreduce_hook with the bucket sent as float16 (summed in float32 by hpml)."""
    return _compressed(state, bucket, torch.float16, "fp16_compress_hook")


def bf16_compress_hook(state, bucket):
    """allreduce_hook with the bucket sent as bfloat16 (summed in float32 by hpml)."""
    return _compressed(state, bucket, torch.bfloat16, "bf16_compress_hook")


# DDP refuses a hook named bf16_compress_hook unless CUDA 11 and NCCL 2.10 are present (it
# takes it for its own NCCL hook); hpml's runs on CPUs, under its own name.
bf16_compress_hook.__name__ = bf16_compress_hook.__qualname__ = "hpml_bf16_compress_hook"
