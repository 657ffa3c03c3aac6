"""Models of the synthetic benchmark (python3 -m hpml.torch.bench), torchvision-free, on
1 x 28 x 28 images and 10 classes: the MLP and LeNet of `hpml train` (the layers of its
model specs, as bench/train_pytorch.py builds them) and a small CNN and ResNet."""

import torch.nn as nn


def mlp():
    """784-512-256-10, ReLU (hpml train's mlp)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                         nn.ReLU(), nn.Linear(256, 10))


def lenet():
    """LeNet-5 (hpml train's lenet): conv 6 5x5 pad 2, pool, conv 16 5x5, pool, 120-84-10."""
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def cnn():
    """Three 3x3 conv blocks (32, 64, 128 channels) with batch norm, global pooling, 10."""
    layers, cin = [], 1
    for cout in (32, 64, 128):
        layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                   nn.ReLU(), nn.MaxPool2d(2)]
        cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


class _Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        return (y + (x if self.short is None else self.short(x))).relu()


def resnet8():
    """A ResNet of 3 stages of one basic block each (16, 32, 64 channels): 8 layers."""
    return nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         _Block(16, 16, 1), _Block(16, 32, 2), _Block(32, 64, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


MODELS = {"mlp": mlp, "lenet": lenet, "cnn": cnn, "resnet8": resnet8}
