# realworld: negative graphs=1
# Pattern: blocks that carry their own index (karpathy/nanochat nanochat/gpt.py:
# `nn.ModuleList([Block(config, layer_idx) for layer_idx in
# range(config.n_layer)])`), the model compiled whole (nanochat
# scripts/base_train.py: `model = torch.compile(model, dynamic=False)`). Each
# block's forward is inlined into one graph with its index as a constant:
# nothing recompiles, so FR005 must stay quiet (only regional compilation,
# block by block, shares one code object between indices).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1 graph.
import torch
import torch.nn as nn
from types import SimpleNamespace


class Block(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.mlp = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x):
        h = self.mlp(torch.tanh(x))
        return x + h * (2 * (self.layer_idx + 1)) ** -0.5


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([Block(config, layer_idx) for layer_idx in range(config.n_layer)])

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return x


torch.manual_seed(0)
config = SimpleNamespace(n_layer=12, n_embd=8)
model = GPT(config)
model = torch.compile(model, backend="eager")

x = torch.randn(2, config.n_embd)
with torch.no_grad():
    for _ in range(3):
        x = torch.tanh(model(x))
print([round(v, 4) for v in x.flatten().tolist()])
