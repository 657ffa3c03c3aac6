#!/usr/bin/python3
"""Fashion-MNIST test accuracy of hpml.torch's DistributedOptimizer with each gradient
compression (none, fp16, bf16): the MLP of `hpml train` (784-512-256-10), SGD momentum,
the same seed, data order and global batch for each; every rank trains on its shard of
each global batch. Run under mpirun (Open MPI):

    mpirun -np 2 bench/torch_accuracy.py [--epochs 3] [--batch 64] [--data DIR]

Rank 0 prints one line per compression and epoch and a Markdown table of the final test
accuracies with their difference from `none` (the target: within 0.3 points).
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_pytorch import idx  # noqa: E402  (the IDX reader of the PyTorch reference)

import hpml.torch as hvd  # noqa: E402
from hpml.torch.models import mlp  # noqa: E402


def load(d):
    xtr = idx(os.path.join(d, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255
    ytr = idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    xte = idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255
    yte = idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    mean, std = xtr.mean(), xtr.std()
    return (torch.from_numpy((xtr - mean) / std), torch.from_numpy(ytr),
            torch.from_numpy((xte - mean) / std), torch.from_numpy(yte))


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item() * 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    xtr, ytr, xte, yte = load(a.data)
    glob = a.batch * n
    steps = len(xtr) // glob
    final = {}
    for comp in ("none", "fp16", "bf16"):
        torch.manual_seed(1)
        model = mlp()
        hvd.broadcast_parameters(model.state_dict(), 0)
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9),
            named_parameters=model.named_parameters(),
            compression=getattr(hvd.Compression, comp))
        g = torch.Generator().manual_seed(1)
        lossf = nn.CrossEntropyLoss()
        t0 = time.perf_counter()
        for ep in range(a.epochs):
            perm = torch.randperm(len(xtr), generator=g)
            for s in range(steps):
                i = perm[s * glob + r * a.batch: s * glob + (r + 1) * a.batch]
                opt.zero_grad()
                lossf(model(xtr[i]), ytr[i]).backward()
                opt.step()
            acc = accuracy(model, xte, yte)
            if r == 0:
                print("compression %s epoch %d: test accuracy %.2f%% (%.1f s)"
                      % (comp, ep + 1, acc, time.perf_counter() - t0), flush=True)
        final[comp] = acc
    if r == 0:
        print("\n| compression | test accuracy after %d epochs | difference from none |"
              % a.epochs)
        print("|---|---:|---:|")
        for comp, acc in final.items():
            print("| %s | %.2f%% | %+.2f points |" % (comp, acc, acc - final["none"]))


if __name__ == "__main__":
    main()
