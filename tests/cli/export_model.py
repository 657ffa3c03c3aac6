"""NumPy's side of tests/cli/export.sh: an independent forward pass over an .npz that
hpml export wrote (the state_dict of the equivalent torch.nn.Sequential), and .npz files
as NumPy writes them. Usage:
  export_model.py forward M.npz IMAGES.npy OUT.npy    softmax of the forward pass
  export_model.py perturb M.npz OUT.npz {stored|deflate|statedict}
  export_model.py bad M.npz DIR                        broken archives into DIR
  export_model.py close A.npy B.npy                    fail unless equal to 1e-5
  export_model.py differ A.npy B.npy                   fail unless they differ (> 1e-3)
Several commands run in one process when separated by '+' (NumPy loads once).
"""
import sys
import zipfile

import numpy as np


def conv2d(x, w, b, stride, pad):
    """x (N, C, H, W), w (O, C, K, K): cross-correlation as torch.nn.Conv2d."""
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - k) // stride + 1
    ow = (wd + 2 * pad - k) // stride + 1
    cols = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    cols = cols[:, :, ::stride, ::stride][:, :, :oh, :ow]  # (N, C, OH, OW, K, K)
    y = np.einsum("nchwij,ocij->nohw", cols.astype(np.float64), w.astype(np.float64))
    return y + b[None, :, None, None]


def maxpool(x, k, s):
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return win.max(axis=(4, 5))


def forward(z, x):
    c, h, w = (int(v) for v in z["hpml_input_shape"])
    x = (x.astype(np.float64) - float(z["hpml_mean"])) / float(z["hpml_std"])
    mods = str(z["hpml_modules"]).split("\n")
    x = x.reshape(len(x), -1) if mods[0].startswith("Linear") else x.reshape(len(x), c, h, w)
    for i, line in enumerate(m for m in mods if m):
        word, *args = line.split()
        if word == "Linear":
            x = x @ z[f"{i}.weight"].astype(np.float64).T + z[f"{i}.bias"]
        elif word == "Conv2d":
            x = conv2d(x, z[f"{i}.weight"], z[f"{i}.bias"], int(args[3]), int(args[4]))
        elif word == "MaxPool2d":
            x = maxpool(x, int(args[0]), int(args[1]))
        elif word == "ReLU":
            x = np.maximum(x, 0)
        elif word == "Flatten":
            x = x.reshape(len(x), -1)
        elif word != "Dropout":
            raise SystemExit(f"unknown module {line}")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(argv):
    cmd = argv[0]
    if cmd in ("close", "differ"):
        a, b = np.load(argv[1]), np.load(argv[2])
        d = np.abs(a.astype(np.float64) - b).max() if a.shape == b.shape else np.inf
        if (d > 1e-5) if cmd == "close" else (d <= 1e-3):
            print(f"FAIL: {argv[1]} and {argv[2]}: max difference {d}")
            return 1
        return 0
    z = np.load(argv[1])
    if cmd == "forward":
        np.save(argv[3], forward(z, np.load(argv[2])).astype(np.float32))
    elif cmd == "perturb":
        d = {k: z[k] for k in z.files}
        d["0.bias"] = d["0.bias"] + np.float32(0.5)  # a changed weight hpml must pick up
        kind = argv[3]
        if kind == "statedict":  # only the parameters, as from model.state_dict()
            d = {k: v for k, v in d.items() if not k.startswith("hpml_")}
        (np.savez_compressed if kind == "deflate" else np.savez)(argv[2], **d)
    elif cmd == "bad":
        out = argv[2]
        d = {k: z[k] for k in z.files}
        raw = open(argv[1], "rb").read()
        open(out + "/trunc.npz", "wb").write(raw[: len(raw) // 2])
        np.savez(out + "/shape.npz", **{**d, "0.weight": d["0.weight"][:, :-1]})
        np.savez(out + "/missing.npz", **{k: v for k, v in d.items() if k != "0.bias"})
        np.savez(out + "/extra.npz", **d, extra=np.zeros(3, np.float32))
        nan = d["0.weight"].copy()
        nan[1, 2] = np.nan
        np.savez(out + "/nan.npz", **{**d, "0.weight": nan})
        np.savez(out + "/spec.npz", **{**d, "hpml_spec": np.str_("dense 10")})
        with zipfile.ZipFile(out + "/bzip.npz", "w", zipfile.ZIP_BZIP2) as f:
            f.writestr("0.bias.npy", b"x" * 100)
    else:
        raise SystemExit(f"unknown command {cmd}")
    return 0


def main():
    args, status = sys.argv[1:], 0
    while args:
        cut = args.index("+") if "+" in args else len(args)
        status |= run(args[:cut])
        args = args[cut + 1 :]
    sys.exit(status)


main()
