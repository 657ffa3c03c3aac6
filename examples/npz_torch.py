#!/usr/bin/env python3
"""An hpml model in PyTorch, and a PyTorch model in hpml, through NumPy's .npz.

    hpml export --model-file m.hpml --out m.npz
    python3 examples/npz_torch.py m.npz images.npy [probabilities.npy]

builds the torch.nn.Sequential that the archive describes (its hpml_modules), loads its
state_dict from the arrays ("0.weight", "0.bias", ...), normalises the images as hpml
does (8-bit pixels / 255, then (x - hpml_mean) / hpml_std) and prints each row's class
(or saves the softmax probabilities). The other way, any such Sequential is saved for
hpml with

    np.savez("t.npz", **{k: v.numpy() for k, v in model.state_dict().items()},
             hpml_spec=np.str_(SPEC), hpml_input_shape=np.int32([1, 28, 28]),
             hpml_mean=np.float32(MEAN), hpml_std=np.float32(STD))

and then `hpml eval --model-file t.npz`, `hpml predict`, `hpml import` or
`hpml train --init-from t.npz` (fine-tuning) read it (docs/models.md).
"""
import sys

import numpy as np
import torch
from torch import nn


def sequential(modules):
    """The nn.Sequential of hpml_modules: one module a line, "Linear IN OUT", ..."""
    layers = []
    for line in modules.splitlines():
        word, *a = line.split()
        if word == "Linear":
            layers.append(nn.Linear(int(a[0]), int(a[1])))
        elif word == "Conv2d":
            layers.append(nn.Conv2d(int(a[0]), int(a[1]), int(a[2]), stride=int(a[3]),
                                    padding=int(a[4])))
        elif word == "MaxPool2d":
            layers.append(nn.MaxPool2d(int(a[0]), stride=int(a[1])))
        elif word == "ReLU":
            layers.append(nn.ReLU())
        elif word == "Flatten":
            layers.append(nn.Flatten())
        elif word == "Dropout":
            layers.append(nn.Dropout(float(a[0])))
        else:
            raise ValueError(f"unknown module {line!r}")
    return nn.Sequential(*layers)


def load(path):
    """The model of an hpml .npz, in eval mode, with what its inputs need."""
    z = np.load(path)
    model = sequential(str(z["hpml_modules"]))
    params = {k: torch.from_numpy(z[k]) for k in z.files if not k.startswith("hpml_")}
    model.load_state_dict(params)  # strict: every name and shape must match
    model.eval()
    shape = tuple(int(v) for v in z["hpml_input_shape"])
    return model, shape, float(z["hpml_mean"]), float(z["hpml_std"])


def predict(model, shape, mean, std, images):
    x = images.astype(np.float32)
    if images.dtype == np.uint8:
        x /= 255.0
    x = (x - np.float32(mean)) / np.float32(std)
    flat = isinstance(model[0], nn.Linear)
    x = torch.from_numpy(x.reshape((len(x), -1) if flat else (len(x),) + shape))
    with torch.no_grad():
        return torch.softmax(model(x), dim=1).numpy()


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.split("\n\n")[1])
    model, shape, mean, std = load(sys.argv[1])
    proba = predict(model, shape, mean, std, np.load(sys.argv[2]))
    if len(sys.argv) == 4:
        np.save(sys.argv[3], proba)
    else:
        print("\n".join(str(c) for c in proba.argmax(axis=1)))


if __name__ == "__main__":
    main()
