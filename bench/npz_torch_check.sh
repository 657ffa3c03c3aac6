#!/usr/bin/env bash
# hpml models in PyTorch and PyTorch models in hpml, through .npz (docs/models.md): runs
# examples/npz_torch.py and checks that torch's outputs equal hpml's.
#
#   bench/npz_torch_check.sh [openmpi|mpich]      (binary: build/<mpi>/bin/hpml or $HPML)
#
# 1. hpml trains an MLP and small-cnn, exports them; examples/npz_torch.py evaluates them
#    in a torch.nn.Sequential on Fashion-MNIST's first 2000 test images: the softmax
#    outputs agree with hpml predict --proba to 1e-5 and the classes are the same.
# 2. PyTorch trains an MLP, saves its state_dict with np.savez; hpml eval and predict read
#    it (the same probabilities to 1e-5, torch's accuracy) and hpml train --init-from
#    fine-tunes it for an epoch.
# Installs python3-torch (scripts/install-deps.sh --torch) when it is missing. Exit 1 when
# a check fails. Not part of make test (PyTorch is large and slow to import).
set -eu
mpi=${1:-openmpi}
repo=$(cd "$(dirname "$0")/.." && pwd)
hpml=${HPML:-$repo/build/$mpi/bin/hpml}
data=/usr/share/datasets/fashion-mnist
py=${PYTHON:-/usr/bin/python3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
"$py" -c 'import torch' 2>/dev/null || "$repo/scripts/install-deps.sh" --torch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# The test images and labels as .npy (uint8 pixels, as hpml reads the IDX files).
"$py" - "$data" "$tmp" <<'PYEOF'
import gzip, sys, numpy as np
d, t = sys.argv[1:]
im = np.frombuffer(gzip.open(d + "/t10k-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
lab = np.frombuffer(gzip.open(d + "/t10k-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
np.save(t + "/im.npy", im.reshape(-1, 28, 28)[:2000])
np.save(t + "/lab.npy", lab[:2000].astype(np.int32))
PYEOF

compare() { # NAME HPML_PROBA TORCH_PROBA
    "$py" - "$@" <<'PYEOF' || fails=$((fails + 1))
import sys, numpy as np
name, a, b = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3])
d = float(np.abs(a - b).max())
same = int((a.argmax(1) == b.argmax(1)).sum())
ok = d <= 1e-5 and same == len(a)
print(f"{name:<28} max |hpml - torch| {d:.2e}   same class {same}/{len(a)}   "
      f"{'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PYEOF
}

echo "# hpml -> PyTorch (examples/npz_torch.py)"
for m in mlp small-cnn; do
    "$hpml" train --model $m --epochs 1 --train-limit 6000 --no-progress --test-limit 1000 \
        --save "$tmp/$m.hpml" >/dev/null
    "$hpml" export --model-file "$tmp/$m.hpml" --out "$tmp/$m.npz"
    "$hpml" predict -f "$tmp/$m.hpml" --images "$tmp/im.npy" --proba "$tmp/$m.h.npy" \
        -o "$tmp/x.npy"
    "$py" "$repo/examples/npz_torch.py" "$tmp/$m.npz" "$tmp/im.npy" "$tmp/$m.t.npy"
    compare "$m" "$tmp/$m.h.npy" "$tmp/$m.t.npy"
done

echo "# PyTorch -> hpml (np.savez of a state_dict)"
"$py" - "$data" "$tmp" "$repo/examples" <<'PYEOF'
import gzip, sys, numpy as np, torch
from torch import nn
d, t, ex = sys.argv[1:]
sys.path.insert(0, ex)
import npz_torch
im = np.frombuffer(gzip.open(d + "/train-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
lab = np.frombuffer(gzip.open(d + "/train-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
x = im.reshape(-1, 784)[:6000].astype(np.float32) / 255
mean, std = float(x.mean()), float(x.std())
x = torch.from_numpy((x - mean) / std)
y = torch.from_numpy(lab[:6000].astype(np.int64))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(2):
    for i in range(0, 6000, 100):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + 100]), y[i:i + 100]).backward()
        opt.step()
np.savez_compressed(t + "/torch.npz", **{k: v.numpy() for k, v in model.state_dict().items()},
                    hpml_spec=np.str_("dense 128 relu | dense 10"),
                    hpml_input_shape=np.int32([1, 28, 28]),
                    hpml_mean=np.float32(mean), hpml_std=np.float32(std))
model.eval()
timg = np.load(t + "/im.npy")
p = npz_torch.predict(model, (1, 28, 28), np.float32(mean), np.float32(std), timg)
np.save(t + "/torch.t.npy", p)
acc = (p.argmax(1) == np.load(t + "/lab.npy")).mean()
print(f"torch MLP (2 epochs on 6000 rows): test accuracy {100 * acc:.2f}% on 2000 images")
PYEOF
"$hpml" predict -f "$tmp/torch.npz" --images "$tmp/im.npy" --proba "$tmp/torch.h.npy" \
    -o "$tmp/x.npy"
compare "torch mlp in hpml predict" "$tmp/torch.h.npy" "$tmp/torch.t.npy"
"$hpml" eval -f "$tmp/torch.npz" --images "$tmp/im.npy" --labels "$tmp/lab.npy"
"$hpml" train --model "dense 128 relu | dense 10" --init-from "$tmp/torch.npz" --epochs 1 \
    --train-limit 6000 --test-limit 2000 --no-progress | tail -1
[ $fails -eq 0 ] && echo "npz_torch_check: all checks passed"
exit $((fails > 0))
