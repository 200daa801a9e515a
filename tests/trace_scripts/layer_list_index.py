"""Blocks compiled one by one read a per-instance int (`self.layer_idx`) to
index a Python list: the unspec flag cannot cure it (each index is another
element), and FR005 says so; the trace must not set the flag anyway."""
from types import SimpleNamespace

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.scales = config.scales
        self.mlp = nn.Linear(4, 4)

    def forward(self, x):
        return x + self.mlp(x) * self.scales[self.layer_idx]


class Net(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([Block(config, i) for i in range(config.n_layer)])

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return x


torch.manual_seed(0)
config = SimpleNamespace(n_layer=4, scales=[1.0 / (i + 1) for i in range(4)])
model = Net(config)
for m in model.modules():
    if isinstance(m, Block):
        # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
        m.compile(backend="eager")
with torch.no_grad():
    x = model(torch.ones(2, 4))
print("result:", round(float(x.sum()), 4))
