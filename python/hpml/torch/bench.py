"""python3 -m hpml.torch.bench: Horovod's pytorch_synthetic_benchmark.py on hpml.torch.

    mpirun -np 2 python3 -m hpml.torch.bench --model mlp --batch-size 64

Trains a model on random images with SGD (lr 0.01) and prints, on rank 0, Horovod's lines:
"Iter #k: N img/sec per rank" for each of --num-iters iterations of
--num-batches-per-iter steps after --num-warmup-batches, then "Img/sec per rank: M +-c"
(c = 1.96 x the standard deviation of the iterations' rates) and "Total img/sec on P
rank(s): ...". --framework runs the same loop with PyTorch's DistributedDataParallel over
gloo (ddp-gloo, the CPU baseline) or DDP with hpml's comm hook (ddp-hpml).
"""

import argparse
import os
import socket
import sys
import timeit

# Options are parsed before torch, MPI and hpml are loaded, so a bad command line is
# refused at once.
MODEL_NAMES = ("cnn", "lenet", "mlp", "resnet8")  # hpml.torch.models.MODELS
FRAMEWORKS = ("hpml", "ddp-gloo", "ddp-hpml", "none")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line from rank 0 (or a lone process), every rank exits 2
        rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
        if rank == "0":
            sys.stderr.write("hpml.torch.bench: %s\n" % message)
        sys.exit(2)


def _positive(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not an integer" % text) from None
    if v < 1:
        raise argparse.ArgumentTypeError("%r must be at least 1" % text)
    return v


def _nonnegative(text):
    if text == "0":
        return 0
    return _positive(text)


def parse(argv=None):
    ap = _Parser(prog="python3 -m hpml.torch.bench",
                 description="PyTorch synthetic benchmark (Horovod's options) on hpml.torch")
    ap.add_argument("--model", default="mlp", choices=MODEL_NAMES,
                    help="model to benchmark (default mlp)")
    ap.add_argument("--batch-size", type=_positive, default=32, help="input batch size per rank")
    ap.add_argument("--num-warmup-batches", type=_nonnegative, default=10,
                    help="number of warm-up batches that don't count towards the rate")
    ap.add_argument("--num-batches-per-iter", type=_positive, default=10,
                    help="number of batches per benchmark iteration")
    ap.add_argument("--num-iters", type=_positive, default=10,
                    help="number of benchmark iterations")
    ap.add_argument("--fp16-allreduce", action="store_true",
                    help="gradients travel as float16 (Compression.fp16)")
    ap.add_argument("--bf16-allreduce", action="store_true",
                    help="gradients travel as bfloat16 (Compression.bf16)")
    ap.add_argument("--no-cuda", action="store_true",
                    help="accepted for Horovod's command lines: hpml runs on CPUs only")
    ap.add_argument("--framework", default="hpml", choices=FRAMEWORKS,
                    help="hpml: hpml.torch.DistributedOptimizer (default); ddp-gloo: "
                         "DistributedDataParallel over gloo; ddp-hpml: DDP with hpml's comm hook; "
                         "none: no gradient exchange, every rank trains alone (the bound that "
                         "the machine sets for a synchronous run)")
    ap.add_argument("--threads", type=_positive, default=1,
                    help="torch threads per rank (default 1)")
    ap.add_argument("--bucket-bytes", type=_positive, default=None,
                    help="hpml.torch's fusion bucket size (default 1 MiB)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--blocking", dest="nonblocking", action="store_const", const=False,
                      help="hpml: reduce each bucket with the blocking allreduce as it becomes "
                           "ready (DistributedOptimizer(nonblocking=False))")
    mode.add_argument("--nonblocking", dest="nonblocking", action="store_const", const=True,
                      help="hpml: start each bucket's iallreduce and let backward go on "
                           "(nonblocking=True); default: DistributedOptimizer's choice")
    a = ap.parse_args(argv)
    if a.fp16_allreduce and a.bf16_allreduce:
        ap.error("--fp16-allreduce and --bf16-allreduce exclude each other")
    return a


def _gloo():
    import torch.distributed as dist
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    port = None
    if w.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = w.bcast(port, root=0)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=w.rank,
                            world_size=w.size)


def build(a):
    """(model, optimizer) for the framework, parameters and state identical on every rank."""
    import torch

    import hpml.torch as hvd

    from .models import MODELS
    torch.manual_seed(42)
    model = MODELS[a.model]()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    comp = hvd.Compression.fp16 if a.fp16_allreduce else (
        hvd.Compression.bf16 if a.bf16_allreduce else hvd.Compression.none)
    if a.framework == "none":
        return model, opt
    if a.framework == "hpml":
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                       compression=comp, bucket_bytes=a.bucket_bytes,
                                       nonblocking=a.nonblocking)
        return model, opt
    from torch.nn.parallel import DistributedDataParallel as DDP
    _gloo()
    model = DDP(model)
    if a.framework == "ddp-hpml":
        hook = {hvd.Compression.none: hvd.allreduce_hook, hvd.Compression.fp16:
                hvd.fp16_compress_hook, hvd.Compression.bf16: hvd.bf16_compress_hook}[comp]
        model.register_comm_hook(None, hook)
    elif comp is hvd.Compression.fp16:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif comp is hvd.Compression.bf16:
        raise SystemExit("hpml.torch.bench: --bf16-allreduce with ddp-gloo: PyTorch's bf16 "
                         "hook needs CUDA and NCCL")
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def main(argv=None):
    a = parse(argv)
    import numpy as np
    import torch
    import torch.nn.functional as F

    import hpml.torch as hvd

    torch.set_num_threads(a.threads)
    hvd.init()
    model, opt = build(a)
    data = torch.rand(a.batch_size, 1, 28, 28)
    target = torch.randint(0, 10, (a.batch_size,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(data), target).backward()
        opt.step()

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    n = hvd.size()
    comp = "fp16" if a.fp16_allreduce else ("bf16" if a.bf16_allreduce else "none")
    log("Model: %s" % a.model)
    log("Batch size: %d" % a.batch_size)
    log("Number of ranks: %d" % n)
    mode = ""
    if a.framework == "hpml":
        mode = " (nonblocking)" if opt._hpml_nonblocking else " (blocking)"
    log("Framework: %s%s, compression %s, %d thread(s) per rank" % (a.framework, mode, comp,
                                                                     a.threads))
    log("Running warmup...")
    timeit.timeit(step, number=a.num_warmup_batches)
    log("Running benchmark...")
    rates = []
    for k in range(a.num_iters):
        t = timeit.timeit(step, number=a.num_batches_per_iter)
        rate = a.batch_size * a.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per rank" % (k, rate))
        rates.append(rate)
    mean, conf = np.mean(rates), 1.96 * np.std(rates)
    log("Img/sec per rank: %.1f +-%.1f" % (mean, conf))
    log("Total img/sec on %d rank(s): %.1f +-%.1f" % (n, n * mean, n * conf))
    if a.framework.startswith("ddp"):
        hvd.destroy_process_group()


if __name__ == "__main__":
    main()
