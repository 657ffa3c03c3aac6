"""python3 -m hpml.torch.bench in process (under the same mpirun as the other tests):
Horovod's output lines for each framework, the options' refusals, the models."""

import re

import pytest
import torch

import hpml.torch as hvd
from hpml.torch import bench, models

LINES = [
    r"Model: (mlp|lenet|cnn|resnet8)",
    r"Batch size: 4",
    r"Number of ranks: %d",
    r"Framework: (ddp-gloo|ddp-hpml|none|hpml \((blocking|nonblocking)\)), compression "
    r"(none|fp16|bf16), 1 thread\(s\) per rank",
    r"Running warmup\.\.\.",
    r"Running benchmark\.\.\.",
    r"Iter #0: [0-9]+\.[0-9] img/sec per rank",
    r"Iter #1: [0-9]+\.[0-9] img/sec per rank",
    r"Img/sec per rank: [0-9]+\.[0-9] \+-[0-9]+\.[0-9]",
    r"Total img/sec on %d rank\(s\): [0-9]+\.[0-9] \+-[0-9]+\.[0-9]",
]


@pytest.mark.parametrize("argv", [
    ["--framework", "ddp-gloo", "--model", "cnn"],
    ["--framework", "ddp-hpml", "--fp16-allreduce", "--model", "resnet8"],
    ["--framework", "hpml", "--blocking", "--bucket-bytes", "1000"],
    ["--framework", "hpml", "--nonblocking", "--bf16-allreduce"],
    ["--framework", "none", "--model", "lenet"],
])
def test_bench_prints_horovods_lines(argv, capsys):
    bench.main(argv + ["--batch-size", "4", "--num-warmup-batches", "1",
                       "--num-batches-per-iter", "1", "--num-iters", "2"])
    out = capsys.readouterr().out.splitlines()
    if hvd.rank() != 0:
        assert out == []
        return
    n = hvd.size()
    assert len(out) == len(LINES), out
    for line, pat in zip(out, LINES):
        assert re.fullmatch(pat % n if "%d" in pat else pat, line), (line, pat)
    if "--blocking" in argv or "--nonblocking" in argv:
        assert ("(blocking)" in out[3]) == ("--blocking" in argv)


@pytest.mark.parametrize("argv,msg", [
    (["--batch-size", "0"], "argument --batch-size: '0' must be at least 1"),
    (["--num-iters", "x"], "argument --num-iters: 'x' is not an integer"),
    (["--model", "vgg16"], "argument --model: invalid choice: 'vgg16'"),
    (["--fp16-allreduce", "--bf16-allreduce"], "--fp16-allreduce and --bf16-allreduce exclude"),
    (["--framework", "nccl"], "argument --framework: invalid choice: 'nccl'"),
    (["--blocking", "--nonblocking"], "argument --nonblocking: not allowed with argument"),
])
def test_bench_refuses_bad_options(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    if hvd.rank() == 0:
        assert err.startswith("hpml.torch.bench: " + msg) and err.count("\n") == 1
    else:
        assert err == ""


def test_bench_models_and_defaults():
    assert tuple(sorted(models.MODELS)) == bench.MODEL_NAMES
    a = bench.parse([])
    assert (a.model, a.batch_size, a.num_warmup_batches, a.num_batches_per_iter,
            a.num_iters) == ("mlp", 32, 10, 10, 10)  # Horovod's defaults, but the model
    x = torch.rand(2, 1, 28, 28)
    for name, make in models.MODELS.items():
        assert make()(x).shape == (2, 10), name
    n = sum(p.numel() for p in models.mlp().parameters())
    assert n == 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10
