"""DDP communication hooks that route DistributedDataParallel's gradient buckets through
hpml instead of the process group:

    ddp = torch.nn.parallel.DistributedDataParallel(model)   # gloo process group
    hpml.torch.init()
    ddp.register_comm_hook(None, hpml.torch.allreduce_hook)

The state argument is the hpml.Comm to use (None: hpml.torch's, from init()). Each hook
averages the bucket in place (fp16/bf16: through a 16-bit copy) and returns a completed
torch Future, which is what DDP waits for.

destroy_process_group() ends the gloo process group without hanging under chrt -f.
"""

import os

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


def _leave_realtime():
    """Put every thread of this process that runs under a real-time policy (chrt -f,
    chrt -r) back under the normal one. For teardown only: see destroy_process_group."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return
    for tid in tids:
        try:
            if os.sched_getscheduler(tid) in (os.SCHED_FIFO, os.SCHED_RR):
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass  # the thread has ended, or the policy is not ours to change


def destroy_process_group():
    """torch.distributed.destroy_process_group(), with this process's threads off any
    real-time policy first; hpml.torch also does this at exit.

    PyTorch's TCPStore client has a thread that polls its connection to the store; while
    the process group is torn down (by this call, or by the garbage collector at exit once
    the last reference to it goes), that thread busy-loops on the closed connection (poll
    returns at once, recv peeks 0 bytes) until the main thread signals it through a pipe.
    Under SCHED_FIFO with a rank's threads bound to one core, the busy thread never gives
    the core back to the threads it waits for, and the rank hangs at exit. The teardown is
    not timed, so it runs under the normal policy, which shares the core."""
    import torch.distributed as dist
    _leave_realtime()
    if dist.is_initialized():
        dist.destroy_process_group()


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
