"""Saves the user-style CNN that experiments/own_torchscript_fashion.json trains, as TorchScript.

    .venv/bin/python experiments/own_torchscript_net.py runs/own_torchscript_net.pt

A network none of ddplab's built-in models is: two conv blocks with BatchNorm and GELU, global
average pooling, dropout and a linear head (docs/models.md, "From Python").
"""
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.GELU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.GELU(),
        )
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.jit.script(Net()).save(sys.argv[1])
