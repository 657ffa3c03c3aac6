"""hpml.torch against references: MPI's own allreduce (mpi4py), single-process PyTorch
training on the same global batch, and the ranks' own copies of what should agree."""

import pickle

import numpy as np
import pytest
import torch
import torch.nn as nn
from mpi4py import MPI

import hpml
import hpml.torch as hvd


def mpi_sum(t, op=MPI.SUM):
    """The reference: MPI's own allreduce (default sum) of a tensor's values."""
    a = t.detach().numpy().copy()
    out = np.empty_like(a)
    MPI.COMM_WORLD.Allreduce(a, out, op)
    return torch.from_numpy(out)


def same_everywhere(t):
    """True when t's bytes are identical on every rank."""
    every = MPI.COMM_WORLD.allgather(t.detach().numpy().tobytes())
    return all(b == every[0] for b in every)


def mlp(seed, hidden=16):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, hidden), nn.ReLU(), nn.Linear(hidden, 8), nn.ReLU(),
                         nn.Linear(8, 3))


def test_job_facts():
    w = MPI.COMM_WORLD
    assert (hvd.rank(), hvd.size()) == (w.rank, w.size)
    assert 0 <= hvd.local_rank() < hvd.local_size() <= hvd.size()
    assert hvd.is_initialized()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_allreduce_matches_mpi(dtype):
    r, n = hvd.rank(), hvd.size()
    g = torch.Generator().manual_seed(100 + r)
    x = torch.randint(-50, 50, (1000,), generator=g).to(dtype)
    if dtype.is_floating_point:
        x = x / 7  # not exactly representable: sums exact at 1 and 2 ranks only
    keep = x.clone()
    ref = mpi_sum(x)
    s = hvd.allreduce(x, op=hvd.Sum)
    assert torch.equal(x, keep)  # out of place: the input is untouched
    assert torch.equal(s, ref)
    if dtype.is_floating_point:
        assert torch.equal(hvd.allreduce(x), ref / n)  # Average: the sum divided by size
        y = x.clone()
        assert hvd.allreduce_(y, average=False) is y and torch.equal(y, ref)
    assert torch.equal(hvd.allreduce(x, op=hvd.Max), mpi_sum(x, MPI.MAX))


def test_async_handles():
    r, n = hvd.rank(), hvd.size()
    xs = [torch.full((k * 100 + 1,), float(r + k)) for k in range(4)]
    handles = [hvd.allreduce_async(x, op=hvd.Sum) for x in xs[:2]]
    handles += [hvd.allreduce_async_(x, op=hvd.Sum) for x in xs[2:]]
    while not hvd.poll(handles[-1]):
        pass
    outs = [hvd.synchronize(h) for h in handles]
    for k, out in enumerate(outs):
        assert torch.equal(out, torch.full_like(out, sum(q + k for q in range(n))))
    assert outs[2] is xs[2] and outs[3] is xs[3]  # in place
    assert torch.equal(xs[0], torch.full_like(xs[0], float(r)))
    with pytest.raises(hpml.ArgumentError, match="unknown handle"):
        hvd.synchronize(handles[0])
    b = torch.full((5,), float(r))
    assert torch.equal(hvd.synchronize(hvd.broadcast_async_(b, n - 1)),
                       torch.full((5,), float(n - 1)))


@pytest.mark.parametrize("comp,wire", [(hvd.Compression.fp16, torch.float16),
                                       (hvd.Compression.bf16, torch.bfloat16)])
def test_compression_round_trip(comp, wire):
    r, n = hvd.rank(), hvd.size()
    x = torch.linspace(-3, 3, 257) * (r + 1)
    c, ctx = comp.compress(x)
    assert c.dtype == wire and comp.decompress(c, ctx).dtype == torch.float32
    assert torch.equal(comp.decompress(c, ctx), x.to(wire).float())
    got = hvd.allreduce(x, op=hvd.Sum, compression=comp)
    assert got.dtype == torch.float32
    # The reference: each rank's 16-bit values summed (exactly, in float32) and rounded
    # once to the wire format.
    ref = mpi_sum(x.to(wire).float()).to(wire).float()
    assert torch.equal(got, ref)
    i = torch.arange(10, dtype=torch.int32)
    assert torch.equal(hvd.allreduce(i, op=hvd.Sum, compression=comp), i * n)  # ints as is


def test_broadcast():
    r, n = hvd.rank(), hvd.size()
    x = torch.arange(7, dtype=torch.float64) * (r + 1)
    got = hvd.broadcast(x, n - 1)
    assert torch.equal(got, torch.arange(7, dtype=torch.float64) * n)
    assert torch.equal(x, torch.arange(7, dtype=torch.float64) * (r + 1))
    assert hvd.broadcast_object({"rank": r}, 0) == {"rank": 0}


def test_errors():
    x = torch.zeros(4, 4)
    with pytest.raises(hpml.BufferError, match=r"allreduce: tensor 'w' is not contiguous"):
        hvd.allreduce(x.t(), name="w")
    with pytest.raises(hpml.DtypeError, match=r"on device 'meta': hpml is CPU-only"):
        hvd.allreduce_(torch.zeros(3, device="meta"))
    with pytest.raises(hpml.DtypeError, match=r"dtype torch.bool"):
        hvd.allreduce(torch.zeros(3, dtype=torch.bool))
    with pytest.raises(hpml.ArgumentError, match=r"not a torch.Tensor"):
        hvd.allreduce([1.0, 2.0])
    with pytest.raises(hpml.ArgumentError, match=r"root_rank 99 outside"):
        hvd.broadcast_(x, 99)
    with pytest.raises(hpml.ArgumentError, match=r"unknown op"):
        hvd.allreduce(x, op=17)
    m = mlp(0)
    with pytest.raises(hpml.ArgumentError, match="backward_passes_per_step"):
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 backward_passes_per_step=0)
    with pytest.raises(hpml.ArgumentError, match="does not name the optimizer's parameter #0"):
        hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                 named_parameters=list(m.named_parameters())[1:])


def local_grads(model, x, y):
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("nonblocking", [True, False])
@pytest.mark.parametrize("bucket_bytes", [64, 1 << 20])
def test_gradients_are_the_reference_average(bucket_bytes, nonblocking):
    r, n = hvd.rank(), hvd.size()
    model = mlp(1)
    ref_model = mlp(1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   bucket_bytes=bucket_bytes, nonblocking=nonblocking)
    assert len(opt._hpml_buckets) == (6 if bucket_bytes == 64 else 1)
    g = torch.Generator().manual_seed(10 + r)
    for _ in range(2):
        x, y = torch.randn(9, 12, generator=g), torch.randint(0, 3, (9,), generator=g)
        want = [mpi_sum(t) / n for t in local_grads(ref_model, x, y)]
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.synchronize()
        for p, w in zip(model.parameters(), want):
            assert torch.equal(p.grad, w)  # exact: 2 ranks sum in either order the same
        with opt.skip_synchronize():
            opt.step()
        with torch.no_grad():
            for p, q in zip(model.parameters(), ref_model.parameters()):
                q.copy_(p)


def test_overlap_only_with_a_spare_core():
    """nonblocking=None: hpml's progress thread only where it gets a core of its own."""
    import os
    model = mlp(2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    t = torch.get_num_threads()
    spare = len(os.sched_getaffinity(0)) > t and os.cpu_count() > hvd.local_size() * t
    assert opt._hpml_nonblocking == spare


@pytest.mark.parametrize("zero", ["zero", "none"])
@pytest.mark.parametrize("comp", ["none", "fp16", "bf16"])
def test_same_loss_curve_as_single_process(zero, comp):
    """Each rank trains on its shard of a global batch; the average of the ranks' losses
    follows the loss of one process training on the whole global batch, and the
    parameters stay identical on every rank."""
    r, n = hvd.rank(), hvd.size()
    model = mlp(100 + r)  # different on every rank until broadcast
    single = mlp(7)
    hvd.broadcast_parameters(single.state_dict(), 0)
    with torch.no_grad():
        for p, q in zip(model.parameters(), single.parameters()):
            p.copy_(q)
    mk = lambda m: torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.9)  # noqa: E731
    opt = hvd.DistributedOptimizer(mk(model), named_parameters=model.named_parameters(),
                                   compression=getattr(hvd.Compression, comp), bucket_bytes=256)
    sopt = mk(single)
    g = torch.Generator().manual_seed(5)  # the same global batches on every rank
    per = 8
    losses, ref = [], []
    for _ in range(8):
        X, Y = torch.randn(per * n, 12, generator=g), torch.randint(0, 3, (per * n,), generator=g)
        opt.zero_grad(set_to_none=(zero == "none"))
        loss = nn.functional.cross_entropy(model(X[r * per:(r + 1) * per]),
                                           Y[r * per:(r + 1) * per])
        loss.backward()
        opt.step()
        losses.append(hvd.allreduce(loss.detach()).item())
        sopt.zero_grad()
        sl = nn.functional.cross_entropy(single(X), Y)
        sl.backward()
        sopt.step()
        ref.append(sl.item())
    tol = 1e-5 if comp == "none" else 2e-2
    np.testing.assert_allclose(losses, ref, rtol=tol, atol=tol)
    for p, q in zip(model.parameters(), single.parameters()):
        assert same_everywhere(p)
        if comp == "none":
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_backward_passes_per_step():
    r = hvd.rank()
    model = mlp(3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2, op=hvd.Sum)
    ref = mlp(3)
    g = torch.Generator().manual_seed(20 + r)
    batches = [(torch.randn(4, 12, generator=g), torch.randint(0, 3, (4,), generator=g))
               for _ in range(2)]
    ref.zero_grad()
    for x, y in batches:
        nn.functional.cross_entropy(ref(x), y).backward()  # accumulated locally
    want = [mpi_sum(p.grad) for p in ref.parameters()]
    opt.zero_grad()
    for x, y in batches:
        nn.functional.cross_entropy(model(x), y).backward()
    opt.synchronize()
    for p, w in zip(model.parameters(), want):
        torch.testing.assert_close(p.grad, w, rtol=0, atol=1e-6)
    x, y = batches[0]
    with pytest.raises(hpml.ArgumentError, match="more than backward_passes_per_step=2"):
        for _ in range(3):
            nn.functional.cross_entropy(model(x), y).backward()
    opt.synchronize()


def test_zero_grad_before_step_is_refused():
    model = mlp(4)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    nn.functional.cross_entropy(model(torch.randn(2, 12)), torch.tensor([0, 1])).backward()
    with pytest.raises(hpml.ArgumentError, match="zero_grad.. was called after backward"):
        opt.zero_grad()
    opt.step()
    # Still an optimizer of the wrapped class: schedulers take it.
    assert isinstance(opt, torch.optim.SGD)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    opt.zero_grad()
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.05


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_broadcast_optimizer_state(kind):
    r = hvd.rank()
    model = mlp(9)
    hvd.broadcast_parameters(model.named_parameters(), 0)
    if kind == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.5 + 0.1 * r)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=0.01 * (r + 1))
    if r == 0:  # only the root has stepped: the others have no state yet
        x = torch.randn(3, 12)
        nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 2])).backward()
        opt.step()
    hvd.broadcast_optimizer_state(opt, 0)
    sd = opt.state_dict()
    assert sd["param_groups"][0]["lr"] == (0.1 if kind == "sgd" else 0.01)
    blob = pickle.dumps([(k, {n: (v.numpy().tobytes() if torch.is_tensor(v) else v)
                              for n, v in s.items()}) for k, s in sorted(sd["state"].items())])
    every = MPI.COMM_WORLD.allgather(blob)
    assert all(b == every[0] for b in every) and len(sd["state"]) == 6


def test_ranks_disagreeing_on_shapes_get_one_error():
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        pytest.skip("needs 2 ranks")
    model = mlp(0, hidden=16 if r == 0 else 15)
    with pytest.raises(hpml.ArgumentError, match=r"DistributedOptimizer: ranks disagree: "
                       r"parameter '0.weight' is float32 \(16, 12\) on rank 0 but float32 "
                       r"\(15, 12\) on rank 1"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters())
    with pytest.raises(hpml.ArgumentError, match=r"broadcast_parameters: ranks disagree"):
        hvd.broadcast_parameters(model.state_dict(), 0)


def test_ranks_disagreeing_on_order_get_one_error():
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        pytest.skip("needs 2 ranks")
    model = mlp(0)
    params = list(model.parameters())
    if r == 1:
        params = params[1:] + params[:1]
    names = {id(p): k for k, p in model.named_parameters()}
    with pytest.raises(hpml.ArgumentError, match=r"parameter #0 is '0.weight' on rank 0 but "
                       r"'0.bias' on rank 1"):
        hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1),
                                 named_parameters=[(names[id(p)], p) for p in params])


def test_destroy_process_group_leaves_realtime_policies():
    """destroy_process_group (and init's exit handler) put every thread that runs under
    SCHED_FIFO back on SCHED_OTHER (the teardown hang, docs/torch.md); before the gloo fixture, so no process group yet: a thread of this
    process made FIFO, blocked on an event, is SCHED_OTHER afterwards."""
    import os
    import threading
    made, go, tid = threading.Event(), threading.Event(), []

    def worker():
        tid.append(threading.get_native_id())
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except OSError:
            tid.append(None)  # not permitted here
        made.set()
        go.wait()
    t = threading.Thread(target=worker)
    t.start()
    made.wait()
    try:
        if tid[-1] is None:
            pytest.skip("SCHED_FIFO is not permitted here (no CAP_SYS_NICE or RLIMIT_RTPRIO)")
        assert os.sched_getscheduler(tid[0]) == os.SCHED_FIFO
        hvd.destroy_process_group()  # no process group: only the policies change
        assert os.sched_getscheduler(tid[0]) == os.SCHED_OTHER
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
    finally:
        go.set()
        t.join()


@pytest.fixture(scope="module")
def gloo():
    """A gloo process group over loopback (what DDP needs), its port chosen by rank 0."""
    import socket
    import torch.distributed as dist
    port = None
    if hvd.rank() == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = MPI.COMM_WORLD.bcast(port, root=0)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=hvd.rank(), world_size=hvd.size())
    yield
    hvd.destroy_process_group()
    assert not dist.is_initialized()


@pytest.mark.parametrize("hook", ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"])
def test_ddp_comm_hook(gloo, hook):
    """DDP with hpml's hook gives the gradients DDP computes with gloo's allreduce (exactly
    at 1 and 2 ranks; the 16-bit hooks within their rounding)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    r = hvd.rank()
    plain, routed = DDP(mlp(11)), DDP(mlp(11), bucket_cap_mb=0.001)
    routed.register_comm_hook(None, getattr(hvd, hook))
    g = torch.Generator().manual_seed(40 + r)
    x, y = torch.randn(6, 12, generator=g), torch.randint(0, 3, (6,), generator=g)
    for m in (plain, routed):
        nn.functional.cross_entropy(m(x), y).backward()
    for p, q in zip(plain.parameters(), routed.parameters()):
        if hook == "allreduce_hook":
            assert torch.equal(p.grad, q.grad)
        else:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-2, atol=1e-3)
        assert same_everywhere(q.grad)
    # DDP passes the hook's exception on inside a RuntimeError.
    with pytest.raises(RuntimeError, match="hpml.torch: DDP comm hook: state must be an hpml"):
        bad = DDP(mlp(11))
        bad.register_comm_hook("nope", hvd.allreduce_hook)
        nn.functional.cross_entropy(bad(x), y).backward()


