#!/usr/bin/python3
"""PyTorch (CPU) reference for `hpml train`: same models, same batch, same optimizer.

  train_pytorch.py synthetic --model mlp|lenet --batch 128 --threads 1 [--iters 200]
  train_pytorch.py accuracy  --model mlp --epochs 5 --threads 2 [--data DIR]

synthetic prints images/s of full training steps (forward, backward, SGD momentum) on
random data; accuracy trains on Fashion-MNIST and prints per-epoch test accuracy and
the training time until the test accuracy first reaches 85%.
"""
import argparse, gzip, os, struct, sys, time

import numpy as np
import torch
import torch.nn as nn

MODELS = {
    # hpml: dense 512 relu | dense 256 relu | dense 10
    "mlp": lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(),
                                 nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10)),
    # hpml: conv 6 5x5 pad2 relu | pool 2 | conv 16 5x5 relu | pool 2 | dense 120 relu |
    #       dense 84 relu | dense 10
    "lenet": lambda: nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                   nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                                   nn.Linear(84, 10)),
}


def idx(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    nd = data[3]
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * nd).reshape(dims)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    ap.add_argument("mode", choices=["synthetic", "accuracy"],
                    help="synthetic: images/s on random data; accuracy: Fashion-MNIST "
                         "test accuracy per epoch")
    ap.add_argument("--model", default="mlp", choices=sorted(MODELS),
                    help="the model (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=128, help="batch size (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch.set_num_threads (default: %(default)s)")
    ap.add_argument("--iters", type=int, default=200,
                    help="synthetic: timed steps (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=20,
                    help="synthetic: untimed first steps (default: %(default)s)")
    ap.add_argument("--epochs", type=int, default=5, help="accuracy: epochs (default: %(default)s)")
    ap.add_argument("--lr", type=float, default=0.05,
                    help="SGD learning rate, momentum 0.9 (default: %(default)s)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", metavar="DIR",
                    help="accuracy: Fashion-MNIST directory (default: %(default)s)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = MODELS[a.model]()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    lossf = nn.CrossEntropyLoss()

    if a.mode == "synthetic":
        x = torch.rand(a.batch, 1, 28, 28)
        y = torch.randint(0, 10, (a.batch,))
        for i in range(a.warmup + a.iters):
            if i == a.warmup:
                t0, c0 = time.perf_counter(), time.process_time()
            opt.zero_grad(set_to_none=True)
            lossf(model(x), y).backward()
            opt.step()
        dt, ct = time.perf_counter() - t0, time.process_time() - c0
        print(f"pytorch {torch.__version__} {a.model} batch {a.batch} threads {a.threads}: "
              f"{a.batch * a.iters / dt:.0f} images/s, {a.batch * a.iters / ct:.0f} "
              f"images per CPU-second")
        return

    d = a.data
    xtr = idx(os.path.join(d, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255
    ytr = idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    xte = idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255
    yte = idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    mean, std = xtr.mean(), xtr.std()
    xtr = torch.from_numpy((xtr - mean) / std).unsqueeze(1)
    xte = torch.from_numpy((xte - mean) / std).unsqueeze(1)
    ytr, yte = torch.from_numpy(ytr), torch.from_numpy(yte)
    g = torch.Generator().manual_seed(1)
    train_time, t85 = 0.0, None
    for ep in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        perm = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(xtr), a.batch):
            b = perm[i:i + a.batch]
            opt.zero_grad(set_to_none=True)
            lossf(model(xtr[b]), ytr[b]).backward()
            opt.step()
        train_time += time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        if t85 is None and acc >= 0.85:
            t85 = train_time
        print(f"epoch {ep} test {100 * acc:.2f}% train_time {train_time:.2f}s "
              f"{len(xtr) * ep / train_time:.0f} images/s", flush=True)
    print(f"pytorch {a.model} threads {a.threads}: time to 85% = "
          f"{'%.2f s' % t85 if t85 is not None else 'not reached'}")


if __name__ == "__main__":
    sys.exit(main())
